"""Regression tests for issue 17's first part: the backward pass's reduce kernels get opts.

Stacked views (a permute, then a reshape, then a transpose: the gradient of a weight) are folded into one View by
`KernelShape.fold_views` (chapter 6), so that the hand-coded rules (chapter 6b) see strides; the rules price each
plan (`_cost`), so that arithmetic fused into a reduce is vectorized and shared by the register tile. Folding must
never change which element a loop iteration reads: the first tests compare the folded index with the stacked one
at every point. The device tests check the results of such kernels against numpy, with the opts the rules chose.
"""
import itertools

import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor
from tinylit.device import Device
from tinylit.dtype import dtypes
from tinylit.heuristic import hand_coded_optimizations, lane_axis
from tinylit.kernel import Kernel, KernelShape, Opt, OptOps, fold_views
from tinylit.ops import Ops, UOp
from tinylit.schedule import create_schedule
from tinylit.realize import run_schedule
from tinylit.shapetracker import ShapeTracker, View


def addresses(st: ShapeTracker) -> list[tuple[int, bool]]:
  "The address and validity of every point of `st`'s shape, in row-major order, from its index expression."
  out = []
  for point in itertools.product(*[range(s) for s in st.shape]):
    idx, valid = st.to_indexed_uops([UOp.const(dtypes.int32, i) for i in point])
    ok = bool(valid.simplify().arg)
    out.append((idx.simplify().arg if ok else None, ok))
  return out


def last_ast(t: Tensor) -> UOp:
  *before, si = create_schedule([t.lazydata])
  run_schedule(before)
  return si.ast


# (the view below, the top view): a permuted reshape, an expanded mean, a transposed read of a permuted reshape
STACKS = [
  (View.create((8, 4, 16), (16, 128, 1)), View.create((64, 3, 8), (1, 0, 64))),
  (View.create((4, 8, 6), (8, 1, 0)), View.create((4, 8, 6, 5), (48, 6, 1, 0))),
  (View.create((4, 8, 6), (0, 6, 1)), View.create((6, 5, 32), (1, 0, 6))),
  (View.create((2, 3, 4, 5), (60, 5, 15, 1)), View.create((5, 24), (1, 5))),
  (View.create((6, 4), (1, 6), offset=2, mask=((1, 5), (0, 4))), View.create((4, 6), (1, 4))),
]


@pytest.mark.parametrize("below,top", STACKS)
def test_fold_reads_the_same_elements(below: View, top: View):
  "Folded (after the cuts it asks for), the stack reads exactly the elements it read before, at every point."
  stacked = ShapeTracker((below, top))
  folded = fold_views(below, top)
  assert folded is not None, f"{below} under {top} should fold"
  if isinstance(folded, dict):
    # cut the loops as asked, in the stack too, then fold again
    cut = tuple(x for a, s in enumerate(top.shape) for x in (folded.get(a, (s,))))
    stacked = stacked.reshape(cut)
    assert len(stacked.views) == 2, "a cut of an unmasked axis keeps the stack at two views"
    folded = fold_views(*stacked.views)
  assert isinstance(folded, View)
  assert addresses(ShapeTracker((folded,))) == addresses(stacked)


def test_fold_refuses_what_it_cannot_say():
  "A top view that is not a permuted, expanded contiguous read (a shrink, a pad) is left as a stack."
  below = View.create((8, 4, 16), (16, 128, 1))
  assert fold_views(below, View.create((16, 16), (32, 1))) is None                       # reads every other row
  assert fold_views(below, View.create((64, 8), (1, 64), mask=((0, 32), (0, 8)))) is None  # padded


def test_weight_gradient_kernel_has_one_view_per_buffer():
  "x.T @ g with x permuted then reshaped (attention heads put back together): the kernel sees strides, no stack."
  acts = Tensor(np.random.default_rng(0).standard_normal((4, 8, 16)).astype(np.float32)).realize()
  grads = Tensor(np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)).realize()
  ast = last_ast(acts.permute(1, 0, 2).reshape(8, 64).T @ grads)
  assert any(len(u.arg.views) > 1 for u in ast.toposort if u.op is Ops.VIEW), "the scheduler should make a stack here"
  k = KernelShape(ast)
  assert all(len(st.views) == 1 for st in k.sts.values())


