"""One answer on every path: casts of NaN, infinities and out-of-range floats to ints (the same on every device and in
constant folding), a compile-cache entry that belongs to another kernel (recompiled, never run), and BEAM on a
symbolic shape (timed through the launch a real run uses, with the variables' values). Every test runs on every
device tinylit has; a device this machine can't open is skipped, saying why."""
import shutil

import numpy as np
import pytest

from tinylit import Tensor, dtypes
from tinylit.device import Device
from tinylit.helpers import Context
from tinylit.ops import Variable
from tinylit.realize import CompiledRunner, get_program
from tinylit.renderer import CUDARenderer, OpenCLRenderer
from devices import DEVICES, has_half


# ---- a float cast to an int: one answer on every device and in constant folding (chapter 3's _float_to_int)

NAN, INF = float("nan"), float("inf")
CAST_INPUTS = [NAN, INF, -INF, 3e9, -3e9, 1e19, 1e20, -1e20, 300.0, -1.0, 2.5, -2.5]
# what x86-64 gives (compiled C, and numpy's astype of one element): through int32 (int64 for int64, uint32,
# uint64), NaN / inf / out of range becoming that type's minimum, then wrapped; uint64 takes 2**63 and up too
CAST_WANT = {
  "int8": [0, 0, 0, 0, 0, 0, 0, 0, 44, -1, 2, -2],
  "uint8": [0, 0, 0, 0, 0, 0, 0, 0, 44, 255, 2, 254],
  "int16": [0, 0, 0, 0, 0, 0, 0, 0, 300, -1, 2, -2],
  "uint16": [0, 0, 0, 0, 0, 0, 0, 0, 300, 65535, 2, 65534],
  "int32": [-2**31] * 8 + [300, -1, 2, -2],
  "uint32": [0, 0, 0, 3000000000, 1294967296, 0, 0, 0, 300, 2**32 - 1, 2, 2**32 - 2],
  "int64": [-2**63, -2**63, -2**63, 3000000000, -3000000000, -2**63, -2**63, -2**63, 300, -1, 2, -2],
  "uint64": [2**63, 0, 2**63, 3000000000, 2**64 - 3000000000, 9999999980506447872, 0, 2**63, 300, 2**64 - 1, 2, 2**64 - 2],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(CAST_WANT))
def test_float_to_int_cast_in_a_kernel(device, dtype):
  x = Tensor(np.array(CAST_INPUTS, np.float32), device=device)
  got = x.cast(getattr(dtypes, dtype)).numpy()
  assert got.tolist() == CAST_WANT[dtype], f"float32 {CAST_INPUTS} cast to {dtype} on {device}"


@pytest.mark.parametrize("device", DEVICES)
def test_float_to_int_cast_from_float64_and_float16(device):
  # a double (and a half, compared as a float) takes the same test of its range
  got = Tensor(np.array(CAST_INPUTS, np.float64), device=device).cast(dtypes.int32).numpy()
  assert got.tolist() == [-2**31] * 8 + [300, -1, 2, -2], f"float64 cast to int32 on {device}"
  if has_half(device):
    half = Tensor(np.array([NAN, INF, -INF, 300.0, -2.5], np.float16), device=device)
    assert half.cast(dtypes.int8).numpy().tolist() == [0, 0, 0, 44, -2], f"float16 cast to int8 on {device}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("value", [NAN, INF, -INF, 3e9, -3e9])
def test_float_to_int_cast_constant_folded(device, value):
  # a constant is cast while the graph is built (chapter 2's folding, chapter 3's exec_alu): no kernel computes it
  folded = Tensor(value, device=device).cast(dtypes.int32)
  assert folded.lazydata.base.op.name == "CONST", "the cast of a constant should fold"
  assert folded.item() == -2**31, f"int32({value}) folded"
  assert Tensor(value, device=device).cast(dtypes.uint8).item() == 0, f"uint8({value}) folded"
  assert Tensor(value, device=device).cast(dtypes.int64).item() == (3000000000 if value == 3e9 else -3000000000 if value == -3e9
                                                                     else -2**63), f"int64({value}) folded"


