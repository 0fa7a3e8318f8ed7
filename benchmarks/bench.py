"""Speed of tinylit against numpy (and torch, if installed) on the same machine, in one run.

Ratios measured in one process, back to back, are what to compare: absolute times on a shared 2-core
machine swing by 30-50% between runs (see ../shared/notes/peers.md). Each case reports the median of
several timed repeats after a warm-up (which also compiles tinylit's kernels, cached on disk after that).

  python benchmarks/bench.py            # all cases
  python benchmarks/bench.py --quick    # smaller sizes, a few seconds
"""
import argparse, statistics, time
import numpy as np
from tinylit import Tensor, TinyJit, nn
from tinylit.lazy import lazycache

def timeit(fn, repeat: int) -> float:
  fn()  # warm-up: compile, allocate
  times = []
  for _ in range(repeat):
    st = time.perf_counter(); fn(); times.append(time.perf_counter() - st)
  return statistics.median(times)

def cases(quick: bool):
  n = 1 << (20 if quick else 24)
  a, b, c = (np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(3))
  ta, tb, tc = Tensor(a), Tensor(b), Tensor(c)
  yield (f"relu(a*b+c)*2-a, {n:,} floats", lambda: np.maximum(a * b + c, 0) * 2 - a,
         lambda: (((ta * tb + tc).relu() * 2) - ta).realize())
  yield f"sum of {n:,} floats", lambda: a.sum(), lambda: ta.sum().realize()
  m = 1024 if quick else 4096
  M = np.random.default_rng(4).standard_normal((m, m)).astype(np.float32); tM = Tensor(M)
  yield f"({m},{m}) sum over axis 0", lambda: M.sum(0), lambda: tM.sum(0).realize()
  for k in ([128, 256] if quick else [128, 256, 512]):
    A, B = (np.random.default_rng(5 + i).standard_normal((k, k)).astype(np.float32) for i in range(2))
    tA, tB = Tensor(A), Tensor(B)
    yield f"matmul {k}x{k}", lambda A=A, B=B: A @ B, lambda tA=tA, tB=tB: (tA @ tB).realize()
  x4, y4 = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
  t4, u4 = Tensor(x4), Tensor(y4)
  yield "4x4 add (per-call overhead)", lambda: x4 + y4, lambda: (t4 + u4).realize()
  Tensor.manual_seed(0)
  l1, l2, l3 = nn.Linear(784, 128), nn.Linear(128, 64), nn.Linear(64, 10)
  X = np.random.default_rng(6).standard_normal((64, 784)).astype(np.float32)
  W = [(l.weight.numpy().T, l.bias.numpy()) for l in (l1, l2, l3)]
  def np_mlp():
    h = X
    for i, (w, bias) in enumerate(W): h = h @ w + bias if i == 2 else np.maximum(h @ w + bias, 0)
    return h
  mlp = lambda x: l3(l2(l1(x).relu()).relu())
  jit_mlp = TinyJit(lambda x: mlp(x).realize())
  tX = Tensor(X)
  yield "MLP 784-128-64-10 forward, batch 64", np_mlp, lambda: mlp(tX).realize()
  yield "  the same under TinyJit", np_mlp, lambda: jit_mlp(tX)

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--repeat", type=int, default=5)
  args = ap.parse_args()
  print(f"{'case':40s} {'numpy':>10s} {'tinylit':>10s} {'tinylit/numpy':>14s}")
  for name, np_fn, tl_fn in cases(args.quick):
    # the lazy graph dedups: the same expression on the same inputs would return the already computed result
    fresh = lambda tl_fn=tl_fn: (lazycache.clear(), tl_fn())
    t_np, t_tl = timeit(np_fn, args.repeat), timeit(fresh, args.repeat)
    print(f"{name:40s} {t_np * 1e3:8.2f}ms {t_tl * 1e3:8.2f}ms {t_tl / t_np:13.1f}x")

if __name__ == "__main__": main()
