"""The sanitizer job: CPU kernels built with AddressSanitizer and UndefinedBehaviorSanitizer (`CPU_SANITIZE=1`,
its own compile-cache key), run by a Python that has gcc's libasan preloaded. A child process runs a part of the
CPU op suite and a batch of fuzz programs that way; any sanitizer report (an out-of-bounds read or write, signed
overflow, a division trap, a shift out of range...) aborts it, and the report is printed here.

SANITIZE_FUZZ_N=<programs> changes the size of the fuzz batch (default 40); FUZZ_SEED its seed."""
import os, re, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the CPU op tests on contiguous and sliced inputs (permuted/flipped views add time, not new kinds of code)
SUBSET = "CPU and not permuted and not flipped"
REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer")


def _libasan() -> str | None:
  "gcc's libasan.so, or None where gcc or its sanitizer runtime is missing."
  try: path = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=30).stdout.strip()
  except (OSError, subprocess.SubprocessError): return None
  return path if os.path.isabs(path) and os.path.exists(path) else None


LIBASAN = _libasan()
pytestmark = pytest.mark.skipif(LIBASAN is None, reason="gcc's libasan.so is not installed (gcc -print-file-name=libasan.so)")


def run_sanitized(args: list[str], timeout: float) -> subprocess.CompletedProcess:
  env = {**os.environ, "CPU_SANITIZE": "1", "TEST_DEVICES": "CPU,PYTHON", "LD_PRELOAD": LIBASAN or "",
         "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:print_summary=1",
         "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1", "PYTHONFAULTHANDLER": "1"}
  env.pop("PYTEST_XDIST_WORKER", None)
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
  out = proc.stdout + proc.stderr
  m = REPORT.search(out)
  if m is not None or proc.returncode != 0:
    start = max(0, (m.start() if m else len(out)) - 4000)
    pytest.fail(f"{what} under ASan+UBSan: exit code {proc.returncode}"
                f"{', sanitizer report:' if m else ''}\n{out[start:start + 12000]}", pytrace=False)


def test_sanitized_op_suite():
  "The CPU op tests of tests/test_ops.py (every op, forwards and backwards) with sanitized kernels."
  proc = run_sanitized(["-m", "pytest", "tests/test_ops.py", "-k", SUBSET, "-q", "-x", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "-p", "no:randomly"], timeout=900)
  _check(proc, f"tests/test_ops.py -k {SUBSET!r}")


def test_sanitized_fuzz():
  "A batch of fuzz programs on CPU with sanitized kernels; only crashes and sanitizer reports count here."
  n = os.getenv("SANITIZE_FUZZ_N", "40")
  proc = run_sanitized(["tests/fuzz.py", "--device", "CPU", "-n", n, "--seed", os.getenv("FUZZ_SEED", "0"),
                        "--crashes-only", "--minimize", "3", "--minimize-budget", "20"], timeout=900)
  _check(proc, f"{n} fuzz programs on CPU")
