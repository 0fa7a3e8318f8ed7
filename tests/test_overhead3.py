"""The caches and early returns of issue 17's third overhead pass keep what the longer way did. Each DType is made once,
so identity is equality, also after a pickle or a copy; Ops hash by identity; ShapeTracker.from_shape hands out one
immutable tracker per shape, which hashes its Views once (and anew after a pickle); a base's holders are the live
Tensors, and its record of them stays small while short-lived views come and go; fold_alu still folds every rule
after its early return (and still does not fold a float x * 0); a graph whose kernel is cached gets the same kernel
and values as the first, scheduled one; and a Buffer whose __init__ raised is freed without an error. Every test
runs on every device."""
import copy, pickle

import numpy as np
import pytest

from tinylit import Tensor
from tinylit.device import Buffer
from tinylit.dtype import DType, dtypes
from tinylit.ops import Ops, Variable
from tinylit.schedule import _schedule_cache
from tinylit.shapetracker import ShapeTracker
from devices import DEVICES


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_made_once(device):
  "A DType with the same fields, a pickled, a copied one, and a vector dtype made twice: all the same object."
  same = DType(dtypes.int32.priority, dtypes.int32.itemsize, dtypes.int32.name, dtypes.int32.fmt)
  assert same is dtypes.int32 and hash(same) == hash(dtypes.int32)
  for dt in (dtypes.float32, dtypes.bfloat16, dtypes.float.vec(4)):
    assert pickle.loads(pickle.dumps(dt)) is dt and copy.deepcopy(dt) is dt and copy.copy(dt) is dt
  assert dtypes.float.vec(4) is dtypes.float.vec(4) and dtypes.float.vec(4) != dtypes.float.vec(2)
  assert dtypes.int8 < dtypes.float32 and min([dtypes.float64, dtypes.int16]) is dtypes.int16   # order=True still orders
  # a tensor made with the rebuilt dtype is an int32 tensor everywhere: promotion, dict lookups, the kernel
  t = Tensor([1, 2, 3], device=device, dtype=same)
  assert t.dtype is dtypes.int32 and (t + 1.5).dtype is dtypes.float32
  np.testing.assert_equal((t * 2).numpy(), np.array([2, 4, 6], np.int32))


def test_ops_hash_by_identity():
  "Ops are dict and set keys by identity: every member is found, and no two collide."
  table = {op: op.name for op in Ops}
  assert len(table) == len(Ops) and all(table[op] == op.name for op in Ops)
  assert len({hash(op) for op in Ops}) == len(Ops)


@pytest.mark.parametrize("device", DEVICES)
def test_from_shape_cached_tracker_is_unchanged_by_movement(device):
  "from_shape returns one tracker per shape; moving a tensor made on it leaves the cached tracker as it was."
  st = ShapeTracker.from_shape((2, 3))
  assert ShapeTracker.from_shape((2, 3)) is st and st.contiguous and st.shape == (2, 3)
  x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
  y = x.permute(1, 0).pad(((1, 0), (0, 1)))
  np.testing.assert_equal(y.numpy(), np.pad(np.arange(6, dtype=np.float32).reshape(2, 3).T, ((1, 0), (0, 1))))
  assert ShapeTracker.from_shape((2, 3)) is st and st == ShapeTracker.from_shape((2, 3)) and st.contiguous


