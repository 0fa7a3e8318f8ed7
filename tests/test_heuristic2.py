"""Regression tests for issue 17's slow reduce kernels of a GPT step (chapter 6b's `_reduce_plan`).

- A reduce with a costly tail (a GELU after `x @ W.T + b`) ran its tail one output at a time, because the plan
  priced only the loop: the price now counts the work after it (`_tail_work`), and the vector goes along the outputs.
  With only a bias after the matmul, partial sums (vectors along the reduce) stay.
- Of two tiles of the same price, the rules took the first axis (a batch axis, rows 8192 floats apart, which share
  L1 cache sets) over the sequence axis (rows 32 floats apart): they take the one whose rows lie closest now.
The device tests check the results of such kernels against numpy, with the opts the rules choose on each device.
"""
import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor
from tinylit.device import Device
from tinylit.heuristic import hand_coded_optimizations
from tinylit.kernel import Kernel, Opt, OptOps
from tinylit.realize import run_schedule
from tinylit.schedule import create_schedule


def planned(t: Tensor) -> Kernel:
  "The CPU rules' kernel for the last schedule item of `t` (the items before it run)."
  *before, si = create_schedule([t.lazydata])
  run_schedule(before)
  return hand_coded_optimizations(Kernel(si.ast, Device["CPU"].renderer))


def linear_inputs(device: str = "CPU", tokens: int = 256, width: int = 128, outs: int = 256):
  rng = np.random.default_rng(0)
  x = rng.standard_normal((tokens, width)).astype(np.float32)
  w = (rng.standard_normal((outs, width)) / width**0.5).astype(np.float32)
  b = (rng.standard_normal(outs) / 10).astype(np.float32)
  return (x, w, b), tuple(Tensor(a, device=device).realize() for a in (x, w, b))


def test_costly_tail_takes_vectors_along_the_outputs():
  "gelu(x @ W.T + b): vectors along the outputs (the bias is contiguous there), and they are the kernel's vector."
  _, (x, w, b) = linear_inputs()
  k = planned((x @ w.T + b).gelu())
  width = Device["CPU"].vector_width   # 16 with AVX-512, 8 with AVX2 (chapter 8a)
  assert k.applied_opts[0] == Opt(OptOps.UPCAST, 1, width), k.applied_opts
  assert k.vector_axis() is not None and k.full_shape[k.vector_axis()] == width, "the output axis is the vector"


def test_cheap_tail_keeps_partial_sums():
  """x @ W.T + b (a bias only) and x @ W.T: partial sums, as before; gathering W's columns would cost more. (A reduce
  of 512: up to 256, chapter 4's rule 8 packs W first, and the kernel reads it like a plain matmul's B.)"""
  _, (x, w, b) = linear_inputs(width=512)
  width = Device["CPU"].vector_width
  for t in (x @ w.T + b, x @ w.T):
    assert planned(t).applied_opts[0] == Opt(OptOps.UNROLL, 0, width), planned(t).applied_opts


def test_tile_takes_the_rows_closest_together():
  "Heads put back together, then a projection: of two tiles of the same price, the one along the sequence axis."
  rng = np.random.default_rng(1)
  heads = Tensor(rng.standard_normal((8, 4, 16, 32)).astype(np.float32)).realize()   # (B, H, T, D)
  w = Tensor(rng.standard_normal((128, 128)).astype(np.float32)).realize()
  k = planned(heads.permute(0, 2, 1, 3).reshape(8, 16, 128) @ w.T)
  # axes (B, T, outputs | H, D): a tile along T (x's rows 32 floats apart), not along B (rows 2048 floats apart)
  # (as many rows as the CPU's vector registers hold: 8, or 4 with AVX2's 16)
  tile = [o for o in k.applied_opts if o.op is OptOps.UPCAST and o.axis in (0, 1)]
  assert len(tile) == 1 and tile[0].axis == 1 and tile[0].amt in (4, 8), k.applied_opts


def gelu_np(x: np.ndarray) -> np.ndarray:
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("device", DEVICES)
def test_costly_tail_kernels_compute_right(device):
  "gelu(x @ W.T + b), forward and the gradients of x, W and b, with the rules' opts, against numpy."
  (x_np, w_np, b_np), (x, w, b) = linear_inputs(device, tokens=64, width=32, outs=48)
  for t in (x, w, b): t.requires_grad = True
  out = (x @ w.T + b).gelu()
  pre = x_np @ w_np.T + b_np
  np.testing.assert_allclose(out.numpy(), gelu_np(pre), rtol=1e-4, atol=1e-4)
  out.sum().backward()
  eps = 1e-3   # the GELU's derivative, by central differences of the numpy GELU (float64)
  dpre = (gelu_np(pre.astype(np.float64) + eps) - gelu_np(pre.astype(np.float64) - eps)) / (2 * eps)
  np.testing.assert_allclose(b.grad.numpy(), dpre.sum(0), rtol=1e-3, atol=1e-3)
  np.testing.assert_allclose(w.grad.numpy(), dpre.T @ x_np, rtol=1e-3, atol=1e-3)
  np.testing.assert_allclose(x.grad.numpy(), dpre @ w_np, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_merged_heads_projection_computes_right(device):
  "The projection of heads put back together (the tile along the sequence axis), against numpy."
  rng = np.random.default_rng(3)
  h_np = rng.standard_normal((8, 4, 16, 32)).astype(np.float32)
  w_np = rng.standard_normal((128, 128)).astype(np.float32)
  got = (Tensor(h_np, device=device).permute(0, 2, 1, 3).reshape(8, 16, 128) @ Tensor(w_np, device=device).T).numpy()
  np.testing.assert_allclose(got, h_np.transpose(0, 2, 1, 3).reshape(8, 16, 128) @ w_np.T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_strides_are_priced(device):
  "A buffer of symbolic size (a KV cache up to `start_pos`) has a symbolic row stride: the tile's tie-break takes it."
  from tinylit.ops import UOp
  rng = np.random.default_rng(4)
  x_np, w_np = rng.standard_normal((16, 32, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
  n = UOp.variable("n", 1, 32).bind(24)
  h = Tensor(x_np, device=device).shrink(((0, 16), (0, n), (0, 64))).contiguous()   # rows n * 64 floats apart
  got = (h @ Tensor(w_np, device=device).T).sum(1).numpy()
  np.testing.assert_allclose(got, (x_np[:, :24] @ w_np.T).sum(1), rtol=1e-4, atol=1e-3)
