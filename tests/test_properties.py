"""Property tests (hypothesis): ShapeTracker index expressions gather exactly what numpy's movement ops do,
and symbolic simplification never changes the value of an index expression."""
import numpy as np
import pytest
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st
from tinylit.dtype import dtypes
from tinylit.ops import Ops, UOp, exec_alu
from tinylit.shapetracker import ShapeTracker
from tinylit.symbolic import uop_given_valid

def evaluate(u: UOp, env: dict) -> np.ndarray:
  "Value of an index expression for every point of a grid of loop indices at once."
  memo = {}
  for x in u.toposort:
    if x.op is Ops.RANGE: memo[x] = env[x]
    elif x.op is Ops.CONST: memo[x] = np.asarray(x.arg, dtype=x.dtype.np)
    else: memo[x] = np.asarray(exec_alu(x.op, x.dtype, [memo[s] for s in x.src]))
  return memo[u]

def gather(st: ShapeTracker, base: np.ndarray, simplify: bool) -> np.ndarray:
  ranges = [UOp.range(s, i) for i, s in enumerate(st.shape)]
  grid = np.indices(st.shape) if st.shape else np.zeros((0,))
  env = {r: grid[i].astype(np.int32) for i, r in enumerate(ranges)}
  idx, valid = st.to_indexed_uops(ranges)
  if simplify: idx, valid = idx.simplify(), valid.simplify()
  idx, valid = np.broadcast_to(evaluate(idx, env), st.shape), np.broadcast_to(evaluate(valid, env), st.shape)
  return np.where(valid, base[np.where(valid, idx, 0)], 0)

@st.composite
def movement_chain(draw):
  shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  ops = []
  cur = np.arange(int(np.prod(shape))).reshape(shape)
  for _ in range(draw(st.integers(1, 5))):
    kind = draw(st.sampled_from(["permute", "pad", "shrink", "flip", "reshape", "expand"]))
    if kind == "permute": arg = tuple(draw(st.permutations(range(cur.ndim))))
    elif kind == "pad": arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in cur.shape)
    elif kind == "shrink":
      arg = []
      for s in cur.shape:
        lo = draw(st.integers(0, s - 1)); arg.append((lo, draw(st.integers(lo + 1, s))))
      arg = tuple(arg)
    elif kind == "flip": arg = tuple(draw(st.booleans()) for _ in cur.shape)
    elif kind == "reshape":
      n = cur.size
      d = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
      arg = draw(st.sampled_from([(n,), (d, n // d), (n // d, 1, d)]))
    else: arg = tuple(draw(st.sampled_from([1, 3])) if s == 1 else s for s in cur.shape)
    cur = apply_np(cur, kind, arg)
    ops.append((kind, arg))
  return shape, ops

def apply_np(x, kind, arg):
  if kind == "permute": return x.transpose(arg)
  if kind == "pad": return np.pad(x, arg, constant_values=-1)
  if kind == "shrink": return x[tuple(slice(lo, hi) for lo, hi in arg)]
  if kind == "flip": return x[tuple(slice(None, None, -1) if f else slice(None) for f in arg)]
  if kind == "reshape": return x.reshape(arg)
  return np.broadcast_to(x, arg)

@settings(max_examples=150, deadline=None)
@given(movement_chain())
def test_shapetracker_matches_numpy(chain):
  shape, ops = chain
  base = np.arange(1, int(np.prod(shape)) + 1)
  ref = base.reshape(shape)
  st_ = ShapeTracker.from_shape(shape)
  for kind, arg in ops:
    ref = apply_np(ref, kind, arg)
    st_ = getattr(st_, kind)(arg)
  ref = np.where(ref == -1, 0, ref)  # padding reads as 0
  assert st_.shape == ref.shape
  for simplify in (False, True):
    np.testing.assert_array_equal(gather(st_, base, simplify), ref)

@st.composite
def index_expr(draw, ranges, depth=0):
  if depth > 3 or draw(st.integers(0, 3)) == 0:
    return draw(st.sampled_from(ranges)) if draw(st.booleans()) else UOp.const(dtypes.int32, draw(st.integers(0, 9)))
  op = draw(st.sampled_from(["add", "mul", "div", "mod", "lt"]))
  a = draw(index_expr(ranges, depth + 1))
  if op == "add": return a + draw(index_expr(ranges, depth + 1))
  if op == "mul": return a * draw(st.integers(-3, 5))
  if op == "div": return a // draw(st.integers(1, 8))
  if op == "mod": return a % draw(st.integers(1, 8))
  return a.lt(draw(st.integers(-2, 12))).where(a, a * 2)

RANGES = [UOp.range(3, 0), UOp.range(4, 1), UOp.range(5, 2)]
GRID = np.indices((3, 4, 5)).astype(np.int32)

@settings(max_examples=300, deadline=None)
@given(index_expr(RANGES))
def test_simplify_keeps_value(expr):
  env = {r: GRID[i] for i, r in enumerate(RANGES)}
  before = np.broadcast_to(evaluate(expr, env), GRID.shape[1:])
  simplified = expr.simplify()
  after = np.broadcast_to(evaluate(simplified, env), GRID.shape[1:])
  np.testing.assert_array_equal(before, after, err_msg=f"{expr.render(False)} -> {simplified.render(False)}")
  assert simplified.vmin <= before.min() and before.max() <= simplified.vmax

@settings(max_examples=300, deadline=None)
@given(index_expr(RANGES), st.integers(0, 2), st.integers(0, 5), st.integers(0, 5))
def test_simplify_given_valid_keeps_value_where_valid(expr, axis, lo, hi):
  "An address simplified under its guard (`lo <= range < hi`) must be the address wherever the guard holds."
  r = RANGES[axis]
  valid = (r < lo).logical_not() & (r < hi)
  env = {rr: GRID[i] for i, rr in enumerate(RANGES)}
  where = np.broadcast_to(evaluate(valid, env), GRID.shape[1:]).astype(bool)
  before = np.broadcast_to(evaluate(expr, env), GRID.shape[1:])
  given_ = uop_given_valid(valid, expr)
  after = np.broadcast_to(evaluate(given_, env), GRID.shape[1:])
  np.testing.assert_array_equal(before[where], after[where], err_msg=f"{expr.render(False)} given {valid.render(False)} -> {given_.render(False)}")