@pytest.mark.parametrize("device", DEVICES)
def test_fold_alu_rules_after_the_early_return(device):
  """Every folding rule still folds, with the constant on either side, and an op with no constant is recorded; a float
  x * 0 is not folded (NaN and inf stay NaN), an integer one is."""
  x = Tensor([1.0, float("nan"), float("inf")], device=device).realize().lazydata
  i = Tensor([3, -4, 5], device=device).realize().lazydata
  for lb, const_is_x in ((x, x.const_like(0)), (i, i.const_like(0))):
    assert lb + const_is_x is lb and const_is_x + lb is lb
  assert x * x.const_like(1) is x and x.const_like(1) * x is x
  assert i.alu(Ops.IDIV, i.const_like(1)) is i and x.alu(Ops.FDIV, x.const_like(1)) is x
  assert (i * i.const_like(0)).is_unrealized_const() and (i.const_like(0) * i).is_unrealized_const()
  assert i.alu(Ops.MOD, i.const_like(1)).is_unrealized_const()
  assert (x + x).op is Ops.ADD and (x * x.const_like(0)).op is Ops.MUL   # recorded, not folded
  assert (x.const_like(2) * x.const_like(3)).const_arg == 6              # all constants: computed now
  xt = Tensor([1.0, float("nan"), float("inf")], device=device)
  np.testing.assert_equal((xt * 0).numpy(), np.array([0.0, np.nan, np.nan], np.float32))
  np.testing.assert_equal((Tensor([3, -4, 5], device=device) * 0).numpy(), np.zeros(3, np.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_cached_kernel_same_as_scheduled(device):
  """A graph of a structure seen before gets its kernel from the cache: the same AST as the first, scheduled one,
  with this graph's buffers, and the values the first way gives."""
  a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device).realize()
  b = Tensor(np.full((3, 4), 2, np.float32), device=device).realize()
  def program(x, y): return ((x * y).permute(1, 0) + 1.5).contiguous()
  _schedule_cache.clear()
  (first,) = program(a, b).schedule()
  assert len(_schedule_cache) == 1
  c, d = (Tensor(np.random.default_rng(s).standard_normal((3, 4)).astype(np.float32), device=device).realize() for s in (1, 2))
  out = program(c, d)
  (cached,) = out.schedule()
  assert cached.ast is first.ast and len(_schedule_cache) == 1
  assert cached.bufs[1:] == (c.lazydata.base.buffer, d.lazydata.base.buffer)
  np.testing.assert_allclose(out.numpy(), (c.numpy() * d.numpy()).T + 1.5, rtol=1e-6)
  np.testing.assert_allclose(program(a, b).numpy(), (a.numpy() * b.numpy()).T + 1.5)


@pytest.mark.parametrize("device", DEVICES)
def test_buffer_whose_init_raised_is_freed_quietly(device, monkeypatch):
  "A Buffer view that doesn't fit raises ValueError, and freeing the half-made object reports no error of its own."
  unraisable = []
  monkeypatch.setattr("sys.unraisablehook", unraisable.append)
  base = Buffer(device, 4, dtypes.float32).allocate()
  with pytest.raises(ValueError, match="doesn't fit"): Buffer(device, 8, dtypes.float32, base=base)
  del base
  assert unraisable == []


@pytest.mark.parametrize("device", DEVICES)
def test_shapetracker_hash_after_pickle(device):
  "A ShapeTracker, symbolic or not, pickled and copied: equal, with the same hash, found under it in a dict."
  n = Variable("n", 1, 8)
  for st in (ShapeTracker.from_shape((2, 3)).permute((1, 0)).pad(((1, 0), (0, 2))), ShapeTracker.from_shape((n.bind(3), 4))):
    for again in (pickle.loads(pickle.dumps(st)), copy.deepcopy(st), copy.copy(st)):
      assert again == st and hash(again) == hash(st) and {st: 1}[again] == 1
  x = Tensor(np.arange(5, dtype=np.float32), device=device).reshape(n.bind(5)) * 2
  assert pickle.loads(pickle.dumps(x.lazydata.st)) == x.lazydata.st


@pytest.mark.parametrize("device", DEVICES)
def test_holders_are_the_live_tensors(device):
  """A base's holders are the Tensors alive now, after thousands of short-lived views came and went; its record
  of them stays within twice the live ones and 8 more (plus the one just added)."""
  w = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4), device=device).realize()
  base = w.lazydata.base
  kept = [w[i] for i in range(3)] + [w.permute(1, 0) for _ in range(20)]
  for _ in range(2000): w.permute(1, 0).reshape(16)
  assert sorted(map(id, base.holders)) == sorted(map(id, [w, *kept]))
  assert len(base._holders) <= 2 * (1 + len(kept)) + 8 + 1
  del kept[5:]
  assert sorted(map(id, base.holders)) == sorted(map(id, [w, *kept]))
  np.testing.assert_equal(kept[3].numpy(), np.arange(16, dtype=np.float32).reshape(4, 4).T)


@pytest.mark.parametrize("device", DEVICES)
def test_cached_schedule_of_several_kernels(device):
  """A graph of several kernels (a softmax: reduces, then an elementwise tail) seen before gets its whole schedule from
  the cache: the same ASTs, on this graph's inputs and new intermediates, with the right values; an intermediate held
  by a tensor is still computed right when it is asked for later."""
  rng = np.random.default_rng(3)
  def program(x): return (x - x.max(1, keepdim=True)).exp() / (x - x.max(1, keepdim=True)).exp().sum(1, keepdim=True)
  a, c = (Tensor(rng.standard_normal((4, 5)).astype(np.float32), device=device).realize() for _ in range(2))
  _schedule_cache.clear()
  first = program(a).schedule()
  assert len(first) >= 2 and len(_schedule_cache) == 1
  out = program(c)
  again = out.schedule()
  assert [si.ast for si in again] == [si.ast for si in first] and len(_schedule_cache) == 1
  assert c.lazydata.base.buffer in {b for si in again for b in si.bufs}
  assert not {b for si in again for b in si.bufs} & {b for si in first for b in si.bufs}   # nothing of the first graph's
  want = np.exp(c.numpy() - c.numpy().max(1, keepdims=True))
  np.testing.assert_allclose(out.numpy(), want / want.sum(1, keepdims=True), rtol=1e-5)
  held = c - c.max(1, keepdim=True)   # an intermediate a tensor holds: computed when asked, from the cached schedule's inputs
  np.testing.assert_allclose(program(c).numpy(), want / want.sum(1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(held.numpy(), c.numpy() - c.numpy().max(1, keepdims=True), rtol=1e-6)
