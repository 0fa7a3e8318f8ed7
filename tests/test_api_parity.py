"""tinygrad v0.10's public API beyond the op suite (issue 19), on every device: bfloat16, dtype names and helpers,
rearrange, from_blob, Tensor from a list of arrays, pickling, Context as an object and tinygrad's flags, Device names,
OptimizerGroup and torch_load. Each test compares with numpy or torch, or with what tinygrad documents."""
import array, os, pickle, re, subprocess, sys

import numpy as np
import pytest
import torch

from tinylit import Tensor, TinyJit, dtypes
from tinylit.device import Device, is_dtype_supported
from tinylit.dtype import bf16_to_float, float_to_bf16, to_dtype, truncate_bf16
from tinylit.helpers import CAPTURING, Context, DEBUG, WINO, mv_address
from tinylit.nn.optim import SGD, Adam, OptimizerGroup
from tinylit.nn.state import safe_load, safe_save, torch_load
from devices import DEVICES

VALUES = [0.0, -0.0, 1.0, 1 / 3, -2.5, 1e-30, 3e38, 65504.0, -1e9, float("inf"), float("-inf")]


def torch_bf16(x) -> np.ndarray: return torch.tensor(np.asarray(x, np.float32)).to(torch.bfloat16).float().numpy()


# ---- bfloat16
def test_bf16_host_rounding_matches_torch():
  x = np.concatenate([np.array(VALUES, np.float32), np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 1e3])
  np.testing.assert_array_equal(truncate_bf16(x), torch_bf16(x))
  assert np.isnan(truncate_bf16(np.nan))
  np.testing.assert_array_equal(bf16_to_float(float_to_bf16(x)), torch_bf16(x))


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_storage_and_casts(device):
  t = Tensor(VALUES, dtype=dtypes.bfloat16, device=device)
  assert t.dtype == dtypes.bfloat16 and t.element_size() == 2
  np.testing.assert_array_equal(t.numpy(), torch_bf16(VALUES))                     # numpy() gives float32, as tinygrad
  np.testing.assert_array_equal(t.float().numpy(), torch_bf16(VALUES))
  f = Tensor(np.linspace(-300, 300, 77, dtype=np.float32), device=device)
  np.testing.assert_array_equal(f.cast(dtypes.bfloat16).numpy(), torch_bf16(f.numpy()))   # rounding in the kernel
  ints = Tensor([-7, 0, 3, 1000], dtype=dtypes.bfloat16, device=device).cast(dtypes.int32).numpy()
  np.testing.assert_array_equal(ints, [-7, 0, 3, 1000])
  assert t.bitcast(dtypes.uint16).numpy().tolist() == float_to_bf16(VALUES).tolist()
  np.testing.assert_array_equal(Tensor.ones(2, 3, dtype=dtypes.bfloat16, device=device).numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_math_in_float32_rounded(device):
  a = np.random.default_rng(1).standard_normal(64).astype(np.float32)
  b = np.random.default_rng(2).standard_normal(64).astype(np.float32)
  ta, tb = Tensor(a, dtype="bfloat16", device=device), Tensor(b, dtype="bfloat16", device=device)
  xa, xb = torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16()
  out = ta * tb + 1
  assert out.dtype == dtypes.bfloat16
  np.testing.assert_array_equal(out.numpy(), (xa * xb + 1).float().numpy())     # each op rounds, as torch's do
  np.testing.assert_array_equal(ta.maximum(tb).numpy(), torch.maximum(xa, xb).float().numpy())
  np.testing.assert_array_equal((ta < tb).numpy(), (xa < xb).numpy())
  np.testing.assert_allclose(ta.sum().numpy(), xa.float().sum().numpy(), rtol=1e-2)   # accumulated in float32
  np.testing.assert_allclose(ta.exp().numpy(), xa.exp().float().numpy(), rtol=1e-2)
  assert (ta + Tensor(a, device=device)).dtype == dtypes.float32                    # the lattice: bfloat16 -> float32


def test_bf16_renders_for_cuda_with_nvrtc():
  "CUDA gets the same 16-bit storage and conversion functions; NVRTC compiles them (no GPU needed)."
  try:
    from cuda.bindings import nvrtc  # noqa: F401
    from tinylit.runtime.ops_cuda import CUDACompiler
    CUDACompiler("sm_80").compile('extern "C" __global__ void probe(float* x) { x[0] = 1.0f; }')
  except Exception as e: pytest.skip(f"NVRTC can't compile here: {e}")
  from tinylit.realize import get_program
  from tinylit.renderer import CUDARenderer
  a = Tensor([1.0, 2.5], dtype=dtypes.bfloat16)
  for out in [(a * 3 + 1).exp(), a.cast(dtypes.half), a.sum(), (a < 2).where(a, 0)]:
    for si in out.schedule():
      if si.ast.op.name == "SINK": CUDACompiler("sm_80").compile(get_program(si.ast, CUDARenderer()).src)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_safetensors_round_trip(device, tmp_path):
  t = Tensor([1.5, -2.25, 1 / 3], dtype=dtypes.bfloat16, device=device)
  safe_save({"t": t}, str(tmp_path / "t.safetensors"))
  back = safe_load(str(tmp_path / "t.safetensors"), device=device)["t"]
  assert back.dtype == dtypes.bfloat16 and back.numpy().tolist() == t.numpy().tolist()


# ---- dtype names and helpers
def test_dtype_names_and_helpers():
  for name, dt in [("int", dtypes.int32), ("float", dtypes.float32), ("half", dtypes.float16), ("double", dtypes.float64),
                   ("uchar", dtypes.uint8), ("long", dtypes.int64), ("bfloat16", dtypes.bfloat16)]:
    assert to_dtype(name) is dt and Tensor([1], dtype=name).dtype == dt
  assert dtypes.fields()["bfloat16"] == dtypes.bfloat16 and "half" not in dtypes.fields()
  assert dtypes.finfo(dtypes.bfloat16) == (8, 7) and dtypes.finfo(dtypes.half) == (5, 10)
  with pytest.raises(ValueError): dtypes.finfo(dtypes.int32)
  assert is_dtype_supported(dtypes.bfloat16, "CPU") and is_dtype_supported(dtypes.bfloat16, "PYTHON")


@pytest.mark.parametrize("value", ["HALF", "float64"])
def test_default_float_env(value):
  code = "from tinylit import Tensor, dtypes; print(Tensor([1.5]).dtype, Tensor.rand(2).dtype, dtypes.default_float)"
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "DEFAULT_FLOAT": value}, capture_output=True, text=True)
  want = repr(to_dtype(value.lower()))
  assert out.stdout.split() == [want] * 3, out.stderr[-500:]


