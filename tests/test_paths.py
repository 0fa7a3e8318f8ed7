"""One answer on every path: casts of NaN, infinities and out-of-range floats to ints (the same on every device and in
constant folding), a compile-cache entry that belongs to another kernel (recompiled, never run), and BEAM on a
symbolic shape (timed through the launch a real run uses, with the variables' values). Every test runs on every
device tinylit has; a device this machine can't open is skipped, saying why."""
import shutil

import numpy as np
import pytest

from tinylit import Tensor
from tinylit.device import Device
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
