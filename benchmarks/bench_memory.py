"""Memory of intermediates in two training steps, with and without chapter 4's memory planner; and the peak
resident memory of GPT training beside torch's.

An intermediate is a buffer a schedule allocates that nothing holds once the schedule has run (the planner's
`intermediates`). Without the planner each one has memory of its own until its schedule ends, so a schedule's
peak for intermediates is their sum; with it, they share blocks and the peak is the blocks' sum. A step runs
several schedules (gradients, updates, the loss): its peak is the largest of theirs. The device's real high-water
mark over the step (GlobalCounters.mem_peak_per_device, less what was held before the step) is printed too.

  python benchmarks/bench_memory.py            # CPU
  python benchmarks/bench_memory.py --device CL

(a) the MLP 784-256-10, batch 128, SGD of benchmarks/bench.py; (b) the capstone's CNN (chapter 11: two 3x3
convolutions with relu and max-pool, a linear layer; Adam, batch 50) on random 8x8 images: memory doesn't depend
on the values. Each step runs eagerly (no TinyJit), after two warm-up steps.

Then the peak resident memory (getrusage's ru_maxrss) of a process that trains chapter 12's GPT (4 layers, 4 heads,
width 128, context 64) under TinyJit, with evaluations under a TinyJit of their own, beside a process that does the
same in torch (bench_nanogpt.py's two sides, on random tokens: 10 iterations, evaluations at 0, 5 and 10): at
bench_gpt.py's sizes (batch 32, a vocabulary of 80) and at nanoGPT's (batch 12, 77); and at nanoGPT's once more with
evaluations that record the autograd graph (no `Tensor.test()`, no torch.no_grad()), which issue 31 found costly.
`--no-rss` leaves this part out.
"""
import argparse
from dataclasses import asdict

import numpy as np

import tinylit.tensor
from tinylit import Tensor, nn
from tinylit.device import GlobalCounters
from tinylit.helpers import NO_MEMORY_PLANNER, Context
from tinylit.nn.state import get_parameters
from tinylit.memory import planned_memory
from tinylit.models.gpt import GPTConfig
from tinylit.schedule import intermediates

from bench import mlp_train_step  # benchmarks/ is on the path: this script's own folder
from bench_nanogpt import Protocol, run_both

# every schedule a step makes: (bytes of its intermediates, bytes they take with the planner)
schedules: list[tuple[int, int]] = []
_create_schedule_with_bases = tinylit.tensor.create_schedule_with_bases

def recording_create_schedule(outs):
  "Tensor.realize's create_schedule_with_bases, also noting what the schedule's intermediates need."
  schedule, computes = _create_schedule_with_bases(outs)
  if NO_MEMORY_PLANNER:
    temps = sum(b.nbytes for b in intermediates(computes, outs))
    schedules.append((temps, temps))
  else: schedules.append(planned_memory([si.bufs for si in schedule]))
  return schedule, computes

tinylit.tensor.create_schedule_with_bases = recording_create_schedule


def mlp_step(device: str):
  rng = np.random.default_rng(0)
  _, train = mlp_train_step(device)
  x = Tensor(rng.standard_normal((128, 784)).astype(np.float32), device=device).realize()
  y = Tensor(rng.integers(0, 10, 128).astype(np.int32), device=device).realize()
  return lambda: train(x, y)


class DigitNet:
  "The capstone's model (nbs/11_capstone_digits.ipynb)."
  def __init__(self):
    self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
    self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
    self.fc = nn.Linear(32 * 2 * 2, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.conv1(x).relu().max_pool2d()
    x = self.conv2(x).relu().max_pool2d()
    return self.fc(x.flatten(1))


def cnn_step(device: str):
  rng = np.random.default_rng(0)
  Tensor.manual_seed(0)
  model = DigitNet()
  params = get_parameters(model)
  for p in params: p.to_(device).realize()
  opt = nn.optim.Adam(params, lr=0.01)
  x = Tensor(rng.random((50, 1, 8, 8)).astype(np.float32), device=device).realize()
  y = Tensor(rng.integers(0, 10, 50).astype(np.int32), device=device).realize()
  def step() -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
    return loss.realize()
  return step


def measure(make_step, device: str) -> dict:
  step = make_step(device)
  for _ in range(2): step()
  schedules.clear()
  GlobalCounters.reset()
  held_before = GlobalCounters.mem_used_per_device.get(device, 0)
  loss = step().numpy()
  return {"without": max(s[0] for s in schedules), "with": max(s[1] for s in schedules), "loss": float(loss),
          "device_peak": GlobalCounters.mem_peak_per_device[device] - held_before, "schedules": list(schedules)}


def peak_rss(device: str) -> None:
  "Peak resident memory of GPT training, tinylit's process beside torch's (the compile cache as earlier runs left it)."
  rows = []
  for name, bs, vocab, no_grad in (("GPT, bench_gpt's sizes (batch 32)", 32, 80, True), ("nanoGPT's sizes (batch 12)", 12, 77, True),
                                   ("nanoGPT's, evaluations recording the graph", 12, 77, False)):
    print(f"-- {name}")
    cfg = asdict(GPTConfig(vocab_size=vocab))
    tokens = np.random.default_rng(0).integers(0, vocab, 200_000).astype(np.int32)
    p = Protocol(iters=10, eval_interval=5, eval_iters=3, batch_size=bs, eval_no_grad=no_grad)
    res = run_both(p, cfg, tokens[:180_000], tokens[180_000:], device, empty_cache=False)
    rows.append((name, res["tinylit"]["peak_rss"], res["torch"]["peak_rss"]))
  print(f"\npeak resident memory of a training process (MB = 1e6 bytes); tinylit on {device}, torch on the CPU")
  print(f"{'run':44s} {'tinylit':>9s} {'torch':>9s} {'tinylit/torch':>14s}")
  for name, ours, theirs in rows: print(f"{name:44s} {ours / 1e6:7.0f}MB {theirs / 1e6:7.0f}MB {ours / theirs:13.2f}x")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--device", default="CPU")
  parser.add_argument("--no-rss", action="store_true", help="leave out the peak resident memory beside torch's")
  args = parser.parse_args()
  device = args.device
  print(f"peak memory of intermediates in one training step on {device} (KB = 1000 bytes)")
  print(f"{'step':44s} {'without':>10s} {'with':>10s} {'saved':>6s}   {'device peak over the step, without -> with'}")
  for name, make_step in (("MLP 784-256-10, batch 128, SGD", mlp_step), ("capstone CNN, batch 50, Adam", cnn_step)):
    with Context(NO_MEMORY_PLANNER=1): off = measure(make_step, device)
    on = measure(make_step, device)
    assert on["loss"] == off["loss"], (on["loss"], off["loss"])   # the same kernels, the same bits
    print(f"{name:44s} {off['without'] / 1e3:8.1f}KB {on['with'] / 1e3:8.1f}KB {1 - on['with'] / off['without']:6.0%}   "
          f"{off['device_peak'] / 1e3:.1f}KB -> {on['device_peak'] / 1e3:.1f}KB "
          f"({1 - on['device_peak'] / off['device_peak']:.0%} less)")
    print("  per schedule (intermediates -> with the planner): "
          + ", ".join(f"{a / 1e3:.1f}KB -> {b / 1e3:.1f}KB" for a, b in on["schedules"]))
  if not args.no_rss:
    print()
    peak_rss(device)


if __name__ == "__main__":
  main()
