"""Three changes to the kernels of session 44 (issue 31): concatenations read whole vectors, a reduce's epilogue waits
for its loop, and partial sums take a two-axis register tile.

- `Tensor.cat` reads each input through a view masked at the seams. Chapter 5a's `lt_fold` makes the lanes of a
  vector share one test where a seam falls on a multiple of the width (`q*16 + lane < 128` is `q < 8`), chapter 6a's
  `lane_stride` asks that of a view, and chapter 6b's `_vector_axis` counts such a view as contiguous: a cat whose
  seams fall between vectors is vectorized, one whose seams cut through a vector is not.
  Chapter 6's `Kernel.index` simplifies a view's valid test before it narrows the address with it, so that the test
  on lanes is one on a loop, and a cat of merged attention heads reads each input as whole vectors too.
- Chapter 6's `linearize` emits a level's child loops first, with what they read: work only the code after a loop
  needs (a matmul's epilogue) comes after the loop instead of holding registers through it.
- Chapter 6b's `_reduce_plan` offers partial sums (vectors along the sum, `x @ W.T`) tiles along two output axes.
The device tests check such kernels' results against numpy on every device."""
import numpy as np
import pytest
from devices import DEVICES
from hypothesis import given, settings, strategies as st

from test_heuristic2 import planned  # the CPU rules' kernel for a tensor's last schedule item
from test_properties import evaluate  # an index expression's value over a grid, computed as C would

from tinylit import Tensor
from tinylit.dtype import dtypes
from tinylit.expander import lane_stride
from tinylit.helpers import Context
from tinylit.kernel import Kernel, Opt, OptOps
from tinylit.ops import Ops, UOp


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 16), st.integers(1, 20), st.integers(1, 30), st.integers(-40, 400), st.integers(0, 4), st.booleans())
def test_lt_fold_keeps_the_comparison(factor, lanes, size, bound, other, with_lane):
  "`q*factor (+ r*other) (+ lane) < bound`, simplified, is the same comparison at every point of the ranges."
  q, r, lane = UOp.range(size, 0), UOp.range(3, 1), UOp.range(lanes, 2)
  x = q * factor + (r * other if other else UOp.const(dtypes.int32, 0)) + (lane if with_lane else UOp.const(dtypes.int32, 0))
  e = x.lt(bound)
  grid = np.indices((size, 3, lanes)).astype(np.int32)
  env = {q: grid[0], r: grid[1], lane: grid[2]}
  simplified = e.simplify()
  before, after = (np.broadcast_to(evaluate(u, env), grid.shape[1:]) for u in (e, simplified))
  np.testing.assert_array_equal(before, after, err_msg=f"{e.render(False)} -> {simplified.render(False)}")


def test_lanes_share_the_test_at_a_multiple_of_the_width():
  q, lane = UOp.range(24, 0), UOp.range(16, 1)
  assert (q * 16 + lane).lt(128).simplify() is q.lt(8)
  assert (q * 16).lt(123).simplify() is q.lt(8)
  assert lane in (q * 16 + lane).lt(120).simplify().toposort   # a seam inside a vector: a test per lane


def cat_inputs(widths, device="CPU", rows=32):
  rng = np.random.default_rng(sum(widths))
  arrays = [rng.standard_normal((rows, w)).astype(np.float32) for w in widths]
  return arrays, [Tensor(a, device=device).realize() for a in arrays]


def test_cat_at_vector_seams_is_vectorized():
  "Seams at 128 (multiples of 16): every view reads whole vectors, and the rules vectorize the axis; at 120 they don't."
  _, (a, b) = cat_inputs((128, 128))
  k = planned(a.cat(b, dim=1))
  assert [lane_stride(st, 1, 16) for st in Kernel(k.ast, k.opts).sts.values()] == [1, 1, 1]
  assert any(o.op is OptOps.UPCAST and o.amt == 16 for o in k.applied_opts), k.applied_opts
  loads = [u for u in k.linearize() if u.op is Ops.LOAD]
  assert loads and all(u.dtype.count == 16 for u in loads), [u.dtype for u in loads]
  _, (c, d) = cat_inputs((120, 136))
  k = planned(c.cat(d, dim=1))
  assert [lane_stride(st, 1, 16) for st in Kernel(k.ast, k.opts).sts.values()] == [1, None, None]
  assert not any(o.op is OptOps.UPCAST for o in k.applied_opts), k.applied_opts


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("widths", [(128, 128), (120, 136), (16, 48, 64)])
def test_cat_computes_right(device, widths):
  arrays, tensors = cat_inputs(widths, device)
  np.testing.assert_array_equal(tensors[0].cat(*tensors[1:], dim=1).numpy(), np.concatenate(arrays, 1))


