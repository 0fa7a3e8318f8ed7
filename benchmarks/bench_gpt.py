"""Chapter 12's char-level GPT against torch (eager, the same model with the same weights), measured in one run.

  python benchmarks/bench_gpt.py                 # the issue's model: 4 layers, 4 heads, width 128, context 64, batch 32
  python benchmarks/bench_gpt.py --quick         # a small model, for a quick look
  python benchmarks/bench_gpt.py --device CL
  python benchmarks/bench_gpt.py --generation    # generation only (no compile-time or training figures)

Prints: the first training step from an empty compile cache (a fresh process with a fresh TINYLIT_CACHE: compiling
every kernel included), with a compiler worker per core and with one, and the CPU time it took in Python and in the
compilers; the jitted AdamW training step against torch's eager step (median of the timed steps, after warm-up) and
their ratio; generation with the KV cache, tokens per second, against torch with a KV cache of its own, on its
threads and on one (each timed --rounds times, in turn, the best round kept), where a tinylit token's time goes (the
prompt's prefill replay; each rollout replay: its kernels' own time, as one CPU graph call or launched one by one, and
the rest of the call: inputs, variable binding, the replay's Python, the token read back), and what the cache saves (the same generation
running the whole window at every token: tokens per second and FLOPs per token); and the per-kernel profile of one
jitted step (every kernel timed on its own), heaviest first, so the next bottleneck is visible. The model is
tinylit/models/gpt.py, the code the notebook trains; the vocabulary is 80 characters and the data random tokens
(speed doesn't depend on the values).
"""
import argparse, os, re, statistics, subprocess, sys, tempfile, textwrap, time

import numpy as np
import torch
import torch.nn.functional as TF

from tinylit import Tensor, nn
from tinylit.device import GlobalCounters
from tinylit.models.gpt import GPT, Generator, GPTConfig, make_train_step
from tinylit.nn.state import get_parameters, get_state_dict
from tinylit.ops import sym_infer

from torch_gpt import TorchGPT, torch_generate, torch_uncached_generate  # benchmarks/ is on the path: this script's own folder

ANSI = re.compile(r"\x1b\[[0-9;]*m")


# ---- tinylit
def uncached_generate(model: GPT, prompt: list[int], n: int) -> list[int]:
  "No cache: the whole window again for every token, each length its own (compiled once) kernels."
  out = list(prompt)
  for _ in range(n): out.append(int(model(Tensor([out[-model.cfg.max_context:]], device=model.device))[0, -1].argmax().item()))
  return out


def tinylit_training(cfg: GPTConfig, bs: int, device: str):
  Tensor.manual_seed(0)
  model = GPT(cfg)
  params = get_parameters(model)
  for p in params: p.to_(device)
  params[0].realize(*params[1:])
  opt = nn.optim.AdamW(params, lr=1e-3)
  return model, make_train_step(model, opt)


def batches(cfg: GPTConfig, bs: int, n: int) -> list[np.ndarray]:
  rng = np.random.default_rng(0)
  return [rng.integers(0, cfg.vocab_size, (bs, cfg.max_context + 1)).astype(np.int32) for _ in range(n)]


FIRST_STEP = textwrap.dedent("""
  import os, sys, time
  sys.path.insert(0, {bench_dir!r})
  from bench_gpt import tinylit_training, batches, GPTConfig
  from tinylit import Tensor
  cfg = GPTConfig(**{cfg!r})
  model, step = tinylit_training(cfg, {bs}, {device!r})
  (d,) = batches(cfg, {bs}, 1)
  x, y = Tensor(d[:, :-1], device={device!r}), Tensor(d[:, 1:], device={device!r})
  from tinylit.realize import method_cache
  t0, o0, k0 = time.perf_counter(), os.times(), len(method_cache)
  step(x, y).item()
  t1, o1 = time.perf_counter(), os.times()
  print(t1 - t0, o1.user + o1.system - o0.user - o0.system, o1.children_user + o1.children_system - o0.children_user - o0.children_system,
        len(method_cache) - k0)
""")