# ---- rearrange
@pytest.mark.parametrize("device", DEVICES)
def test_rearrange(device):
  x = np.arange(2 * 6 * 4 * 4).reshape(2, 6, 4, 4)
  t = Tensor(x, device=device)
  got = t.rearrange("b (c k) (h h2) (w w2) -> b (c h2 w2) k h w", k=2, h2=2, w2=2).numpy()
  want = x.reshape(2, 3, 2, 2, 2, 2, 2).transpose(0, 1, 4, 6, 2, 3, 5).reshape(2, 12, 2, 2, 2)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(t.rearrange("b ... w -> w (...) b").numpy(), x.transpose(3, 1, 2, 0).reshape(4, 24, 2))
  assert t.rearrange("b c h w -> b 1 c h w 1").shape == (2, 1, 6, 4, 4, 1)
  for bad, msg in [("b c h w -> b c h", "same axes"), ("b c h -> b c h", "left side has 3 dims"), ("b c (h h2 h3) w -> b c h w h2 h3", "all but one"),
                   ("b c h w -> b c h w -> b", "exactly one"), ("b c* h w -> b c h w", "not an axis name"),
                   ("b (c h w -> b c h w", "without its ')'")]:
    with pytest.raises((ValueError, RuntimeError, AssertionError), match=re.escape(msg)):
      t.rearrange(bad, **({"h2": 2} if "h2" in bad else {}))


# ---- Tensor from outside memory, from a list of arrays, and through pickle
@pytest.mark.parametrize("device", DEVICES)
def test_from_blob(device):
  host = memoryview(bytearray(16)).cast("I")
  if device not in ("CPU", "PYTHON"):
    with pytest.raises(NotImplementedError, match="host address"): Tensor.from_blob(mv_address(host), (4,), dtype=dtypes.uint32, device=device)
    return
  t = Tensor.from_blob(mv_address(host), (4,), dtype=dtypes.uint32, device=device)
  assert (t + 1).tolist() == [1, 1, 1, 1]
  host[:] = array.array("I", [0, 1, 2, 3])
  assert (t + 1).tolist() == [1, 2, 3, 4]   # no copy: the tensor reads the owner's memory


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_from_list_of_arrays(device):
  for data in ([np.array([1, 2, 3])] * 3, [np.array([1.0, 2.0]), np.array([3, 4])], [np.array(1.0), np.array(2.0)]):
    np.testing.assert_array_equal(Tensor(data, device=device).numpy(), np.array(data))
  assert Tensor([np.array([1, 2])], dtype=dtypes.float16, device=device).dtype == dtypes.float16


@pytest.mark.parametrize("device", DEVICES)
def test_pickle_tensor(device):
  for t in [Tensor.rand(4, 5, device=device).realize(), Tensor.ones(3, 3, device=device) * 2, Tensor.arange(10, device=device)[3:7],
            Tensor([1.5, -2.0], dtype=dtypes.bfloat16, device=device), Tensor([True, False], device=device)]:
    back = pickle.loads(pickle.dumps(t))
    assert (back.shape, back.dtype, back.device) == (t.shape, t.dtype, t.device)
    np.testing.assert_array_equal(back.numpy(), t.numpy())
  assert pickle.loads(pickle.dumps(Tensor([1.0], requires_grad=True, device=device))).requires_grad is True