@pytest.mark.parametrize("device", DEVICES)
def test_cat_with_a_transposed_input_computes_right(device):
  "The dq/dk/dv concatenation of attention's backward: two inputs read straight, the third transposed."
  rng = np.random.default_rng(3)
  x, y, z = (rng.standard_normal(s).astype(np.float32) for s in ((64, 128), (64, 128), (128, 64)))
  got = Tensor.cat(*(Tensor(v, device=device) for v in (x, y)), Tensor(z, device=device).T, dim=1).numpy()
  np.testing.assert_array_equal(got, np.concatenate([x, y, z.T], 1))


def merged_heads(device="CPU", batch=4, heads=4, tokens=16, width=32):
  "Attention's per-head gradients (batch, heads, tokens, width), each merged back to (batch, tokens, heads*width)."
  rng = np.random.default_rng(11)
  arrays = [rng.standard_normal((batch, heads, tokens, width)).astype(np.float32) for _ in range(2)]
  merged = [Tensor(v, device=device).realize().permute(0, 2, 1, 3).reshape(batch, tokens, heads * width) for v in arrays]
  return [v.transpose(0, 2, 1, 3).reshape(batch, tokens, heads * width) for v in arrays], merged


def test_cat_of_merged_heads_reads_whole_vectors():
  """The second input of a cat of merged heads is read behind `128 <= q*16 + lane < 256`. Chapter 6's `Kernel.index`
  simplifies that test to `8 <= q < 16` before `uop_given_valid` narrows q with it: the lane leaves the divisions and
  remainders that took the position apart, and each input is one vector load (before, the second was gathered)."""
  _, (a, b) = merged_heads()
  loads = [u for u in planned(a.cat(b, dim=2)).linearize() if u.op is Ops.LOAD]
  assert len(loads) == 2 and all(u.dtype.count == 16 for u in loads), [u.dtype for u in loads]


@pytest.mark.parametrize("device", DEVICES)
def test_cat_of_merged_heads_computes_right(device):
  arrays, (a, b) = merged_heads(device)
  np.testing.assert_array_equal(a.cat(b, dim=2).numpy(), np.concatenate(arrays, 2))


def epilogue_inputs(device="CPU", n=256):
  rng = np.random.default_rng(5)
  arrays = [rng.standard_normal((n, n)).astype(np.float32) / 4 for _ in range(3)]
  return arrays, [Tensor(v, device=device).realize() for v in arrays]


def test_epilogue_waits_for_the_reduce_loop():
  "`(a @ b) * c.exp()`: the load of c and its exp, which only the store needs, come after the reduce loop closes."
  _, (a, b, c) = epilogue_inputs()
  uops = planned((a @ b) * c.exp()).linearize()
  reduce_end = max(i for i, u in enumerate(uops) if u.op is Ops.ENDRANGE and u.src[0].arg[1] == "reduce")
  c_buf = 3   # data0 is the output; a, b, c are read in the kernel's parameter order
  c_loads = [i for i, u in enumerate(uops) if u.op is Ops.LOAD and u.src[0].src[0].arg == c_buf]
  assert c_loads and min(c_loads) > reduce_end, (c_loads, reduce_end)
  first_loop = next(i for i, u in enumerate(uops) if u.op is Ops.RANGE)
  assert all(i < first_loop for i, u in enumerate(uops) if u.op is Ops.DEFINE_GLOBAL)   # the parameters still come first


@pytest.mark.parametrize("device", DEVICES)
def test_epilogue_computes_right(device):
  n = 64 if device == "PYTHON" else 256
  (a, b, c), tensors = epilogue_inputs(device, n)
  np.testing.assert_allclose(((tensors[0] @ tensors[1]) * tensors[2].exp()).numpy(), (a @ b) * np.exp(c), rtol=1e-4, atol=1e-4)


def linear_inputs(device="CPU", tokens=512, width=256, outs=128):
  rng = np.random.default_rng(7)
  arrays = [rng.standard_normal((tokens, width)).astype(np.float32), (rng.standard_normal((outs, width)) / 16).astype(np.float32),
            rng.standard_normal(outs).astype(np.float32)]
  return arrays, [Tensor(v, device=device).realize() for v in arrays]


def test_partial_sums_take_a_two_axis_tile():
  "`x @ W.T + b` with W read as it is: vectors along the sum, and copies along both output axes."
  _, (x, w, b) = linear_inputs()
  with Context(PACK=0): k = planned(x @ w.T + b)
  assert k.applied_opts[0] == Opt(OptOps.UNROLL, 0, 16), k.applied_opts
  assert sorted(o.axis for o in k.applied_opts if o.op is OptOps.UPCAST) == [0, 1], k.applied_opts


@pytest.mark.parametrize("device", DEVICES)
def test_partial_sums_compute_right(device):
  tokens = 64 if device == "PYTHON" else 512
  (x, w, b), tensors = linear_inputs(device, tokens=tokens)
  with Context(PACK=0): got = (tensors[0] @ tensors[1].T + tensors[2]).numpy()
  np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-4, atol=1e-3)