def first_step(cfg: GPTConfig, bs: int, device: str, **env) -> tuple[float, float, float, int]:
  """The first jitted step in a fresh process with an empty compile cache (a new TINYLIT_CACHE folder): every kernel
  compiled. Returns its wall-clock seconds, the CPU seconds of the Python process and of the compiler processes it
  started, and how many kernels it compiled. On a busy machine the wall time grows; the CPU seconds don't."""
  with tempfile.TemporaryDirectory() as cache:
    script = FIRST_STEP.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), cfg=cfg.__dict__, bs=bs, device=device)
    r = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TINYLIT_CACHE": cache, **env}, capture_output=True, text=True)
    if r.returncode: raise RuntimeError(f"the first-step process failed:\n{r.stderr[-2000:]}")
    wall, cpu, compilers, kernels = r.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu), float(compilers), int(kernels)


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--device", default="CPU")
  ap.add_argument("--quick", action="store_true", help="a small model (2 layers, width 64, context 32, batch 8)")
  ap.add_argument("--steps", type=int, default=10, help="timed training steps (after warm-up)")
  ap.add_argument("--tokens", type=int, default=60, help="generated tokens per timed generation")
  ap.add_argument("--top", type=int, default=12, help="kernels in the profile")
  ap.add_argument("--generation", action="store_true", help="generation only: skip the first step's compile and training")
  ap.add_argument("--rounds", type=int, default=3, help="timed generations per side (tinylit, then torch, in turn)")
  args = ap.parse_args()
  cfg = GPTConfig(vocab_size=80, n_layers=2, n_heads=4, dim=64, max_context=32) if args.quick else GPTConfig(vocab_size=80)
  bs = 8 if args.quick else 32
  print(f"GPT: {cfg.n_layers} layers, {cfg.n_heads} heads, width {cfg.dim}, context {cfg.max_context}, "
        f"vocabulary {cfg.vocab_size}, batch {bs}, AdamW; tinylit on {args.device}, torch {torch.__version__} eager on "
        f"{torch.get_num_threads()} threads")

  print(f"machine load (1-minute average) {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
  workers = ((f"{os.cpu_count()} compiler workers", {}), ("1 compiler worker (still beside Python's codegen)", {"COMPILE_WORKERS": "1"}))
  for label, env in () if args.generation else workers:
    wall, cpu, compilers, kernels = first_step(cfg, bs, args.device, **env)
    print(f"{'first training step, empty compile cache':46s} {wall:9.2f} s   (bar: under 15 s) with {label}: {kernels} kernels "
          f"compiled, CPU {cpu:.1f} s in Python, {compilers:.1f} s in the compilers")

  model, step = tinylit_training(cfg, bs, args.device)
  tmodel = TorchGPT(cfg)
  tmodel.load_state_dict({k: torch.tensor(v.numpy()) for k, v in get_state_dict(model).items()})
  topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-3, eps=1e-8, weight_decay=0.01)
  data = batches(cfg, bs, 3 + args.steps)

  def tinylit_step(d):
    return step(Tensor(d[:, :-1], device=args.device), Tensor(d[:, 1:], device=args.device)).item()
  def torch_step(d):
    topt.zero_grad()
    logits = tmodel(torch.from_numpy(d[:, :-1]).long())
    loss = TF.cross_entropy(logits.reshape(-1, cfg.vocab_size), torch.from_numpy(d[:, 1:]).long().reshape(-1))
    loss.backward()
    topt.step()
    return loss.item()
  if not args.generation: training(cfg, data, tinylit_step, torch_step)
  generation(args, cfg, model, tmodel)
  if not args.generation: step_profile(args, step)


def training(cfg: GPTConfig, data: list[np.ndarray], tinylit_step, torch_step):
  losses = (tinylit_step(data[0]), torch_step(data[0]))
  print(f"{'first loss (the same weights and batch)':46s} tinylit {losses[0]:.4f}, torch {losses[1]:.4f}")
  times = {}
  for name, fn in (("tinylit", tinylit_step), ("torch", torch_step)):
    for d in data[1:3]: fn(d)   # warm-up: tinylit's jit captures on its second call
    secs = []
    for d in data[3:]:
      t0 = time.perf_counter(); fn(d); secs.append(time.perf_counter() - t0)
    times[name] = statistics.median(secs)
  print(f"{'training step (median), tinylit TinyJit':46s} {times['tinylit'] * 1e3:9.1f} ms")
  print(f"{'training step (median), torch eager':46s} {times['torch'] * 1e3:9.1f} ms")
  print(f"{'  tinylit / torch':46s} {times['tinylit'] / times['torch']:9.2f}x   (bar: 2x; stretch: under 1x)")



