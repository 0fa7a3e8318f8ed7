"""One answer on every path: casts of NaN, infinities and out-of-range floats to ints (the same on every device and in
constant folding), a compile-cache entry that belongs to another kernel (recompiled, never run), and BEAM on a
symbolic shape (timed through the launch a real run uses, with the variables' values). Every test runs on every
device tinylit has; a device this machine can't open is skipped, saying why."""
import shutil

import numpy as np
import pytest

from tinylit import Tensor
from tinylit.device import Device
from tinylit.helpers import Context
from tinylit.ops import Variable
from tinylit.realize import CompiledRunner, get_program
from devices import DEVICES


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