# ---- Context, flags, devices
def test_context_is_reusable_and_a_decorator():
  ctx = Context(DEBUG=2)
  for _ in range(3):
    with ctx:
      assert DEBUG.value == 2
      with ctx: assert DEBUG.value == 2   # entered again while inside
  base = DEBUG.value
  @Context(DEBUG=3)
  def f(): return DEBUG.value
  assert f() == 3 and DEBUG.value == base
  with pytest.raises(KeyError, match="NOT_A_FLAG"), Context(NOT_A_FLAG=1): pass


@pytest.mark.parametrize("device", DEVICES)
def test_wino_refused_clearly(device):
  x, w = Tensor.ones(1, 1, 5, 5, device=device), Tensor.ones(1, 1, 3, 3, device=device)
  assert not WINO
  with Context(WINO=1), pytest.raises(NotImplementedError, match="Winograd"): x.conv2d(w)
  with Context(FUSE_ARANGE=1): np.testing.assert_array_equal(x.conv2d(w).numpy(), np.full((1, 1, 3, 3), 9.0))


@pytest.mark.parametrize("device", DEVICES)
def test_capturing_off_hides_a_kernel_from_tinyjit(device):
  side = []
  @TinyJit
  def f(a):
    with Context(CAPTURING=0): side.append(Tensor.zeros(4, device=device).contiguous().realize())
    return (a + 1).realize()
  for i in range(4): np.testing.assert_array_equal(f(Tensor([float(i)], device=device)).numpy(), [i + 1.0])
  assert CAPTURING.value == 1
  assert len(f.jit_cache) == 1, [ei.prg for ei in f.jit_cache]


def test_device_names():
  assert Device.canonicalize("CLANG") == "CPU" and Device.canonicalize("gpu") == "CL"
  assert Tensor([1], device="CLANG").device == "CPU"
  assert Device.default is Device[Device.DEFAULT]
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  out = subprocess.run([sys.executable, "-c", "from tinylit import Device; print(Device.DEFAULT)"], env={**env, "PYTHON": "1"},
                       capture_output=True, text=True)
  assert out.stdout.strip() == "PYTHON", out.stderr[-500:]


# ---- optimizers and checkpoints
@pytest.mark.parametrize("device", DEVICES)
def test_optimizer_group(device):
  a0, b0 = np.array([1.0, -2.0], np.float32), np.array([3.0], np.float32)
  a, b = Tensor(a0, requires_grad=True, device=device), Tensor(b0, requires_grad=True, device=device)
  group = OptimizerGroup(SGD([a], lr=0.1), Adam([b], lr=0.01))
  ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
  topt = [torch.optim.SGD([ta], lr=0.1), torch.optim.Adam([tb], lr=0.01)]
  with Tensor.train():
    for _ in range(3):
      group.zero_grad(); ((a * a * b).sum() + (b * b).sum()).backward(); group.step()
      for o in topt: o.zero_grad()
      ((ta * ta * tb).sum() + (tb * tb).sum()).backward()
      for o in topt: o.step()
  np.testing.assert_allclose(a.numpy(), ta.detach().numpy(), rtol=1e-5)
  np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-5)
  assert isinstance(group[1], type(Adam([Tensor([1.0], requires_grad=True)]))) and len(group.params) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_torch_load(device, tmp_path):
  sd = {"w": torch.arange(12.0).reshape(3, 4).T, "b": torch.tensor([1, -2], dtype=torch.int16), "s": torch.tensor(2.5),
        "h": torch.tensor([0.5, 1 / 3], dtype=torch.bfloat16), "half": torch.tensor([1.5], dtype=torch.float16),
        "p": torch.nn.Parameter(torch.ones(2)), "row": torch.arange(10.0)[2:5], "m": torch.tensor([True, False])}
  torch.save(sd, tmp_path / "m.pt")
  got = torch_load(str(tmp_path / "m.pt"), device=device)
  assert list(got) == list(sd)
  for k, v in sd.items():
    assert got[k].device == device and got[k].shape == tuple(v.shape), k
    np.testing.assert_array_equal(got[k].numpy(), v.detach().float().numpy() if v.dtype == torch.bfloat16 else v.detach().numpy())
  assert got["h"].dtype == dtypes.bfloat16 and got["half"].dtype == dtypes.float16 and got["b"].dtype == dtypes.int16
  (tmp_path / "bad.pt").write_bytes(b"not a zip")
  with pytest.raises(ValueError, match="not a zip"): torch_load(str(tmp_path / "bad.pt"))