def generation(args, cfg: GPTConfig, model: GPT, tmodel: TorchGPT):
  gen = Generator(model)
  # warm-up: each jit runs its function on call 1 and captures on call 2 (the prompt's prefill jit once a generate)
  for _ in range(2): gen.generate([0], args.tokens, temperature=1.0, top_k=10)
  torch_generate(tmodel, [0], args.tokens, 1.0, 10)
  threads = torch.get_num_threads()
  def torch_secs(n_threads: int) -> float:
    torch.set_num_threads(n_threads)
    t0 = time.perf_counter(); torch_generate(tmodel, [0], args.tokens, 1.0, 10); secs = time.perf_counter() - t0
    torch.set_num_threads(threads)
    return secs
  tl = tt = tt1 = float("inf")
  for _ in range(args.rounds):   # in turn, so that a busy spell of the machine falls on every side alike
    t0 = time.perf_counter(); gen.generate([0], args.tokens, temperature=1.0, top_k=10); tl = min(tl, time.perf_counter() - t0)
    tt, tt1 = min(tt, torch_secs(threads)), min(tt1, torch_secs(1))
  print(f"{'generation with a KV cache, tinylit':46s} {args.tokens / tl:9.1f} tokens/s")
  print(f"{f'generation with a KV cache, torch ({threads} threads)':46s} {args.tokens / tt:9.1f} tokens/s")
  print(f"{'generation with a KV cache, torch (1 thread)':46s} {args.tokens / tt1:9.1f} tokens/s")
  print(f"{'  tinylit / torch (tokens per second)':46s} {tt / tl:9.2f}x ({threads} threads), {tt1 / tl:.2f}x (1 thread)")
  # where tinylit's time goes: the prompt through its prefill capture, then each token through the rollout capture
  t0 = time.perf_counter(); gen([0], 0, 1.0, 10)[1].item(); prompt_secs = time.perf_counter() - t0
  n_replay = min(args.tokens, cfg.max_context - 1)
  call_secs, kernel_secs = [], []
  for pos in range(1, n_replay + 1):
    GlobalCounters.reset()
    t0 = time.perf_counter(); gen([1], pos, 1.0, 10)[1].item(); call_secs.append(time.perf_counter() - t0)
    kernel_secs.append(GlobalCounters.time_sum_s)   # the launches' own time: the graph's one call, or each kernel's
  replay_secs, kernels = statistics.median(call_secs), statistics.median(kernel_secs)
  rollout = gen.rollout_jit.jit_cache
  print(f"{'  tinylit: the prompt step (prefill replay)':46s} {prompt_secs * 1e3:9.2f} ms ({len(gen.prefill_jit[1].jit_cache)} "
        f"kernels); each later token (a rollout replay of {len(rollout)} kernels) {replay_secs * 1e3:.2f} ms = {1 / replay_secs:.0f} tokens/s")
  how = "one CPU graph call (chapter 9)" if gen.rollout_jit.graph is not None else "launched one by one"
  print(f"{'  a rollout token: its kernels':46s} {kernels * 1e3:9.2f} ms, {how}; the rest of the call (inputs, binding, the "
        f"replay's Python, the token read back) {(replay_secs - kernels) * 1e3:.2f} ms")
  # what the cache saves: the same loop running the whole window at every token instead. Every length is a new shape
  # with kernels of its own to compile (in the warm-up), so this runs over the first 16 tokens only
  n = min(args.tokens, cfg.max_context - 1, 16)
  uncached_generate(model, [0], n)   # warm-up: compiles the kernels of every length
  GlobalCounters.reset(); t0 = time.perf_counter(); uncached_generate(model, [0], n); tu = time.perf_counter() - t0
  flops_uncached = GlobalCounters.global_ops / n
  GlobalCounters.reset(); gen.generate([0], n, temperature=1.0, top_k=10); flops_cached = GlobalCounters.global_ops / n
  torch_uncached_generate(tmodel, [0], n)
  t0 = time.perf_counter(); torch_uncached_generate(tmodel, [0], n); ttu = time.perf_counter() - t0
  print(f"{f'generation without a cache ({n} tokens), tinylit':46s} {n / tu:9.1f} tokens/s")
  print(f"{f'generation without a cache ({n} tokens), torch':46s} {n / ttu:9.1f} tokens/s")
  print(f"{'  FLOPs per token, tinylit, with / without':46s} {flops_cached:9.3g} / {flops_uncached:.3g}  (the cache saves "
        f"{1 - flops_cached / flops_uncached:.0%} of the work over the first {n} tokens)")



def step_profile(args, step):
  profile = []
  for ei in step.jit_cache:
    secs = min(ei.run(jit=True) for _ in range(3))
    flops = sym_infer(ei.prg.op_estimate, ei.var_vals)
    opts = getattr(getattr(ei.prg, "p", None), "applied_opts", [])
    profile.append((secs, ANSI.sub("", ei.prg.display_name), flops, opts))
  profile.sort(key=lambda r: -r[0])
  total = sum(r[0] for r in profile)
  print(f"\none jitted step: {len(profile)} kernels, {total * 1e3:.1f} ms of kernel time; the heaviest:")
  print(f"  {'kernel':28s} {'ms':>8s} {'share':>6s} {'GFLOPS':>8s}  opts")
  for secs, name, flops, opts in profile[:args.top]:
    print(f"  {name:28s} {secs * 1e3:8.2f} {secs / total:6.1%} {flops / secs / 1e9:8.2f}  "
          f"{', '.join(f'{o.op.name}({o.axis},{o.amt})' for o in opts) or '-'}")


if __name__ == "__main__":
  main()
