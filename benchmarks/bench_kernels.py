"""Per-kernel speed of a training step against a plain matmul of the same size, heaviest first.

  python benchmarks/bench_kernels.py                # the MLP 784-256-10 step and the GPT step (issue 17)
  python benchmarks/bench_kernels.py --model mlp    # one of them
  python benchmarks/bench_kernels.py --min-mflop 1  # list smaller kernels too

Each model's step runs under TinyJit; then every kernel of the captured step is timed on its own (best of a few
runs). A reduce kernel whose loop nest has `out` outputs and a reduce of `red` elements does about 2*out*red FLOPs,
as much as a matmul (m x red) @ (red x n) with m*n = out: that plain matmul (m and n near sqrt(out), multiples of 16)
is timed too, and "vs mm" is the kernel's GFLOPS over the matmul's. Issue 17's bar: every kernel of at least 10 MFLOP
within 2x of its matmul (vs mm >= 0.5). Kernels are shown with their opts, so a scalar one (no UPCAST) stands out.
The machine is shared: compare runs made back to back, and read `uptime` with them.
"""
import argparse, functools, math, os, re, sys, time

import numpy as np

from tinylit import Tensor, TinyJit, nn
from tinylit.lazy import lazycache
from tinylit.ops import sym_infer

from bench import mlp_train_step  # benchmarks/ is on the path: this script's own folder

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def mlp_step():
  "The MLP 784-256-10 with SGD, batch 128 (benchmarks/bench.py's train step, jitted) and its inputs."
  _, step = mlp_train_step()
  rng = np.random.default_rng(0)
  x = Tensor(rng.standard_normal((128, 784)).astype(np.float32)).realize()
  y = Tensor(rng.integers(0, 10, 128).astype(np.int32)).realize()
  return TinyJit(step), (x, y)


def gpt_step(vocab: int):
  "Chapter 12's GPT (4 layers, width 128, context 64, batch 32) with AdamW: a jitted step and its inputs."
  from tinylit.models.gpt import GPT, GPTConfig, make_train_step
  from tinylit.nn.state import get_parameters
  Tensor.manual_seed(0)
  cfg = GPTConfig(vocab_size=vocab)
  model = GPT(cfg)
  params = get_parameters(model)
  params[0].realize(*params[1:])
  step = make_train_step(model, nn.optim.AdamW(params, lr=1e-3))
  d = np.random.default_rng(0).integers(0, vocab, (32, cfg.max_context + 1)).astype(np.int32)
  return step, (Tensor(d[:, :-1]).realize(), Tensor(d[:, 1:]).realize())


def best_of(fn, n: int = 10) -> float:
  return min(fn() for _ in range(n))


@functools.cache
def matmul_seconds(m: int, k: int, n: int) -> float:
  "A plain (m x k) @ (k x n) float32 matmul, its kernel alone, best of a few runs."
  a, b = Tensor.rand(m, k).realize(), Tensor.rand(k, n).realize()
  step = TinyJit(lambda a, b: (a @ b).realize())
  for _ in range(3): lazycache.clear(); step(a, b)
  (ei,) = [ei for ei in step.jit_cache if "r_" in ANSI.sub("", ei.prg.display_name)]
  return best_of(lambda: ei.run(jit=True), 20)


def near_matmul(out: int, red: int) -> tuple[int, int, int]:
  "An (m x red) @ (red x n) matmul with m * n close to `out`, m and n multiples of 16 (sizes the rules split evenly)."
  m = max(16, round(math.sqrt(out) / 16) * 16)
  n = max(16, round(out / m / 16) * 16)
  return m, red, n


def profile(name: str, step, args, min_mflop: float, top: int) -> list[float]:
  for _ in range(3): step(*args)   # TinyJit captures on the second call
  rows = []
  for ei in step.jit_cache:
    p = getattr(ei.prg, "p", None)
    if p is None: continue
    flops = sym_infer(ei.prg.op_estimate, ei.var_vals)
    secs = best_of(lambda ei=ei: ei.run(jit=True))
    rows.append((secs, ANSI.sub("", ei.prg.display_name), flops, p.applied_opts, ei.bufs[0].size))
  rows.sort(key=lambda r: -r[0])
  total = sum(r[0] for r in rows)
  print(f"\n{name}: {len(rows)} kernels, {total * 1e3:.2f} ms of kernel time; those of at least {min_mflop:g} MFLOP, "
        f"heaviest first")
  print(f"  {'kernel':34s} {'ms':>7s} {'MFLOP':>7s} {'GFLOPS':>7s} {'matmul':>13s} {'mm GFLOPS':>9s} {'vs mm':>6s}  opts")
  ratios = []
  for secs, kname, flops, opts, out in rows:
    if flops < min_mflop * 1e6: continue
    # the name lists every axis of the loop nest: its size over the outputs is the reduce's size
    red = max(1, math.prod(int(x) for x in re.findall(r"\d+", kname.split("n")[0])) // out)
    # an elementwise kernel (exp2/log2 built from ALU ops count as ~30 FLOPs a value) has no matmul to compare with
    if red == 1: continue
    m, k, n = near_matmul(out, red)
    mm = 2 * m * k * n / matmul_seconds(m, k, n) / 1e9
    gf = flops / secs / 1e9
    ratios.append(gf / mm)
    if len(ratios) <= top:
      print(f"  {kname:34s} {secs * 1e3:7.3f} {flops / 1e6:7.1f} {gf:7.1f} {f'{m}x{k}x{n}':>13s} {mm:9.1f} {gf / mm:6.2f}  "
            f"{', '.join(f'{o.op.name}({o.axis},{o.amt})' for o in opts) or '-'}")
  if ratios: print(f"  worst vs mm: {min(ratios):.2f}; kernels under 0.5: {sum(r < 0.5 for r in ratios)} of {len(ratios)}")
  return ratios


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--model", choices=["mlp", "gpt", "all"], default="all")
  ap.add_argument("--vocab", type=int, default=65, help="the GPT's vocabulary (65: Shakespeare's characters)")
  ap.add_argument("--min-mflop", type=float, default=10.0)
  ap.add_argument("--top", type=int, default=40, help="rows printed per model")
  args = ap.parse_args()
  print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; python {sys.version.split()[0]}")
  t0 = time.perf_counter()
  if args.model in ("mlp", "all"): profile("MLP 784-256-10, SGD, batch 128", *mlp_step(), args.min_mflop, args.top)
  if args.model in ("gpt", "all"):
    profile(f"GPT 4 layers, width 128, context 64, batch 32, vocabulary {args.vocab}, AdamW", *gpt_step(args.vocab),
            args.min_mflop, args.top)
  print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__": main()
