"""Speed of tinylit against numpy on the same machine, in one run.

Ratios measured in one process, back to back, are what to compare: absolute times on a shared 2-core
machine swing by 30-50% between runs (see ../shared/notes/peers.md). Each case reports the median of
several timed repeats after a warm-up (which also compiles tinylit's kernels, cached on disk after that).
"tinylit/numpy" is tinylit's time over numpy's: below 1, tinylit is faster.

  python benchmarks/bench.py            # all cases
  python benchmarks/bench.py --quick    # smaller sizes, a few seconds
"""
import argparse, os, platform, statistics, subprocess, sys, tempfile, textwrap, time
import numpy as np
from tinylit import Tensor, TinyJit, nn
from tinylit.lazy import lazycache

def timeit(fn, repeat: int) -> float:
  fn()  # warm-up: compile, allocate
  times = []
  for _ in range(repeat):
    st = time.perf_counter(); fn(); times.append(time.perf_counter() - st)
  return statistics.median(times)

def fresh(fn):
  "The lazy graph dedups: the same expression on the same inputs would return the result already computed."
  return lambda: (lazycache.clear(), fn())

def cpu_name() -> str:
  try: return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
  except (OSError, StopIteration): return platform.processor() or platform.machine()

def row(name: str, t_np: float, t_tl: float, note: str = "") -> None:
  print(f"{name:46s} {t_np * 1e3:9.3f}ms {t_tl * 1e3:9.3f}ms {t_tl / t_np:13.2f}x  {note}", flush=True)

def elementwise_and_reduces(quick: bool, repeat: int) -> None:
  n = 1 << (20 if quick else 24)
  a, b, c = (np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(3))
  ta, tb, tc = Tensor(a).realize(), Tensor(b).realize(), Tensor(c).realize()
  row(f"relu(a*b+c)*2-a, {n:,} floats", timeit(lambda: np.maximum(a * b + c, 0) * 2 - a, repeat),
      timeit(fresh(lambda: (((ta * tb + tc).relu() * 2) - ta).realize()), repeat))
  exact = a.astype(np.float64).sum()
  err_tl, err_np = abs(float(ta.sum().numpy()) - exact), abs(float(a.sum()) - exact)
  row(f"sum of {n:,} floats", timeit(lambda: a.sum(), repeat), timeit(fresh(lambda: ta.sum().realize()), repeat),
      f"error vs float64: tinylit {err_tl:.2g}, numpy {err_np:.2g}")
  m = 1024 if quick else 4096
  M = np.random.default_rng(4).standard_normal((m, m)).astype(np.float32)
  tM = Tensor(M).realize()
  for axis in (0, 1):
    row(f"({m},{m}) sum over axis {axis}", timeit(lambda axis=axis: M.sum(axis), repeat),
        timeit(fresh(lambda axis=axis: tM.sum(axis).realize()), repeat))

def matmuls(quick: bool, repeat: int) -> None:
  for k in ([128, 256] if quick else [256, 512, 1024, 2048]):
    A, B = (np.random.default_rng(5 + i).standard_normal((k, k)).astype(np.float32) for i in range(2))
    tA, tB = Tensor(A).realize(), Tensor(B).realize()
    t_np, t_tl = timeit(lambda A=A, B=B: A @ B, repeat), timeit(fresh(lambda tA=tA, tB=tB: (tA @ tB).realize()), repeat)
    row(f"matmul {k}x{k}", t_np, t_tl, f"tinylit {2 * k**3 / t_tl / 1e9:.1f} GFLOPS, numpy {2 * k**3 / t_np / 1e9:.1f}")

def overhead_and_models(quick: bool, repeat: int) -> None:
  x4, y4 = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
  t4, u4 = Tensor(x4).realize(), Tensor(y4).realize()
  row("4x4 add (per-call overhead)", timeit(lambda: x4 + y4, repeat), timeit(fresh(lambda: (t4 + u4).realize()), repeat))
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
  tX = Tensor(X).realize()
  t_np = timeit(np_mlp, repeat)
  row("MLP 784-128-64-10 forward, batch 64", t_np, timeit(fresh(lambda: mlp(tX).realize()), repeat))
  row("  the same under TinyJit", t_np, timeit(lambda: jit_mlp(tX), repeat))
  train_step(repeat)

def mlp_train_step(device: str | None = None):
  "The MLP 784-256-10 with SGD (seed 0, on `device`): its parameters, and one training step `step(x, y) -> loss`."
  Tensor.manual_seed(0)
  l1, l2 = nn.Linear(784, 256), nn.Linear(256, 10)
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  for p in params: p.to_(device).realize()
  opt = nn.optim.SGD(params, lr=0.01)
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
    return loss.realize()
  return params, step

def train_step(repeat: int) -> None:
  "One SGD step of a 784-256-10 MLP, batch 128, under TinyJit, against the same step written by hand in numpy."
  rng = np.random.default_rng(0)
  X, Y = rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, 128)
  params, step = mlp_train_step()
  step = TinyJit(step)
  tx, ty = Tensor(X).realize(), Tensor(Y.astype(np.int32)).realize()
  W1, b1, W2, b2 = (p.numpy() for p in params)
  def np_step():
    nonlocal W1, b1, W2, b2
    h = X @ W1.T + b1; a = np.maximum(h, 0); z = a @ W2.T + b2
    z = z - z.max(1, keepdims=True); p = np.exp(z); p /= p.sum(1, keepdims=True)
    g = p; g[np.arange(len(Y)), Y] -= 1; g /= len(Y)
    gW2, gb2, ga = g.T @ a, g.sum(0), g @ W2
    ga[h <= 0] = 0
    gW1, gb1 = ga.T @ X, ga.sum(0)
    W1 -= 0.01 * gW1; b1 -= 0.01 * gb1; W2 -= 0.01 * gW2; b2 -= 0.01 * gb2
  for _ in range(3): step(tx, ty)
  row("train MLP 784-256-10, SGD, batch 128, TinyJit", timeit(np_step, repeat * 4), timeit(lambda: step(tx, ty), repeat * 4),
      f"{len(step.jit_cache)} kernels; numpy's step written by hand")

BEAM_SCRIPT = textwrap.dedent("""
  import time, numpy as np
  from tinylit import Tensor
  A, B = (Tensor(np.random.default_rng(i).standard_normal((512, 512)).astype(np.float32)).realize() for i in range(2))
  st = time.perf_counter(); (A @ B).realize(); print(time.perf_counter() - st)
""")

def beam(quick: bool) -> None:
  "BEAM=2 on a 512 matmul in a fresh compile cache: the search, then a second process that finds the winner on disk."
  if quick: return
  with tempfile.TemporaryDirectory() as cache:
    env = {**os.environ, "BEAM": "2", "TINYLIT_CACHE": cache}
    first, second = (float(subprocess.run([sys.executable, "-c", BEAM_SCRIPT], env=env, capture_output=True, text=True,
                                           check=True).stdout.split()[-1]) for _ in range(2))
  print(f"{'BEAM=2 matmul 512: search, then a second run':46s} {first:9.1f}s  {second * 1e3:9.1f}ms (the second run: disk cache)")

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--repeat", type=int, default=5)
  args = ap.parse_args()
  print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; numpy {np.__version__}")
  print(f"{'case':46s} {'numpy':>11s} {'tinylit':>11s} {'tinylit/numpy':>14s}")
  elementwise_and_reduces(args.quick, args.repeat)
  matmuls(args.quick, args.repeat)
  overhead_and_models(args.quick, args.repeat)
  beam(args.quick)

if __name__ == "__main__": main()
