"""The differential fuzzer (tests/fuzz.py) on every device tinylit has: random tensor programs checked against
numpy (values and dtypes) and torch (gradients). Each device's programs are split into chunks, one pytest item
each; every chunk runs in a child process, so a crash is reported as a failure of that program.

Environment: FUZZ_N=<programs per device> (default: 240 on CPU, 320 on PYTHON, 80 on CL, whose PoCL compiles take
~1 s per program), FUZZ_SEED=<seed> (default 0), FUZZ_MINIMIZE=<distinct failures to shrink per chunk> (default 2).
A failure prints a standalone repro; at the desk,
`python tests/fuzz.py --device CPU -n 2000 --seed 7` runs a long batch, and `python tests/fuzz_triage.py ...`
also minimizes every failure and sorts them into the known classes."""
import os

import pytest

pytest.importorskip("torch")
import fuzz
from tinylit.device import Device

DEFAULT_N = {"CL": 80, "PYTHON": 320}
SEED = int(os.getenv("FUZZ_SEED", "0"))
CHUNK = 80


def _devices() -> list[str]:
  "Every device class tinylit's runtime defines (CUDA is picked up once it exists); those that can't open skip."
  return list(Device._devices)


def _chunks():
  for dev in _devices():
    n = int(os.getenv("FUZZ_N") or DEFAULT_N.get(dev, 240))
    for start in range(0, n, CHUNK): yield pytest.param(dev, start, min(start + CHUNK, n), id=f"{dev}-{start}")


@pytest.mark.parametrize("device,start,stop", list(_chunks()))
def test_fuzz(device, start, stop):
  out = fuzz.fuzz(device, SEED, start, stop, max_minimize=int(os.getenv("FUZZ_MINIMIZE", "2")), minimize_budget_s=10)
  if "unavailable" in out: pytest.skip(f"{device} is unavailable: {out['unavailable']}")
  fails = sorted(out["failures"], key=lambda f: -f.count)
  if fails:
    head = (f"{sum(f.count for f in fails)} of {out['ran']} programs failed on {device} (FUZZ_SEED={SEED}, "
            f"programs {start}..{stop - 1}), {len(fails)} distinct:")
    pytest.fail("\n\n".join([head, *out["notes"], *[f.report() for f in fails]]), pytrace=False)
