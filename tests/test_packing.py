"""Issue 17's last slow kernels of a GPT step, and what fixed them.

- Rule 8 of chapter 4 (packing): `x @ w.T` and `q @ k.T` read an operand across the output's contiguous axis, where
  the CPU's vector lanes go; with a short reduce (at most 256) the scheduler copies that operand first, laid out with
  that axis innermost, and the product reads it like a plain matmul's B. A cached schedule makes its own copies again.
- `costly` (chapter 4): an expression read by 64 or more columns is computed into a buffer of its own from 4 ops on.
- A reduce that two kernels would compute inline (a product read by a GELU and by its gradient) is stored once.
- A weight's gradient `X.T @ G` whose `G` is bigger than the L2 cache takes blocks of the reduce, as `A @ B` does.
- Chapter 6a's exp2 below -150 (a causal mask's -inf) gives 0 without the underflowing multiplies (x86's slow path).
- Chapter 7's C loads a vector of bools from memory as bytes widened into a mask, so a `where` on it stays one select.
Results are checked on every device; how many kernels a rule makes depends on the device (packing is for devices
without workgroups).
"""
import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor
from tinylit.device import Device
from tinylit.helpers import Context
from tinylit.ops import Ops
from tinylit.realize import run_schedule


def rand(*shape: int, seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def packs(device: str) -> bool:
  "Does rule 8 apply on this device (no workgroups)?"
  return not Device[device].renderer.has_local


def reduce_ast(schedule):
  (si,) = [si for si in schedule if any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort)]
  return si.ast


