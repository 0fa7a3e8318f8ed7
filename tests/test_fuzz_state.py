"""The stateful fuzzer (tests/fuzz_state.py) on every device: random writes through random views, checked against a
torch reference of memory after every write. FUZZ_STATE_N=<programs per device> (default 150 on PYTHON, 100 on CPU,
30 on CL, whose compiles are slow; 2,000 at
the desk),
FUZZ_SEED=<seed> (default 0). A failure prints a standalone repro; the index families the programs drew are printed
too, and one never drawn fails the test (a fuzzer that never draws a stepped slice can't find its bugs)."""
import os
from collections import Counter

import pytest
from devices import DEVICES

pytest.importorskip("torch")
import fuzz_state

DEFAULT_N = {"PYTHON": 150, "CPU": 100, "CL": 30}
SEED = int(os.getenv("FUZZ_SEED", "0"))


@pytest.mark.parametrize("device", DEVICES)
def test_fuzz_state(device):
  n = int(os.getenv("FUZZ_STATE_N") or DEFAULT_N.get(device, 100))
  kinds = Counter()
  fails = fuzz_state.fuzz(device, SEED, 0, n, kinds)
  print("index families drawn:", ", ".join(f"{k} {kinds[k]}" for k in fuzz_state.INDEX_KINDS))
  if fails: pytest.fail(f"{len(fails)} of {n} programs failed on {device} (FUZZ_SEED={SEED}):\n\n" + "\n\n".join(fails[:3]), pytrace=False)
  assert not (never := [k for k in fuzz_state.INDEX_KINDS if not kinds[k]]), f"{n} programs never drew {never}"
