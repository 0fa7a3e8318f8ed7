"""Speed of tinylit against numpy and torch on the same machine, in one run, and against the machine's own peak.

Each framework runs in a process of its own, one after the other (their thread pools would fight for the cores
otherwise), and every reference at its best: the processes start without `OPENBLAS_CORETYPE` and
`OPENBLAS_L2_SIZE`, which some machines set and which pin numpy's OpenBLAS to a slower kernel (the header prints the
BLAS each one used, from threadpoolctl). torch is a column where it is installed. The CPU's peak is measured first:
a generated C kernel of independent fused multiply-adds at the widest vector width the CPU has, compiled by
tinylit's CPU compiler and run on every core; every GFLOPS figure is also given as % of that peak.

Ratios measured in one run are what to compare: absolute times on a shared machine swing by 30-50% between runs
(see ../shared/notes/peers.md). Each case reports the median of several timed repeats after a warm-up (which also
compiles tinylit's kernels, cached on disk after that). "tinylit/numpy" is tinylit's time over numpy's: below 1,
tinylit is faster.

  python benchmarks/bench.py            # all cases
  python benchmarks/bench.py --quick    # smaller sizes, a few seconds
  python benchmarks/bench.py --widths 8 16   # and tinylit with 8- and with 16-float CPU vectors (chapter 8a)
"""
import argparse, importlib.util, json, os, platform, statistics, subprocess, sys, tempfile, textwrap, time
import numpy as np

# environment variables that make a reference slower than it can be: never passed to a benchmark's processes
HANDICAPS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

def timeit(fn, repeat: int, min_seconds: float = 0.05) -> float:
  """The median of single timed calls after a warm-up: at least `repeat` of them, and at least `min_seconds` of them.
  A case of microseconds thus gets hundreds of calls: with five, the first calls after the warm-up (caches cold from
  the case before, a thread pool's workers asleep) were the median, and a 256 matmul read 248 us that runs in 175."""
  fn()  # warm-up: compile, allocate
  times: list[float] = []
  while len(times) < repeat or sum(times) < min_seconds:
    st = time.perf_counter(); fn(); times.append(time.perf_counter() - st)
  return statistics.median(times)

def cpu_name() -> str:
  try: return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
  except (OSError, StopIteration): return platform.processor() or platform.machine()

# ---- the cases: name -> (FLOPs or None, the same work in each framework's own worker below)

def sizes(quick: bool) -> dict:
  return {"n": 1 << (20 if quick else 24), "m": 1024 if quick else 4096, "mm": [128, 256] if quick else [256, 512, 1024, 2048]}

def case_flops(quick: bool) -> dict[str, float | None]:
  "Every case's name, in the order printed, with the floating-point operations it does (None: not arithmetic)."
  s = sizes(quick)
  n, m = s["n"], s["m"]
  mlp_fwd = 2 * 64 * (784 * 128 + 128 * 64 + 64 * 10)
  return {f"relu(a*b+c)*2-a, {n:,} floats": 5 * n, f"sum of {n:,} floats": n,
          f"({m},{m}) sum over axis 0": m * m, f"({m},{m}) sum over axis 1": m * m,
          f"cat of two ({m},{m // 2}) along axis 1": None,
          **{f"matmul {k}x{k}": 2 * k**3 for k in s["mm"]},
          "4x4 add, per realize (kernel cached)": None, "  the same under TinyJit": None,
          "MLP 784-128-64-10 forward, batch 64": mlp_fwd, "  the same under TinyJit ": mlp_fwd,
          # forward, and the backward's two matmuls per layer: three times the forward's multiply-adds
          "train MLP 784-256-10, SGD, batch 128": 3 * 2 * 128 * (784 * 256 + 256 * 10)}