@pytest.mark.parametrize("device", DEVICES)
def test_linear_packs_its_weight(device):
  "x @ w.T at a GPT's size: a copy of w, then a product that reads the copy with stride 1 along the outputs."
  x_np, w_np = rand(2048, 128), rand(384, 128, seed=1)
  x, w = Tensor(x_np, device=device).realize(), Tensor(w_np, device=device).realize()
  schedule = (x @ w.T).schedule()
  assert len(schedule) == (2 if packs(device) else 1)
  if packs(device):
    loads = [u for u in reduce_ast(schedule).toposort if u.op is Ops.LOAD]
    # the product's loads: x along the reduce, the packed w along the outputs (stride 1 on the output axis)
    assert sorted(u.src[1].arg.views[-1].strides for u in loads) == [(0, 1, 384), (128, 0, 1)]
  run_schedule(schedule)
  np.testing.assert_allclose((x @ w.T).numpy(), x_np @ w_np.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_a_product_of_a_stored_input_packs_once(device):
  """`x.exp() @ w.T`: the exp is stored (rule 4, read across a broadcast) and `w` packed once. (Loading the exp used to
  make the builder build the product twice, and the first build's copy of `w` ran for nothing.) No kernel writes a
  buffer that nothing reads but the output."""
  x_np, w_np = rand(2048, 128), rand(384, 128, seed=1)
  x, w = Tensor(x_np, device=device).realize(), Tensor(w_np, device=device).realize()
  t = x.exp() @ w.T
  schedule = t.schedule()
  assert len(schedule) == (3 if packs(device) else 2)
  read = {b for si in schedule for b in si.inputs}
  assert all(b in read for si in schedule[:-1] for b in si.outputs)
  np.testing.assert_allclose(t.numpy(), np.exp(x_np) @ w_np.T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_and_backward_in_one_schedule_pack_only_the_forward(device):
  """A linear layer's forward `y = x @ w.T` (a reduce over the width) and, from autograd, its input's gradient
  (`g @ w`, a reduce over the outputs: a vocabulary of 77, as nanoGPT's head) read `w` through the same view of the same
  loop shape, reduced over different axes. Only the forward is packed; the gradient reads `w` itself, contiguous
  along its outputs. (Rule 8 keyed its copies by the view alone, and the gradient read the forward's transposed copy:
  no vector lanes, a scalar loop at 6 GFLOPS.)"""
  x_np, w_np, g_np = rand(12, 64, 128), rand(77, 128, seed=1), rand(12, 64, 77, seed=2)
  x = Tensor(x_np, device=device, requires_grad=True).realize()
  w, g = Tensor(w_np, device=device).realize(), Tensor(g_np, device=device).realize()
  y = x @ w.T
  (y * g).sum().backward()
  schedule = Tensor.schedule(y, x.grad)
  if packs(device):
    (grad,) = [si for si in schedule if si.outputs[0] is x.grad.lazydata.base.buffer]
    assert w.lazydata.buffer in grad.inputs
  run_schedule(schedule)
  np.testing.assert_allclose(y.numpy(), x_np @ w_np.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), g_np @ w_np, rtol=1e-4, atol=1e-4)


def test_pack_turns_off():
  x, w = Tensor(rand(2048, 128)).realize(), Tensor(rand(384, 128, seed=1)).realize()
  with Context(PACK=0): assert len((x @ w.T).schedule()) == 1
  assert len((x @ w.T).schedule()) == 2   # and on again: the schedule cache keeps the two apart


@pytest.mark.parametrize("device", DEVICES)
def test_attention_scores_pack_k(device):
  "q @ k.T per head (reduce 32): k is packed, and the scores are right."
  q_np, k_np = rand(8, 4, 64, 32), rand(8, 4, 64, 32, seed=1)
  q, k = Tensor(q_np, device=device).realize(), Tensor(k_np, device=device).realize()
  scores = q @ k.transpose(-2, -1)
  assert len(scores.schedule()) == (2 if packs(device) else 1)
  np.testing.assert_allclose(scores.numpy(), q_np @ k_np.transpose(0, 1, 3, 2), rtol=1e-4, atol=1e-4)


def test_long_reduce_and_small_kernels_are_not_packed():
  "A reduce of 512 is fast with vectors along it; a kernel under 2**20 points doesn't pay for a copy."
  x, w = Tensor(rand(256, 512)).realize(), Tensor(rand(256, 512, seed=1)).realize()
  assert len((x @ w.T).schedule()) == 1
  x, w = Tensor(rand(64, 128)).realize(), Tensor(rand(64, 128, seed=1)).realize()
  assert len((x @ w.T).schedule()) == 1


def test_same_structure_makes_its_own_copies():
  """The same structure on other buffers: the same kernels, with a packed copy of this graph's own w (a schedule with
  packed copies is not cached: the copies are bases the graph doesn't hold)."""
  x_np, w1_np, w2_np = rand(2048, 128), rand(384, 128, seed=1), rand(384, 128, seed=2)
  x, w1, w2 = (Tensor(a).realize() for a in (x_np, w1_np, w2_np))
  first, again = (x @ w1.T).schedule(), (x @ w2.T).schedule()
  assert [si.ast for si in again] == [si.ast for si in first]
  assert again[0].inputs == (w2.lazydata.base.buffer,) and again[0].outputs[0] is not first[0].outputs[0]
  run_schedule(first)
  run_schedule(again)
  np.testing.assert_allclose((x @ w2.T).numpy(), x_np @ w2_np.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((x @ w1.T).numpy(), x_np @ w1_np.T, rtol=1e-4, atol=1e-4)


def test_packed_weight_after_an_update():
  "An optimizer-style write to w between two products: the second reads a copy of the new w, not the old copy."
  x_np, w_np = rand(2048, 128), rand(384, 128, seed=1)
  x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
  np.testing.assert_allclose((x @ w.T).numpy(), x_np @ w_np.T, rtol=1e-4, atol=1e-4)
  w.assign(w * 2).realize()
  np.testing.assert_allclose((x @ w.T).numpy(), x_np @ (2 * w_np).T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("columns, kernels", [(32, 1), (64, 2)])
def test_wide_broadcast_stores_cheap_expressions(columns, kernels):
  "A 4-op expression read by each of 64 columns is computed once into a buffer; read by 32, it is recomputed."
  x_np, w_np = rand(256, 128), rand(128, columns, seed=1)
  x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
  y = ((x - 1) * 2 + 3) * x
  assert len((y @ w).schedule()) == kernels
  np.testing.assert_allclose((y @ w).numpy(), (((x_np - 1) * 2 + 3) * x_np) @ w_np, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_exp2_far_below_underflow(device):
  "exp2 below -150 (and of -inf) is 0; from -150 up, the denormals, rounded once from the exact value; NaN stays NaN."
  x = np.array([-np.inf, -1e30, -1000, -151, -150.5, -150, -149.5, -149, -140, -126.5, -126, 0, np.nan] * 2, np.float32)
  with Context(TRANSCENDENTAL=2):
    got = Tensor(x, device=device).exp2().numpy()
  np.testing.assert_array_equal(got, np.exp2(x.astype(np.float64)).astype(np.float32))   # numpy's float32 exp2 isn't


@pytest.mark.parametrize("device", DEVICES)
def test_where_on_a_loaded_mask(device):
  "A causal mask from memory in a softmax: the masked sum, and a padded mask (a gated load of bools)."
  t = 64
  mask_np = np.tril(np.ones((t, t), bool))
  s_np = rand(16, t, t)
  mask, s = Tensor(mask_np, device=device).realize(), Tensor(s_np, device=device).realize()
  masked = mask.where(s, -np.inf)
  e_np = np.exp(np.where(mask_np, s_np, -np.inf) - s_np.max(-1, keepdims=True))
  np.testing.assert_allclose((masked - s.max(-1, keepdim=True)).exp().sum(-1).numpy(), e_np.sum(-1), rtol=1e-5)
  padded = mask.pad(((0, 0), (0, 16))).where(Tensor(rand(t, t + 16), device=device), 0.0)
  np.testing.assert_allclose(padded.numpy(), np.where(np.pad(mask_np, ((0, 0), (0, 16))), rand(t, t + 16), 0))


def test_loaded_mask_renders_as_one_select():
  "The C for that sum loads 16 mask bytes as one vector (no lane-by-lane ?:)."
  from tinylit.kernel import Kernel
  from tinylit.heuristic import hand_coded_optimizations
  from tinylit.renderer import ProgramSpec
  mask, s = Tensor(np.tril(np.ones((64, 64), bool))).realize(), Tensor(rand(16, 64, 64)).realize()
  (si,) = mask.where(s, -np.inf).exp().sum(-1).schedule()
  renderer = Device["CPU"].renderer
  if max(renderer.vector_widths) < 16: pytest.skip("needs 16-lane vectors")
  k = hand_coded_optimizations(Kernel(si.ast, renderer))
  src = ProgramSpec.from_uops(k.plain_name, k.linearize(), k.opts, k.applied_opts).src
  assert "signed_char16" in src and "?" not in src.split("{", 1)[1], src


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_read_by_two_kernels_is_computed_once(device):
  "h = x @ w read by h.exp() and h.sigmoid(), each a kernel of its own: one kernel computes h, both load it."
  x_np, w_np, w2_np = rand(8, 16), rand(16, 64, seed=1), rand(64, 8, seed=2)
  x, w, w2 = (Tensor(a, device=device).realize() for a in (x_np, w_np, w2_np))
  h = x @ w
  u, v = h.exp() @ w2, h.sigmoid() @ w2
  schedule = Tensor.schedule(u, v)
  assert sum(w.lazydata.base.buffer in si.bufs for si in schedule) == 1
  run_schedule(schedule)
  h_np = x_np @ w_np
  np.testing.assert_allclose(u.numpy(), np.exp(h_np) @ w2_np, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(v.numpy(), 1 / (1 + np.exp(-h_np)) @ w2_np, rtol=1e-4, atol=1e-4)


def test_weight_gradient_with_a_big_g_takes_blocks():
  """X.T @ G with G (2048, 512), 4 MB: more than the L2, so the reduce goes in blocks (chapter 6bb's `_block_size`).
  G is not packed: the product walks G once per 8 of X's 128 columns (16 times) and X once per panel of G (32 times)."""
  from test_heuristic2 import planned
  renderer = Device["CPU"].renderer
  if not renderer.l2_size or renderer.l2_size >= 4 << 20: pytest.skip("needs a known L2 smaller than 4 MB")
  x, g = Tensor(rand(2048, 128)).realize(), Tensor(rand(2048, 512, seed=1)).realize()
  from tinylit.kernel import OptOps
  assert len((x.T @ g).schedule()) == 1 and any(o.op is OptOps.BLOCK for o in planned(x.T @ g).applied_opts)
  np.testing.assert_allclose((x.T @ g).numpy(), rand(2048, 128).T @ rand(2048, 512, seed=1), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_packs_b_into_panels(device):
  """A @ B with B (512, 1024), 2 MB, bigger than the L2, rows 4 KiB apart, read by 512 rows of A (rule 8's second
  case, chapter 6bb's `panel_width`): a copy of B in column panels [N/P, K, P], then the product, whose vectors split P and
  whose loads have no `//` or `%`. The result is numpy's on every device."""
  from tinylit.kernel import Kernel
  from tinylit.heuristic import hand_coded_optimizations
  a_np, b_np = rand(512, 512), rand(512, 1024, seed=1)
  a, b = Tensor(a_np, device=device).realize(), Tensor(b_np, device=device).realize()
  schedule = (a @ b).schedule()
  panels = packs(device) and 0 < Device[device].renderer.l2_size < b_np.nbytes
  assert len(schedule) == (2 if panels else 1)
  if panels:
    n, k, width = schedule[0].ast.src[0].src[1].arg.shape   # the copy's output: [N/P, K, P]
    assert (n * width, k) == (1024, 512) and width > 1
    product = hand_coded_optimizations(Kernel(schedule[1].ast, Device[device].renderer))
    assert width % product.full_shape[product.vector_axis()] == 0
    assert not any(u.op in (Ops.IDIV, Ops.MOD) for u in product.linearize())
  np.testing.assert_allclose((a @ b).numpy(), a_np @ b_np, rtol=1e-4, atol=1e-3)


def test_panels_only_where_they_pay():
  """No panels for a B read by few rows (16 rows walk B twice, A 64 times), or for a B that fits the L2 (512 x 64:
  128 KB); panels for one whose rows are less than a page apart (1024 x 512, 2 MB) where it is bigger than the L2."""
  a, b = Tensor(rand(512, 512)).realize(), Tensor(rand(512, 1024, seed=1)).realize()
  assert len((a[:16] @ b).schedule()) == 1
  assert len((a @ Tensor(rand(512, 64, seed=2)).realize()).schedule()) == 1
  narrow = Tensor(rand(512, 1024)).realize() @ Tensor(rand(1024, 512, seed=1)).realize()
  assert len(narrow.schedule()) == (2 if 0 < Device["CPU"].renderer.l2_size < 1024 * 512 * 4 else 1)


@pytest.mark.parametrize("device", DEVICES)
def test_batched_matmul_packs_each_b(device):
  "Two products, each B (384, 1024), 1.5 MB, read by 512 rows: B packed in panels per product, the results numpy's."
  a_np, b_np = rand(2, 512, 384), rand(2, 384, 1024, seed=1)
  a, b = Tensor(a_np, device=device).realize(), Tensor(b_np, device=device).realize()
  assert len((a @ b).schedule()) == (2 if packs(device) and 0 < Device[device].renderer.l2_size < b_np[0].nbytes else 1)
  np.testing.assert_allclose((a @ b).numpy(), a_np @ b_np, rtol=1e-4, atol=1e-3)


def test_packed_product_takes_blocks_that_keep_a_in_the_l1():
  """(512, 2048) @ (2048, 1024): B packed into panels; the tile's rows of A over all of k (4 or 8 rows: 32 or 64 KB)
  are more than half the L1, so the reduce goes in blocks whose rows of A fill at most half of it (chapter 6bb's
  `_row_block`; the panel of B streams through the other half). Without a known L1, none."""
  from test_heuristic2 import planned
  from tinylit.kernel import Kernel, OptOps
  from tinylit.heuristic import hand_coded_optimizations
  from tinylit.renderer import ClangRenderer
  renderer = Device["CPU"].renderer
  a, b = Tensor(rand(512, 2048)).realize(), Tensor(rand(2048, 1024, seed=1)).realize()
  schedule = (a @ b).schedule()
  if len(schedule) != 2 or not 0 < renderer.l1_size: pytest.skip("needs B packed and a known L1")
  opts = planned(a @ b).applied_opts
  rows = next(o.amt for o in opts if o.op is OptOps.UPCAST and o.axis == 0)
  if rows * 4 * 2048 <= renderer.l1_size // 2: pytest.skip("the tile's rows of A fit half of this L1")
  blocks = [o.amt for o in opts if o.op is OptOps.BLOCK]
  assert len(blocks) == 1 and blocks[0] * rows * 4 <= renderer.l1_size // 2
  unknown = ClangRenderer(max(renderer.vector_widths), renderer.l2_size, renderer.vector_registers)   # l1_size 0
  assert not any(o.op is OptOps.BLOCK for o in hand_coded_optimizations(Kernel(schedule[1].ast, unknown)).applied_opts)


@pytest.mark.parametrize("device", DEVICES)
def test_a_packed_schedule_is_cached(device):
  """A product whose `B` is packed is scheduled once: a second graph of its structure gets the same kernels from the
  schedule cache, with a new copy of its own `B` (not the first graph's), and the right values."""
  from tinylit.schedule import _schedule_cache
  x_np, w_np, v_np = rand(2048, 128), rand(384, 128, seed=1), rand(384, 128, seed=2)
  x, w, v = (Tensor(a, device=device).realize() for a in (x_np, w_np, v_np))
  _schedule_cache.clear()
  first = (x @ w.T).schedule()
  assert len(_schedule_cache) == 1
  out = x @ v.T
  again = out.schedule()
  assert [si.ast for si in again] == [si.ast for si in first] and len(_schedule_cache) == 1
  assert len(again) == (2 if packs(device) else 1)
  assert not {b for si in again for b in si.bufs} & {b for si in first for b in si.bufs} - {x.lazydata.base.buffer}
  np.testing.assert_allclose(out.numpy(), x_np @ v_np.T, rtol=1e-4, atol=1e-3)