def test_reduce_with_stacked_views_gets_vectors():
  "The backward kernel that got no opts at all before (a reduce through stacked views) gets a vector axis."
  acts = Tensor(np.random.default_rng(0).standard_normal((32, 64, 128)).astype(np.float32)).realize()
  grads = Tensor(np.random.default_rng(1).standard_normal((2048, 64)).astype(np.float32)).realize()
  k = hand_coded_optimizations(Kernel(last_ast(acts.permute(1, 0, 2).reshape(2048, 128).T @ grads), Device["CPU"].renderer))
  assert k.vector_axis() is not None, k.applied_opts


def test_fused_activation_is_vectorized_and_shared():
  """y.T @ g with y a layer norm's output recomputed in the loop: vectors along y's columns, the tile along g's.
  (g has 32 columns: with 64 or more, chapter 4's scheduler computes y into a buffer of its own first.)"""
  X = Tensor(np.random.default_rng(5).standard_normal((256, 128)).astype(np.float32)).realize()
  G = Tensor(np.random.default_rng(7).standard_normal((256, 32)).astype(np.float32)).realize()
  mean, rstd = X.mean(1, keepdim=True).realize(), (X.var(1, keepdim=True) + 1e-5).rsqrt().realize()
  k = hand_coded_optimizations(Kernel(last_ast(((X - mean) * rstd * 2 + 1).T @ G), Device["CPU"].renderer))
  width = Device["CPU"].vector_width   # 16 with AVX-512, 8 with AVX2 (chapter 8a)
  assert k.applied_opts[:2] == [Opt(OptOps.UPCAST, 0, width), Opt(OptOps.UPCAST, 1, 8)], k.applied_opts
  assert k.vector_axis() == k.first_upcast, "the vector is the first upcast (X's columns), not the tile"


@pytest.mark.parametrize("device", DEVICES)
def test_backward_shaped_kernels_compute_right(device):
  "Weight gradients through stacked views and fused arithmetic, with the opts the rules choose, against numpy."
  rng = np.random.default_rng(2)
  a_np = rng.standard_normal((4, 16, 24)).astype(np.float32)
  g_np = rng.standard_normal((64, 40)).astype(np.float32)
  a, g = Tensor(a_np, device=device), Tensor(g_np, device=device)
  x_np = a_np.transpose(1, 0, 2).reshape(64, 24)
  x = a.permute(1, 0, 2).reshape(64, 24)
  np.testing.assert_allclose(x.T.matmul(g).numpy(), x_np.T @ g_np, rtol=1e-4, atol=1e-4)
  centred = x - x.mean(1, keepdim=True)
  centred_np = x_np - x_np.mean(1, keepdims=True)
  np.testing.assert_allclose((centred * 3 + 1).T.matmul(g).numpy(), (centred_np * 3 + 1).T @ g_np, rtol=1e-4, atol=1e-4)
  # heads put back together, then a transposed product: (B, H, T, D) -> (B, T, H*D)
  h_np = rng.standard_normal((2, 4, 8, 6)).astype(np.float32)
  h = Tensor(h_np, device=device)
  merged, merged_np = h.permute(0, 2, 1, 3).reshape(16, 24), h_np.transpose(0, 2, 1, 3).reshape(16, 24)
  w_np = rng.standard_normal((16, 10)).astype(np.float32)
  np.testing.assert_allclose(merged.T.matmul(Tensor(w_np, device=device)).numpy(), merged_np.T @ w_np, rtol=1e-4, atol=1e-4)


def test_lane_axis_is_where_the_output_is_contiguous():
  "The axis the packing rule asks for: the output's stride-1 axis (a reduce axis of size 1 is never it)."
  assert lane_axis(ShapeTracker.from_shape((64, 32, 1))) == 1
  assert lane_axis(ShapeTracker.from_shape((32, 64)).permute((1, 0))) == 0


def test_the_heuristics_first_upcast_is_the_vector():
  "The lanes the plan chose (its first upcast) are the axis the kernel vectorizes."
  si = (Tensor.empty(256, 256) @ Tensor.empty(256, 256)).schedule()[-1]
  k = hand_coded_optimizations(Kernel(si.ast, Device["CPU"].renderer))
  assert k.applied_opts[0].op is OptOps.UPCAST and k.vector_axis() == k.first_upcast, k.applied_opts