def inputs(quick: bool) -> dict:
  "The same data for every framework, as numpy arrays."
  s, rng = sizes(quick), np.random.default_rng
  data = {"abc": [rng(i).standard_normal(s["n"]).astype(np.float32) for i in range(3)],
          "M": rng(4).standard_normal((s["m"], s["m"])).astype(np.float32),
          "halves": [rng(8 + i).standard_normal((s["m"], s["m"] // 2)).astype(np.float32) for i in range(2)],
          "mm": {k: [rng(5 + i).standard_normal((k, k)).astype(np.float32) for i in range(2)] for k in s["mm"]},
          "X": rng(6).standard_normal((64, 784)).astype(np.float32)}
  rng0 = rng(0)
  data["train"] = rng0.standard_normal((128, 784)).astype(np.float32), rng0.integers(0, 10, 128)
  return data

def mlp_weights() -> list[tuple[np.ndarray, np.ndarray]]:
  """The forward MLP's (weight (out, in), bias) per layer, initialised like torch's Linear, in float32. (Divided after
  the cast, numpy 2 promoted them to float64: np.sqrt(i) is a float64 scalar. numpy and tinylit then ran the forward
  in float64, torch, which copies them into its float32 Linear, in float32.)"""
  rng = np.random.default_rng(7)
  return [((rng.uniform(-1, 1, (o, i)) / np.sqrt(i)).astype(np.float32), (rng.uniform(-1, 1, o) / np.sqrt(i)).astype(np.float32))
          for i, o in ((784, 128), (128, 64), (64, 10))]

def numpy_worker(quick: bool, repeat: int) -> dict:
  names, d = list(case_flops(quick)), inputs(quick)
  a, b, c = d["abc"]
  M = d["M"]
  out = {names[0]: timeit(lambda: np.maximum(a * b + c, 0) * 2 - a, repeat), names[1]: timeit(lambda: a.sum(), repeat),
         names[2]: timeit(lambda: M.sum(0), repeat), names[3]: timeit(lambda: M.sum(1), repeat),
         names[4]: timeit(lambda: np.concatenate(d["halves"], 1), repeat)}
  for k, (A, B) in d["mm"].items(): out[f"matmul {k}x{k}"] = timeit(lambda A=A, B=B: A @ B, repeat)
  x4, y4 = np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)
  out["4x4 add, per realize (kernel cached)"] = timeit(lambda: x4 + y4, repeat)
  X, W = d["X"], [(w.T.copy(), bias) for w, bias in mlp_weights()]
  def mlp():
    h = X
    for i, (w, bias) in enumerate(W): h = h @ w + bias if i == 2 else np.maximum(h @ w + bias, 0)
    return h
  out["MLP 784-128-64-10 forward, batch 64"] = out["  the same under TinyJit "] = timeit(mlp, repeat)
  Xt, Y = d["train"]
  rng = np.random.default_rng(0)
  W1, b1 = rng.uniform(-1, 1, (256, 784)).astype(np.float32) / 28, np.zeros(256, np.float32)
  W2, b2 = rng.uniform(-1, 1, (10, 256)).astype(np.float32) / 16, np.zeros(10, np.float32)
  def step():
    nonlocal W1, b1, W2, b2
    h = Xt @ W1.T + b1; act = np.maximum(h, 0); z = act @ W2.T + b2
    z = z - z.max(1, keepdims=True); p = np.exp(z); p /= p.sum(1, keepdims=True)
    g = p; g[np.arange(len(Y)), Y] -= 1; g /= len(Y)
    gW2, gb2, ga = g.T @ act, g.sum(0), g @ W2
    ga[h <= 0] = 0
    gW1, gb1 = ga.T @ Xt, ga.sum(0)
    W1 -= 0.01 * gW1; b1 -= 0.01 * gb1; W2 -= 0.01 * gW2; b2 -= 0.01 * gb2
  out["train MLP 784-256-10, SGD, batch 128"] = timeit(step, repeat * 4)
  exact = a.astype(np.float64).sum()
  return {"times": out, "notes": {names[1]: f"error vs float64: numpy {abs(float(a.sum()) - exact):.2g}",
                                  "train MLP 784-256-10, SGD, batch 128": "numpy: backprop written by hand"},
          "info": f"numpy {np.__version__}"}

def torch_worker(quick: bool, repeat: int) -> dict:
  import torch
  names, d = list(case_flops(quick)), inputs(quick)
  a, b, c = (torch.from_numpy(x) for x in d["abc"])
  M = torch.from_numpy(d["M"])
  out = {names[0]: timeit(lambda: torch.relu(a * b + c) * 2 - a, repeat), names[1]: timeit(lambda: a.sum(), repeat),
         names[2]: timeit(lambda: M.sum(0), repeat), names[3]: timeit(lambda: M.sum(1), repeat)}
  halves = [torch.from_numpy(h) for h in d["halves"]]
  out[names[4]] = timeit(lambda: torch.cat(halves, 1), repeat)
  for k, (A, B) in d["mm"].items():
    tA, tB = torch.from_numpy(A), torch.from_numpy(B)
    out[f"matmul {k}x{k}"] = timeit(lambda tA=tA, tB=tB: tA @ tB, repeat)
  x4, y4 = torch.ones(4, 4), torch.ones(4, 4)
  out["4x4 add, per realize (kernel cached)"] = timeit(lambda: x4 + y4, repeat)
  layers = []
  for w, bias in mlp_weights():
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad(): lin.weight.copy_(torch.from_numpy(w)); lin.bias.copy_(torch.from_numpy(bias))
    layers.append(lin)
  model, X = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(), layers[2]), torch.from_numpy(d["X"])
  with torch.no_grad(): out["MLP 784-128-64-10 forward, batch 64"] = out["  the same under TinyJit "] = timeit(lambda: model(X), repeat)
  torch.manual_seed(0)
  net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
  opt = torch.optim.SGD(net.parameters(), lr=0.01)
  Xt, Y = (torch.from_numpy(x) for x in d["train"])
  def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(Xt), Y)
    loss.backward(); opt.step()
    return loss
  out["train MLP 784-256-10, SGD, batch 128"] = timeit(step, repeat * 4)
  # torch links its BLAS in (threadpoolctl can't see it): its build settings name it
  blas = next((w.split("=", 1)[1].rstrip(",") for w in torch.__config__.show().split() if w.startswith("BLAS_INFO=")), "?")
  return {"times": out, "notes": {"train MLP 784-256-10, SGD, batch 128": "torch: eager"},
          "info": f"torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS {blas}, "
                  f"CPU capability {torch.backends.cpu.get_cpu_capability()}"}

