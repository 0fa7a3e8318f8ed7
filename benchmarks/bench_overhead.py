"""Python overhead of running small kernels (issue 17, "Less overhead"): what it costs to realize a 4x4 add whose
kernel is already compiled, and what a TinyJit replay costs per kernel, with numpy and torch doing the same add in
the same run. The bars: realize <= 15 us, JIT replay <= 5 us per kernel.

  python benchmarks/bench_overhead.py            # CPU
  python benchmarks/bench_overhead.py --device PYTHON

Each figure is the best of several rounds of wall-clock time per call (time.perf_counter_ns). On a shared machine
the load changes them: the load average is printed first, and before/after comparisons belong in one run.
"""
import argparse, os, time

import numpy as np

from tinylit import Tensor, TinyJit


def per_call_us(fn, calls: int, rounds: int = 7) -> float:
  "The best, over `rounds`, of the mean wall time of one call to `fn`, in microseconds."
  for _ in range(min(calls, 50)): fn()
  best = float("inf")
  for _ in range(rounds):
    start = time.perf_counter_ns()
    for _ in range(calls): fn()
    best = min(best, (time.perf_counter_ns() - start) / calls / 1e3)
  return best


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--device", default="CPU")
  parser.add_argument("--calls", type=int, default=2000)
  args = parser.parse_args()
  print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, device {args.device}")

  a, b = (Tensor.ones(4, 4, device=args.device).contiguous().realize() for _ in range(2))
  build = per_call_us(lambda: a + b, args.calls)
  total = per_call_us(lambda: (a + b).realize(), args.calls)
  kernels = 10
  @TinyJit
  def chain(x: Tensor) -> Tensor:
    for _ in range(kernels): x = (x + 1).contiguous()
    return x
  x = Tensor.ones(4, 4, device=args.device).contiguous().realize()
  replay = per_call_us(lambda: chain(x), max(args.calls // kernels, 20)) / kernels

  an, bn = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
  rows = [("tinylit (a + b).realize(), 4x4", total), ("  of which building a + b", build),
          ("  of which realize", total - build), ("tinylit TinyJit replay, per kernel", replay),
          ("numpy a + b, 4x4", per_call_us(lambda: an + bn, args.calls * 10))]
  try:
    import torch
    at, bt = torch.ones(4, 4), torch.ones(4, 4)
    rows.append(("torch a + b, 4x4 (eager, CPU)", per_call_us(lambda: at + bt, args.calls * 10)))
  except ImportError: rows.append(("torch a + b, 4x4", float("nan")))
  for name, us in rows: print(f"{name:38s} {us:8.2f} us")


if __name__ == "__main__": main()