@pytest.mark.parametrize("renderer", [OpenCLRenderer, CUDARenderer])
def test_gpu_renderers_test_the_range(renderer):
  "OpenCL and CUDA saturate an out-of-range cast (NaN to 0): the source tests the range first, as the C does."
  ast = Tensor(np.zeros(4, np.float32), device="PYTHON").cast(dtypes.int32).schedule()[-1].ast
  src = get_program(ast, renderer()).src
  assert ">=-2147483648.0f&&" in src and "<2147483648.0f)?(int)" in src and "(-2147483647-1)" in src, src
  if renderer is CUDARenderer:
    try:
      from cuda.bindings import nvrtc  # noqa: F401
      from tinylit.runtime.ops_cuda import CUDACompiler
      CUDACompiler("sm_80").compile('extern "C" __global__ void probe(float* x) { x[0] = 1.0f; }')
    except Exception as e: pytest.skip(f"NVRTC can't compile here: {e}")
    for dt in CAST_WANT:   # every int type, from float and from double, compiles for the GPU
      for src_dt in (np.float32, np.float64, np.float16):
        ast = Tensor(np.zeros(4, src_dt), device="PYTHON").cast(getattr(dtypes, dt)).schedule()[-1].ast
        CUDACompiler("sm_80").compile(get_program(ast, renderer()).src)


# ---- a compile-cache entry is tied to its key

def _kernel(device: str, scale: float):
  "The one kernel of `x * scale + 1` on six floats, and its schedule item (whose buffers it runs on)."
  x = np.arange(6, dtype=np.float32)
  si = (Tensor(x, device=device) * scale + 1).schedule()[-1]
  return si, x * np.float32(scale) + 1


def _run(si, device: str) -> np.ndarray:
  "Compile (through the disk cache) and run the item's kernel; its output."
  runner = CompiledRunner(get_program(si.ast, Device[device].renderer))
  bufs = [si.bufs[i] for i in runner.p.globals]
  for b in bufs: b.allocate()
  runner(bufs)
  return si.bufs[0].numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_cache_entry_of_another_kernel_is_recompiled(device, tmp_path, monkeypatch):
  if Device[device].compiler.cachekey is None: pytest.skip(f"{device} has no disk cache (its compiler's cachekey is None)")
  monkeypatch.setenv("TINYLIT_CACHE", str(tmp_path))
  monkeypatch.delenv("DISABLE_COMPILER_CACHE", raising=False)
  times3, want3 = _kernel(device, 3.0)
  np.testing.assert_array_equal(_run(times3, device), want3)
  entry3 = {p.name for p in tmp_path.glob("*.bin")}
  times5, want5 = _kernel(device, 5.0)
  np.testing.assert_array_equal(_run(times5, device), want5)
  (entry5,) = {p.name for p in tmp_path.glob("*.bin")} - entry3
  (entry3,) = entry3
  shutil.copyfile(tmp_path / entry5, tmp_path / entry3)   # x*5+1's whole, well-formed entry under x*3+1's name
  np.testing.assert_array_equal(_run(times3, device), want3, err_msg="x*3+1 ran another kernel's cached binary")
  # overwritten (not compared with the first file: an OpenCL compiler's binary need not be the same bytes twice)
  assert (tmp_path / entry3).read_bytes() != (tmp_path / entry5).read_bytes(), "the wrong entry should be overwritten"


# ---- BEAM on a symbolic shape: candidates are launched as a real run is, with the variables' values

@pytest.mark.parametrize("device", DEVICES)
def test_beam_symbolic_shape(device, tmp_path, monkeypatch, capsys):
  monkeypatch.setenv("TINYLIT_CACHE", str(tmp_path))   # an empty cache: no BEAM winner on disk, the search runs
  dev = Device[device]
  launched: list[tuple] = []   # the variable values each launch of a program passed
  def recording_runtime(name, lib, _runtime=dev.runtime):
    prg = _runtime(name, lib)
    def call(*bufs, **kwargs):
      launched.append(tuple(kwargs.get("vals", ())))
      return prg(*bufs, **kwargs)
    return call
  monkeypatch.setattr(dev, "runtime", recording_runtime)
  x = np.arange(40, dtype=np.float32).reshape(4, 10)
  n = Variable("n", 1, 10).bind(4)
  with Context(BEAM=2):
    got_sum = Tensor(x, device=device).shrink((None, (0, n))).sum(1).numpy()
    got_mean = Tensor(x.reshape(40), device=device).reshape(4, 10).shrink((None, (0, n))).mean(1).numpy()
  np.testing.assert_allclose(got_sum, x[:, :4].sum(1), rtol=1e-6)
  np.testing.assert_allclose(got_mean, x[:, :4].mean(1), rtol=1e-6)
  assert "BEAM=2" in capsys.readouterr().err, "the search should have run (its progress bar is on stderr)"
  assert len(launched) > 2, "BEAM should have timed candidates"
  assert set(launched) == {(4,)}, f"every launch, timed or not, should pass n=4; got {sorted(set(launched))}"