def mlp_train_step(device: str | None = None):
  "The MLP 784-256-10 with SGD (seed 0, on `device`): its parameters, and one training step `step(x, y) -> loss`."
  from tinylit import Tensor, nn
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

def tinylit_worker(quick: bool, repeat: int, with_beam: bool = True) -> dict:
  from tinylit import Tensor, TinyJit
  from tinylit.lazy import lazycache
  def fresh(fn):
    "The lazy graph dedups: the same expression on the same inputs would return the result already computed."
    return lambda: (lazycache.clear(), fn())
  names, d = list(case_flops(quick)), inputs(quick)
  a, b, c = d["abc"]
  ta, tb, tc = Tensor(a).realize(), Tensor(b).realize(), Tensor(c).realize()
  tM = Tensor(d["M"]).realize()
  out = {names[0]: timeit(fresh(lambda: (((ta * tb + tc).relu() * 2) - ta).realize()), repeat),
         names[1]: timeit(fresh(lambda: ta.sum().realize()), repeat),
         names[2]: timeit(fresh(lambda: tM.sum(0).realize()), repeat), names[3]: timeit(fresh(lambda: tM.sum(1).realize()), repeat)}
  tP, tQ = (Tensor(h).realize() for h in d["halves"])
  out[names[4]] = timeit(fresh(lambda: tP.cat(tQ, dim=1).realize()), repeat)
  for k, (A, B) in d["mm"].items():
    tA, tB = Tensor(A).realize(), Tensor(B).realize()
    out[f"matmul {k}x{k}"] = timeit(fresh(lambda tA=tA, tB=tB: (tA @ tB).realize()), repeat)
  t4, u4 = Tensor(np.ones((4, 4), np.float32)).realize(), Tensor(np.ones((4, 4), np.float32)).realize()
  out["4x4 add, per realize (kernel cached)"] = timeit(fresh(lambda: (t4 + u4).realize()), repeat)
  jit_add = TinyJit(lambda x, y: (x + y).realize())
  out["  the same under TinyJit"] = timeit(lambda: jit_add(t4, u4), repeat)
  W = [(Tensor(w).realize(), Tensor(bias).realize()) for w, bias in mlp_weights()]
  def mlp(x):
    for i, (w, bias) in enumerate(W): x = x @ w.T + bias if i == 2 else (x @ w.T + bias).relu()
    return x
  jit_mlp, tX = TinyJit(lambda x: mlp(x).realize()), Tensor(d["X"]).realize()
  out["MLP 784-128-64-10 forward, batch 64"] = timeit(fresh(lambda: mlp(tX).realize()), repeat)
  out["  the same under TinyJit "] = timeit(lambda: jit_mlp(tX), repeat)
  _, step = mlp_train_step()
  step = TinyJit(step)
  Xt, Y = d["train"]
  tx, ty = Tensor(Xt).realize(), Tensor(Y.astype(np.int32)).realize()
  for _ in range(3): step(tx, ty)
  out["train MLP 784-256-10, SGD, batch 128"] = timeit(lambda: step(tx, ty), repeat * 4)
  exact = a.astype(np.float64).sum()
  from tinylit.device import Device
  return {"times": out, "notes": {names[1]: f"tinylit {abs(float(ta.sum().numpy()) - exact):.2g}",
                                  "train MLP 784-256-10, SGD, batch 128": f"tinylit: TinyJit, {len(step.jit_cache)} kernels"},
          "info": f"tinylit, CPU vectors of {Device['CPU'].vector_width} floats, {Device['CPU'].renderer.vector_registers} vector "
                  f"registers, L2 {Device['CPU'].renderer.l2_size >> 10} KiB", "beam": beam() if with_beam and not quick else None}

