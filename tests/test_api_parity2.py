"""Issue 19's leftovers, on every device: a captured TinyJit through pickle, a symbolic pad that is negative at the edge
of its variable's range (tinygrad's test_assign_kv_cache), and Python ints that wrap into the dtype they are given,
as tinygrad v0.10's do. Each is compared with numpy, or with the same computation without the feature."""
import pickle

import numpy as np
import pytest

from tinylit import Tensor, TinyJit, Variable, dtypes
from tinylit.jit import JitError
from devices import DEVICES


def rand(rng, *shape) -> np.ndarray: return rng.standard_normal(shape).astype(np.float32)


# ---- TinyJit through pickle
@pytest.mark.parametrize("device", DEVICES)
def test_pickled_jit_replays(device):
  "tinygrad's test_pickle_jit: capture, pickle, delete, load, and the loaded recording computes with new inputs."
  @TinyJit
  def add(a: Tensor, b: Tensor) -> Tensor: return a.sum() + b + 1
  rng = np.random.default_rng(0)
  for _ in range(3): add(Tensor(rand(rng, 10, 10), device=device), Tensor(rand(rng, 10, 10), device=device))
  saved = pickle.dumps(add)
  del add
  loaded = pickle.loads(saved)
  assert loaded.fxn is None and len(loaded.jit_cache) >= 1
  for _ in range(2):
    a, b = rand(rng, 10, 10), rand(rng, 10, 10)
    out = loaded(Tensor(a, device=device), Tensor(b, device=device))
    assert out.device == device
    np.testing.assert_allclose(out.numpy(), a.sum() + b + 1, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_pickled_jit_keeps_weights_and_structure(device):
  "A weight the kernels read is saved with its bytes; a dict of results comes back as a dict, a returned input as it."
  rng = np.random.default_rng(1)
  w = rand(rng, 4, 3)
  weight = Tensor(w, device=device).realize()
  @TinyJit
  def step(x: Tensor) -> dict: return {"y": (x @ weight).relu(), "s": (x @ weight).sum(axis=1), "x": x}
  for _ in range(3): step(Tensor(rand(rng, 2, 4), device=device))
  loaded = pickle.loads(pickle.dumps(step))
  del step
  weight.assign(Tensor.zeros(4, 3, device=device)).realize()   # the loaded recording has its own copy of the weight
  x = rand(rng, 2, 4)
  xt = Tensor(x, device=device)
  out = loaded(xt)
  assert sorted(out) == ["s", "x", "y"]
  np.testing.assert_allclose(out["y"].numpy(), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out["s"].numpy(), (x @ w).sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(out["x"].numpy(), x)


@pytest.mark.parametrize("device", DEVICES)
def test_pickled_symbolic_jit(device):
  "A recording with a bound Variable in its inputs' shapes serves other values of it after loading, too."
  @TinyJit
  def total(x: Tensor) -> Tensor: return (x * 2).sum(axis=0)
  v = Variable("n", 1, 16)
  for n in (3, 5, 7): total(Tensor.ones(16, 2, device=device).contiguous().shrink(((0, n), None)).reshape(v.bind(n), 2))
  loaded = pickle.loads(pickle.dumps(total))
  for n in (2, 9):
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    out = loaded(Tensor(x, device=device).reshape(v.bind(n), 2))
    np.testing.assert_allclose(out.numpy(), (x * 2).sum(0))


def test_pickle_uncaptured_jit_is_refused():
  jit = TinyJit(lambda x: x + 1)
  with pytest.raises(JitError, match="before it captured"): pickle.dumps(jit)
  jit(Tensor([1.0]))
  with pytest.raises(JitError, match="before it captured"): pickle.dumps(jit)


# ---- a symbolic pad that is negative at the edge of its variable's range
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("value", [0.0, 2.5])
def test_symbolic_pad_negative_at_range_edge(device, value):
  "8 - pos - 1 is -1 at pos = 8: a crop there, a pad below it; before and after, constant `value` or zeros."
  pos = Variable("pos", 1, 8)
  for n in (1, 4, 7, 8):
    keys = np.arange(1, n + 2, dtype=np.float32)
    t = Tensor(keys, device=device).reshape(pos.bind(n) + 1)
    amount = 8 - pos.bind(n) - 1
    after = t.pad((0, amount), value=value)
    assert after.shape == (8,)
    want = keys[:8] if n == 8 else np.pad(keys, (0, 7 - n), constant_values=value)
    np.testing.assert_array_equal(after.numpy(), want)
    before = t.pad(((amount, 1),), value=value)
    want = keys[1:] if n == 8 else np.pad(keys, (7 - n, 0), constant_values=value)
    np.testing.assert_array_equal(before.numpy(), np.append(want, value))


def test_symbolic_pad_that_may_be_negative_refuses_a_gradient():
  pos = Variable("pos", 1, 8).bind(3)
  x = Tensor.ones(4, requires_grad=True).reshape(pos + 1)
  with pytest.raises(NotImplementedError, match="negative"): x.pad((0, 8 - pos - 1))
  # a symbolic amount that can't be negative still differentiates
  y = Tensor.ones(4, requires_grad=True)
  q = Variable("q", 1, 7).bind(3)
  (y.reshape(q + 1).pad((1, 7 - q)) * Tensor.arange(9).float()).sum().backward()
  np.testing.assert_array_equal(y.grad.numpy(), [1, 2, 3, 4])


@pytest.mark.parametrize("device", DEVICES)
def test_assign_kv_cache(device):
  "tinygrad v0.10's test_assign_kv_cache: a jitted cache update whose pad is -1 at the variable's largest value."
  bsz, max_context = 2, 8
  class Attn:
    @TinyJit
    def __call__(self, xk: Tensor, start_pos):
      seqlen = xk.shape[1]
      if not hasattr(self, "cache_k"): self.cache_k = Tensor.zeros(bsz, max_context, 1, 1, device=device).contiguous()
      keys = self.cache_k.shrink((None, (0, start_pos), None, None)).cat(xk, dim=1).contiguous() if start_pos > 0 else xk
      self.cache_k.assign(keys.pad((None, (0, max_context - start_pos - seqlen), None, None)).contiguous()).realize()
  attn = Attn()
  attn(Tensor.ones(bsz, 3, 1, 1, device=device).contiguous(), 0)
  for i in range(3, 6): attn(Tensor.ones(bsz, 1, 1, 1, device=device).contiguous(), Variable("start_pos", 1, max_context).bind(i))
  np.testing.assert_array_equal(attn.cache_k.flatten().numpy(), [1, 1, 1, 1, 1, 1, 0, 0] * 2)


# ---- Python ints wrap into a dtype that is named
WRAP = [1 << 33, 1 << 32, (1 << 32) - 1, 1 << 31, 300, 1, 0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [dtypes.uint8, dtypes.int8, dtypes.uint16, dtypes.int16, dtypes.uint32, dtypes.int32,
                                   dtypes.uint64, dtypes.int64])
def test_int_literals_wrap_into_named_dtype(device, dtype):
  "tinygrad's test_tensor_list_special_values for every int dtype: a list, a scalar, full; as numpy's astype wraps."
  data = WRAP + [-x for x in WRAP]
  want = np.array(data, dtype=np.int64).astype(dtype.np)
  np.testing.assert_array_equal(Tensor(data, dtype=dtype, device=device).numpy(), want)
  for x, w in zip(data, want):
    assert Tensor(x, dtype=dtype, device=device).item() == w
  np.testing.assert_array_equal(Tensor.full((3,), -1, dtype=dtype, device=device).numpy(), np.full(3, -1).astype(dtype.np))
  assert Tensor(2**70 + 5, dtype=dtype, device=device).item() == np.array(5).astype(dtype.np)   # past 64 bits: the low bits


@pytest.mark.parametrize("device", DEVICES)
def test_int_literals_in_arithmetic_wrap(device):
  "The issue's examples: a Python int meets an unsigned tensor in its dtype, with C's wrap-around."
  u8 = Tensor([1, 200], dtype=dtypes.uint8, device=device)
  np.testing.assert_array_equal((u8 - 2).numpy(), np.array([255, 198], np.uint8))
  np.testing.assert_array_equal((u8 + 300).numpy(), np.array([45, 244], np.uint8))
  assert Tensor(-1, dtype=dtypes.uint32, device=device).item() == 2**32 - 1
  np.testing.assert_array_equal((Tensor([5], dtype=dtypes.uint32, device=device) * -1).numpy(), [2**32 - 5])


def test_unnamed_dtype_does_not_wrap():
  "With no dtype named, an int picks one that holds it; one that fits none is still an OverflowError."
  assert Tensor(2**40).dtype == dtypes.int64 and Tensor(2**63).dtype == dtypes.uint64
  with pytest.raises(OverflowError, match="1180591620717411303424"): Tensor(2**70)
  with pytest.raises(OverflowError): Tensor([-1, 2**63])   # uint64 would be needed, and it has no -1


# ---- tinygrad's helpers that its tests use
def test_helpers_temp(tmp_path, monkeypatch):
  "helpers.temp(name): a path in the system's temporary folder (tinygrad's test_copy_from_numpy_unaligned writes there)."
  from tinylit.helpers import temp
  monkeypatch.setenv("TMPDIR", str(tmp_path))
  import tempfile
  monkeypatch.setattr(tempfile, "tempdir", None)   # forget the cached folder, so TMPDIR is read again
  assert temp("scratch.bin") == str(tmp_path / "scratch.bin")


def test_symbolic_pad_that_may_be_negative_under_no_grad():
  "Where no graph is recorded (Tensor.test(), tinygrad's no_grad) there is no gradient to get wrong: the pad runs."
  pos = Variable("pos", 1, 8).bind(8)
  x = Tensor.arange(9, requires_grad=True).float()
  with Tensor.test():
    np.testing.assert_array_equal(x.reshape(pos + 1).pad((0, 8 - pos - 1)).numpy(), np.arange(8))


# ---- ShapeTracker.real_strides, and the one form of a view with no elements
@pytest.mark.parametrize("device", DEVICES)
def test_real_strides(device):
  "tinygrad's TestZeroShapeTensor.test_shape_stride, plus the strides of a transpose, a broadcast and a padded view."
  for shape in ((3, 2, 0), (3, 0, 2), (0,)):
    t = Tensor.empty(*shape, device=device)
    assert t.lazydata.st.real_strides() == (0,) * len(shape)
    assert t.numpy().shape == shape and (t + 1).reshape(-1).numpy().shape == (0,)
  x = Tensor.arange(12, device=device).reshape(3, 4)
  assert x.T.lazydata.st.real_strides() == (1, 4)
  assert x[:, :1].expand(3, 5).lazydata.st.real_strides() == (4, 0)
  padded = x.pad(((1, 1), None)).lazydata.st
  assert padded.real_strides() == (None, 1) and padded.real_strides(ignore_valid=True) == (4, 1)
  assert x.T.reshape(12).lazydata.st.real_strides() == (None,)   # across two views: no single stride
