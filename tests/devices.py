"""The devices a device-parametrized test runs on: every device tinylit has (one module per device in
tinylit/runtime/), each skipped, with the reason, where this machine can't open it (no OpenCL platform, no NVIDIA
GPU or driver). `pytest` on a GPU machine therefore runs every such test on CUDA too.

TEST_DEVICES=CPU,PYTHON limits a run to those devices (the others are skipped, saying so, and never opened): the
sanitizer job uses it, since PoCL's OpenCL runtime can't load under AddressSanitizer."""
import functools, os

import pytest

from tinylit.device import Device


@functools.cache
def unavailable(name: str) -> str | None:
  "Why this machine can't open the device, or None if it can."
  if (only := os.getenv("TEST_DEVICES")) and name not in only.split(","): return f"{name} left out: TEST_DEVICES={only}"
  try: Device[name]
  except Exception as e: return f"{name} unavailable here: {e}"
  return None


@functools.cache
def has_half(name: str) -> bool:
  "Can this device compute in float16? (PoCL's CPU device can't: it lacks cl_khr_fp16.)"
  import numpy as np
  from tinylit import Tensor
  try: return bool((Tensor(np.ones(4, np.float16), device=name) + 1).numpy()[0] == 2)
  except RuntimeError: return False


def skip_without_half(name: str) -> None:
  "Skip the calling test, saying why, on a device without float16."
  if not has_half(name): pytest.skip(f"{name} has no float16 on this machine")


def devices(*names: str) -> list:
  "pytest parameters for these devices (default: all of tinylit's); each one that can't open is skipped."
  return [pytest.param(n, marks=pytest.mark.skip(reason=why)) if (why := unavailable(n)) else n
          for n in (names or Device._devices)]


DEVICES = devices()