BEAM_SCRIPT = textwrap.dedent("""
  import time, numpy as np
  from tinylit import Tensor
  A, B = (Tensor(np.random.default_rng(i).standard_normal((512, 512)).astype(np.float32)).realize() for i in range(2))
  st = time.perf_counter(); (A @ B).realize(); print(time.perf_counter() - st)
""")

def beam() -> tuple[float, float]:
  "BEAM=2 on a 512 matmul in a fresh compile cache: the search, then a second process that finds the winner on disk."
  with tempfile.TemporaryDirectory() as cache:
    env = {**os.environ, "BEAM": "2", "TINYLIT_CACHE": cache}
    first, second = (float(subprocess.run([sys.executable, "-c", BEAM_SCRIPT], env=env, capture_output=True, text=True,
                                           check=True).stdout.split()[-1]) for _ in range(2))
  return first, second

def blas_info() -> list[str]:
  "Which BLAS (and which of its kernels) this process loaded, and with how many threads, from threadpoolctl."
  try: from threadpoolctl import threadpool_info
  except ImportError: return ["threadpoolctl is not installed: the BLAS kernel is unknown"]
  return [f"{p.get('internal_api')} {p.get('version')}, kernel {p.get('architecture')}, {p.get('num_threads')} threads"
          for p in threadpool_info() if p.get("user_api") == "blas"] or ["no BLAS loaded"]

WORKERS = {"numpy": numpy_worker, "torch": torch_worker, "tinylit": tinylit_worker}

def worker_main(name: str, quick: bool, repeat: int, with_beam: bool) -> None:
  res = tinylit_worker(quick, repeat, with_beam) if name == "tinylit" else WORKERS[name](quick, repeat)
  if name == "numpy": res["info"] += "; BLAS: " + "; ".join(blas_info())   # after the work: loaded when first used
  print(json.dumps(res))

def run_worker(name: str, quick: bool, repeat: int, with_beam: bool = True) -> dict:
  """One framework's cases in a process of its own, without the variables that would slow a reference down.
  "tinylit@8" is tinylit with its CPU vectors forced to 8 floats (CPU_VECTOR_WIDTH, chapter 8a), without BEAM."""
  env = {k: v for k, v in os.environ.items() if k not in HANDICAPS}
  name, _, width = name.partition("@")
  if width: env["CPU_VECTOR_WIDTH"] = width
  env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                   os.environ.get("PYTHONPATH")) if p)
  st = time.perf_counter()
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name, "--repeat", str(repeat)] +
                        (["--quick"] if quick else []) + (["--no-beam"] if width or not with_beam else []),
                        env=env, capture_output=True, text=True)
  if proc.returncode != 0: raise RuntimeError(f"the {name} process failed:\n{proc.stderr}")
  print(f"  {name}{'@' + width if width else ''}: {time.perf_counter() - st:.0f} s", flush=True)
  return json.loads(proc.stdout.strip().splitlines()[-1])

