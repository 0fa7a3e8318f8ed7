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
from devices import DEVICES
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


@pytest.mark.parametrize("device", DEVICES)
def test_reference_lets_a_sum_fuse_an_overflowing_product(device):
  """A sum may fuse its products into its adds (one FMA each): a product that rounds to inf is then kept finite, so
  `[-inf, 3e38] @ [1, 3]` is -inf with an FMA and nan without. The reference leaves that sum open, whatever it is
  then fed into, and still checks the same product stored on its own (inf) and an ordinary matmul row exactly."""
  import numpy as np
  from tinylit import Tensor
  a, b = np.array([[-np.inf, 3e38], [2.0, 3.0]], np.float32), np.array([1.0, 3.0], np.float32)
  dot = fuzz.r_matmul(fuzz.RefVal(a), fuzz.RefVal(b))
  assert np.isinf(dot.e[0]) and dot.e[1] == 0 and dot.v[1] == 11.0
  assert np.isinf(fuzz.r_unary("sigmoid", dot).e[0])   # don't care stays so, though nan in, nan out
  prod = fuzz.r_arith("mul", fuzz.RefVal(a[0]), fuzz.RefVal(b))
  assert prod.v[1] == np.inf and prod.e[1] == 0
  got_dot = (Tensor(a, device=device) @ Tensor(b, device=device)).numpy()
  got_prod = (Tensor(a[0], device=device) * Tensor(b, device=device)).numpy()
  assert (np.isnan(got_dot[0]) or got_dot[0] == -np.inf) and got_dot[1] == 11.0
  assert got_prod[1] == np.inf
