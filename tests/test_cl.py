"""The CL device (OpenCL via pyopencl; PoCL runs it on the CPU): a representative set of ops, forwards and
backwards, against torch, plus dtypes and copies. Each OpenCL kernel takes PoCL a moment to build, so this
set is smaller than the CPU/PYTHON one; the kernels are the same ASTs rendered by OpenCLRenderer."""
import sys
from types import SimpleNamespace

import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinylit import Tensor
from tinylit.runtime.ops_cl import CLDevice
from test_ops import check_op

@pytest.fixture(scope="module")
def cl_device():
  "Skip, saying why, where this machine has no OpenCL device that builds kernels."
  pytest.importorskip("pyopencl")
  from tinylit.device import Device
  try: Device["CL"]
  except RuntimeError as e: pytest.skip(str(e))

def fake_pyopencl(*devices: tuple[str, str | None]):
  "Just enough of pyopencl for CLDevice to choose: one platform per (device name, build error or None)."
  class BuildError(Exception): pass
  def build(ctx):
    dev = ctx.devices[0]
    if dev.error is not None: raise BuildError(f"Build on {dev.name}:\n\nerror: {dev.error}")
  def platform(name, error):
    dev = SimpleNamespace(name=name, driver_version="9.9", error=error,
                          platform=SimpleNamespace(name="FakeCL"))
    return SimpleNamespace(get_devices=lambda: [dev])
  return SimpleNamespace(RuntimeError=BuildError, get_platforms=lambda: [platform(*d) for d in devices],
                         Context=lambda devs: SimpleNamespace(devices=devs), CommandQueue=lambda ctx: None,
                         Program=lambda ctx, src: SimpleNamespace(build=lambda: build(ctx)))

def test_cl_opens_first_device_that_builds(monkeypatch):
  # PyPI's PoCL 3.0 and Debian's can both be installed; the loader may list the one that can't build first
  cl = fake_pyopencl(("old-pocl", "unknown target CPU 'generic'"), ("new-pocl", None))
  monkeypatch.setitem(sys.modules, "pyopencl", cl)
  assert CLDevice("CL").ctx.devices[0].name == "new-pocl"

def test_cl_refusal_names_every_device(monkeypatch):
  cl = fake_pyopencl(("old-pocl", "unknown target CPU 'generic'"), ("other", "boom"))
  monkeypatch.setitem(sys.modules, "pyopencl", cl)
  with pytest.raises(RuntimeError) as e: CLDevice("CL")
  msg = str(e.value)
  assert "FakeCL 9.9, 'old-pocl': error: unknown target CPU 'generic'" in msg, msg
  assert "FakeCL 9.9, 'other': error: boom" in msg, msg
  assert "pocl-opencl-icd" in msg, msg

CASES = {
  "add_broadcast": ([(4, 3), (3,)], lambda a, b: a + b, None),
  "mul_div": ([(4, 3), (4, 3)], lambda a, b: a * b / (b.abs() + 1), None),
  "exp_log_sqrt": ([(3, 5)], lambda x: x.exp() + (x.abs() + 0.1).log() + (x.abs() + 0.1).sqrt(), None),
  "sin_sigmoid": ([(3, 5)], lambda x: x.sin() * x.sigmoid(), None),
  "relu_where_max": ([(4, 3), (4, 3)], lambda a, b: torch.where(a > b, a.relu(), torch.maximum(a, b)),
                     lambda a, b: (a > b).where(a.relu(), a.maximum(b))),
  "sum_axes": ([(3, 4, 5)], lambda x: x.sum((0, 2)), None),
  "max_softmax": ([(3, 4)], lambda x: x.softmax(-1) + x.amax(0), lambda x: x.softmax(-1) + x.max(0)),
  "matmul": ([(3, 4), (4, 5)], lambda a, b: a @ b, None),
  "views": ([(2, 3, 4)], lambda x: torch.nn.functional.pad(x.permute(2, 0, 1).flip(1), (1, 0)).exp().sum(0),
            lambda x: x.permute(2, 0, 1).flip(1).pad(((0, 0), (0, 0), (1, 0))).exp().sum(0)),
  "conv2d": ([(1, 2, 5, 5), (3, 2, 3, 3)], lambda x, w: torch.nn.functional.conv2d(x, w, padding=1), lambda x, w: x.conv2d(w, padding=1)),
}

@pytest.mark.usefixtures("cl_device")
@pytest.mark.parametrize("name", list(CASES))
def test_cl_matches_torch(name):
  shapes, tfxn, lfxn = CASES[name]
  check_op("CL", shapes, tfxn, lfxn, atol=1e-4)

@pytest.mark.usefixtures("cl_device")
def test_cl_dtypes_and_copies():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor(x, device="CL")
  np.testing.assert_array_equal((t > 5).numpy(), x > 5)
  np.testing.assert_array_equal((t.cast("uint8") + 250).numpy(), (x.astype(np.uint8) + 250).astype(np.uint8))
  np.testing.assert_allclose(t.double().exp().numpy(), np.exp(x.astype(np.float64)))
  assert t.cast("int64").sum().item() == 66
  np.testing.assert_array_equal(t.to("CPU").numpy(), x)
  np.testing.assert_array_equal(Tensor(x).to("CL").numpy(), x)
  with pytest.raises(RuntimeError, match="has no half precision|OpenCL"): (t.half() + 1).numpy()