# ---- the machine's peak: independent FMAs at the widest vector width (chapter 8a's `fma_peak`)

def peaks() -> dict[int, float]:
  "GFLOPS of independent FMAs on all cores at the widest vector registers the compiler targets and at half of them."
  from tinylit.runtime.ops_cpu import native_macros, fma_peak, vector_bits
  widest = vector_bits(native_macros())
  found = {bits: fma_peak(bits, runs=100) for bits in (widest, widest // 2)}   # 2 ms runs: 0.2 s each
  return {bits: g for bits, g in found.items() if g is not None}

# ---- the table

def fmt_time(t: float | None) -> str:
  if t is None: return ""
  return f"{t * 1e6:.1f}us" if t < 1e-3 else f"{t * 1e3:.2f}ms"

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--rounds", type=int, default=1,
                  help="run every framework's process this many times, in turns; each case keeps its best round")
  ap.add_argument("--widths", type=int, nargs="*", default=[],
                  help="also run tinylit with its CPU vectors forced to these widths (e.g. --widths 8 16)")
  ap.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)   # internal: one framework's process
  ap.add_argument("--no-beam", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker_main(args.worker, args.quick, args.repeat, not args.no_beam)
  load = os.getloadavg()
  print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
  inherited = [f"{k}={os.environ[k]}" for k in HANDICAPS if k in os.environ]
  if inherited: print(f"(left out of every process: {' '.join(inherited)})")
  if load[0] > 0.5 * (os.cpu_count() or 1):
    print("warning: the machine is busy: thread pools wait for cores (numpy's OpenBLAS most, on small matmuls), and\n"
          "  the peak is what the other work leaves. Compare ratios only, or run again when it is quiet.")
  pk = peaks()
  peak = max(pk.values()) if pk else None
  from tinylit.runtime.ops_cpu import fma_peak
  for bits, g in pk.items():
    print(f"FMA peak, {bits}-bit vectors ({bits // 32} floats), {os.cpu_count()} cores: {g:.0f} GFLOPS "
          f"(one core: {fma_peak(bits, cores=1, runs=20):.0f})")
  refs = ["numpy"] + (["torch"] if importlib.util.find_spec("torch") else [])
  names = refs + ["tinylit"] + [f"tinylit@{w}" for w in args.widths]
  print("running, one framework per process:", flush=True)
  res: dict[str, dict] = {}
  for rnd in range(args.rounds):
    for name in names:
      got = run_worker(name, args.quick, args.repeat, with_beam=rnd == 0 and not args.no_beam)   # BEAM's search once is enough
      if name not in res: res[name] = got
      else: res[name]["times"] = {case: min(t, got["times"][case]) for case, t in res[name]["times"].items()}
  for name in names: print(f"{name}: {res[name]['info']}")
  ratios = [f"tinylit/{ref}" for ref in refs]
  gflops_head = f"GFLOPS{' (% of peak)' if peak else ''}: " + " | ".join(names)
  print(f"\n{'case':40s}" + "".join(f"{n:>11s}" for n in names) + "".join(f"{r:>15s}" for r in ratios) + f"  {gflops_head}")
  for case, flops in case_flops(args.quick).items():
    times = {n: res[n]["times"].get(case) for n in names}
    line = f"{case:40s}" + "".join(f"{fmt_time(times[n]):>11s}" for n in names)
    for ref in refs:
      line += f"{times['tinylit'] / times[ref]:14.2f}x" if times[ref] and times["tinylit"] else f"{'':15s}"
    if flops:
      line += "  " + " | ".join(f"{flops / times[n] / 1e9:.1f}" + (f" ({100 * flops / times[n] / 1e9 / peak:.0f}%)" if peak else "")
                                if times[n] else "-" for n in names)
    notes = [res[n]["notes"][case] for n in refs + ["tinylit"] if case in res[n]["notes"]]   # the same for each width
    if notes: line += "   " + "; ".join(notes)
    print(line, flush=True)
  if (bm := res["tinylit"].get("beam")):
    print(f"{'BEAM=2 matmul 512: search, then a second run':40s} {bm[0]:9.1f}s  {bm[1] * 1e3:9.1f}ms (the second run: disk cache)")

if __name__ == "__main__": main()
