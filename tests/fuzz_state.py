"""A seeded stateful differential fuzzer: random programs that *write* -- `assign`, `+=`/`-=`/`*=`, `t[...] = v` --
through random views (reshape, permute, basic slicing, flip), read through views taken before and after the writes,
and read values computed before a write after it. Each program runs on tinylit and on a torch reference (`Ref`: torch
storage, views as tensors of positions) side by side, and every check is compared. The reference has torch's
semantics of memory: a write is seen at once by every view of the memory, a value computed before it keeps its old
value, every op but a movement makes new memory, and a write that reads its own memory reads the old values first.

The values are small integers in float32 and the ops (+, -, *2) stay exact, so tinylit must agree bit for bit. A
failing program is printed as a standalone tinylit snippet.

pytest entry: tests/test_fuzz_state.py. At the desk: `python tests/fuzz_state.py --device CPU -n 2000 --seed 3`.
"""
from __future__ import annotations

import argparse, random, sys, traceback
from collections import Counter

import numpy as np
import torch

from tinylit import Tensor, TinyJit
from tinylit.ops import Variable


class Program:
  "The steps of one random program, as lines of tinylit code (for the repro) and the torch twin of each."
  def __init__(self): self.lines: list[str] = []


def _shape(rng: random.Random) -> tuple[int, ...]:
  return tuple(rng.choice((1, 2, 3, 4)) for _ in range(rng.choice((1, 2, 2, 3))))


def _reshapes(shape: tuple[int, ...], rng: random.Random) -> tuple[int, ...]:
  "Another shape with as many elements (a flat one, the same one, or one axis split/merged)."
  n = int(np.prod(shape))
  options = [(n,), shape, tuple(reversed(shape))]
  for d in (2, 3):
    if n % d == 0: options.append((d, n // d))
  return rng.choice(options)


# the families of basic indexing `_slice` draws; `fuzz` counts them, so that one it never draws shows up as a 0
INDEX_KINDS = ("int", "None", "...", ":", "step 1", "step > 1", "negative step", "step beyond the axis", "empty result")


def _indexed(shape: tuple[int, ...], idx: str) -> tuple[int, ...]:
  "The shape `x[idx]` has for an x of `shape` (numpy's rules, which tinylit and torch follow)."
  return tuple(np.empty(shape)[eval(f"np.s_[{idx}]")].shape)


def _slice(shape: tuple[int, ...], rng: random.Random, kinds: Counter | None = None) -> str:
  """A basic index of every form numpy has: ints (negative too), slices with or without start and stop and with any
  step (negative, or larger than the axis), `None` and `...`. Adds the families it drew to `kinds`."""
  drawn, parts = Counter(), []
  for s in shape:
    kind = rng.random()
    if kind < 0.15 and s > 0:
      parts.append(str(rng.randrange(-s, s))); drawn["int"] += 1
    elif kind < 0.3: parts.append(":"); drawn[":"] += 1
    else:
      start, stop = (rng.choice([None, None, rng.randrange(-s - 1, s + 2)]) for _ in range(2))
      step = rng.choice([None, 1, 2, 3, -1, -2, -3, rng.choice([s + 1, -s - 2])])
      parts.append(":".join("" if v is None else str(v) for v in (start, stop, step)))
      if step in (None, 1): drawn["step 1"] += 1
      else:
        drawn["step > 1" if step > 1 else "negative step"] += 1
        if abs(step) > s: drawn["step beyond the axis"] += 1
  if rng.random() < 0.2:   # some axes (maybe none) as `...`
    lo = rng.randrange(len(parts) + 1)
    parts[lo:rng.randrange(lo, len(parts) + 1)] = ["..."]; drawn["..."] += 1
  for _ in range(rng.choice((0, 0, 0, 1, 2))):
    parts.insert(rng.randrange(len(parts) + 1), "None"); drawn["None"] += 1
  idx = ", ".join(parts) or "..."
  if 0 in _indexed(shape, idx): drawn["empty result"] += 1
  if kinds is not None: kinds.update(drawn)
  return idx


def generate(seed: int, index: int, steps: int = 12, kinds: Counter | None = None) -> list[str]:
  """A program as a list of statements of Python over names v0, v1, ... that works for tinylit's Tensor and for the
  reference through the small vocabulary of `Tinylit`/`Reference` (T.new, T.full, T.check, ...). Each write is followed
  by a read. One program in five is a TinyJit program, one in ten a KV cache. The index families drawn go to `kinds`."""
  rng = random.Random(seed * 1_000_003 + index)
  if (kind := rng.random()) < 0.2: return _jit_program(rng, kinds)
  if kind < 0.3: return _kv_program(rng)
  shapes: dict[str, tuple[int, ...]] = {}
  lines: list[str] = []
  def name() -> str: return f"v{len(shapes)}"
  def any_of(pred=lambda s: True): return rng.choice([k for k, s in shapes.items() if pred(s)] or [None])
  for _ in range(rng.randrange(1, 3)):   # roots: data, constants (realized or not), computed
    n, s = name(), _shape(rng)
    kind = rng.random()
    if kind < 0.5: lines.append(f"{n} = T.new({s}, {rng.randrange(1 << 30)})")
    elif kind < 0.7: lines.append(f"{n} = T.full({s}, {rng.randrange(-3, 4)}){rng.choice(['', '.realize()'])}")
    elif kind < 0.85: lines.append(f"{n} = T.arange({int(np.prod(s))}).reshape({s}){rng.choice(['', '.realize()'])}")
    else: lines.append(f"{n} = (T.new({s}, {rng.randrange(1 << 30)}) + 1)")
    shapes[n] = s
  for _ in range(steps):
    a = any_of()
    sa = shapes[a]
    kind = rng.random()
    n = name()
    if kind < 0.3:   # a view
      view = rng.random()
      if view < 0.3: s2 = _reshapes(sa, rng); lines.append(f"{n} = {a}.reshape({s2})")
      elif view < 0.5:
        order = list(range(len(sa))); rng.shuffle(order); s2 = tuple(sa[i] for i in order)
        lines.append(f"{n} = {a}.permute({tuple(order)})")
      elif view < 0.8:
        idx = _slice(sa, rng, kinds); s2 = _indexed(sa, idx)
        if not s2: continue
        lines.append(f"{n} = {a}[{idx}]")
      else: d = rng.randrange(len(sa)); s2 = sa; lines.append(f"{n} = {a}.flip({d})")
      shapes[n] = s2
    elif kind < 0.45:   # a new value computed from old ones (lazy until read)
      b = any_of(lambda s, sa=sa: s == sa)
      op = rng.choice(["+", "-", "*"])
      rhs = f"{a} {op} {b}" if op != "*" else f"{a} * 2"
      if rng.random() < 0.2: rhs = rng.choice([f"{a} + 0", f"{a} * 1", f"{a} - 0"])   # folded away: must not alias
      lines.append(f"{n} = {rhs}")
      shapes[n] = sa
    elif kind < 0.9:   # a write
      b = any_of(lambda s, sa=sa: s == sa)
      w = rng.random()
      if w < 0.25: lines.append(f"{a}.assign({b} - 1)")
      elif w < 0.4: lines.append(f"{a}.assign({a}.flip(0))")   # reads its own memory: the old values first
      elif w < 0.55: lines.append(f"{a} += {b}")
      elif w < 0.65: lines.append(f"{a} *= 2")
      elif w < 0.75: lines.append(f"{a} -= {rng.randrange(1, 4)}")
      else:
        idx = _slice(sa, rng, kinds)
        lines.append(f"{a}[{idx}] = {rng.randrange(-5, 6)}")
      lines.append(f"T.check({rng.choice(list(shapes))})")
    else: lines.append(f"T.check({a})")
  lines += [f"T.check({k})" for k in shapes]
  return lines


def _jit_program(rng: random.Random, kinds: Counter | None = None) -> list[str]:
  """State updated in place inside a TinyJit function (through a random view of it), random draws, and a container of
  results, replayed several times with new inputs; the draws must differ on every call."""
  shape = _shape(rng)
  while True:   # a view with elements: an empty update launches no kernel, and TinyJit refuses a function without one
    drawn = Counter()
    if 0 not in (view_shape := _indexed(shape, idx := _slice(shape, rng, drawn))): break
  if kinds is not None: kinds.update(drawn)
  update = rng.choice(["sv += x", "sv.assign(sv * 2 - x)", "sv -= x", "s.assign(s.flip(0))\n  sv += x"])
  draws = rng.randrange(0, 4)
  ret = rng.choice(['{"s": s * 1, "r": r, "v": (sv - 1,)}', '[s + 0, {"r": r, "w": sv * 2}]', '({"r": r}, sv + x)',
                    '{"out": [s.reshape(-1) * 2], "r": r}'])
  seed = rng.randrange(1 << 30)
  return [f"s = T.new({shape}, {seed})", f"sv = s[{idx}]",
          f"def step(x):\n  global sv\n  {update}\n  r = [T.rand(3) for _ in range({draws})]\n  return {ret}",
          "f = T.jit(step)",
          f"for i in range(5):\n  out = f(T.new({view_shape}, {seed} + i + 1))\n  T.check_all(out)\n  T.check(s)"]


def _kv_program(rng: random.Random) -> list[str]:
  """tinygrad's KV cache: a cache written one row per position through shrink(...).assign(...), read up to the
  position; the position a plain int, or a bound Variable under TinyJit (one capture for every position)."""
  length, dim, seed = rng.randrange(3, 7), rng.randrange(1, 4), rng.randrange(1 << 30)
  jit = rng.random() < 0.5
  return [f"cache = T.full(({length}, {dim}), 0).contiguous().realize()",
          "def attend(row, pos):\n  cache.shrink(((pos, pos + 1), None)).assign(row).realize()\n"
          "  return (cache.shrink(((0, pos + 1), None)) * 2).sum(0)",
          f"f = {'T.jit(attend)' if jit else 'attend'}",
          f"for p in range({length}):\n  T.check(f(T.new((1, {dim}), {seed} + p), T.pos(p, {length}, {jit})))\n  T.check(cache)"]


class Tinylit:
  "The vocabulary of a generated program, on tinylit."
  def __init__(self, device: str): self.device, self.seen, self.draws = device, [], []
  def new(self, shape, seed): return Tensor(np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float32), device=self.device)
  def full(self, shape, v): return Tensor.full(shape, float(v), device=self.device)
  def arange(self, n): return Tensor.arange(n, device=self.device, dtype="float32")
  def check(self, t): self.seen.append(t.numpy().copy())
  def rand(self, n): return Tensor.rand(n, device=self.device)
  def jit(self, f): return TinyJit(f)
  def pos(self, p, length, symbolic): return Variable("start_pos", 0, length - 1).bind(p) if symbolic else p
  def check_all(self, out):
    "Check every tensor in a returned container; random draws (under key 'r', or lists of them) are checked apart."
    for key, t in _leaves(out):
      if key == "r":
        v = t.numpy()
        if v.shape != (3,) or not ((0 <= v) & (v < 1)).all(): raise AssertionError(f"rand(3) gave {v}")
        if any(np.array_equal(v, d) for d in self.draws): raise AssertionError(f"a replay drew {v} again")
        self.draws.append(v.copy())
      else: self.check(t)


def _leaves(out, key=None):
  "(key, tensor) for every tensor in nested dicts, lists and tuples, with the dict key it sits under ('r': random draws)."
  if isinstance(out, dict):
    for k, v in out.items(): yield from _leaves(v, k)
  elif isinstance(out, (list, tuple)):
    for v in out: yield from _leaves(v, key)
  else: yield key, out


class Ref:
  """torch's semantics of memory, with tinygrad's movement ops: a tensor is a flat torch storage and a tensor of
  positions in it. Every movement op (reshape, permute, flip, basic slicing) is a view, a write stores into the
  storage at the writer's positions after reading the whole value, and every other op makes a new storage. (torch's
  own `flip`, and `reshape` of a permuted tensor, copy instead: positions make them views, as tinygrad's are.)"""
  def __init__(self, storage: torch.Tensor, pos: torch.Tensor): self.storage, self.pos = storage, pos
  @staticmethod
  def of(values: torch.Tensor) -> Ref: return Ref(values.flatten().clone(), torch.arange(values.numel()).reshape(values.shape))
  def value(self) -> torch.Tensor: return self.storage[self.pos]
  def numpy(self) -> np.ndarray: return self.value().numpy()
  def realize(self) -> Ref: return self
  def reshape(self, shape) -> Ref: return Ref(self.storage, self.pos.reshape(shape))
  def permute(self, order) -> Ref: return Ref(self.storage, self.pos.permute(order))
  def flip(self, dim) -> Ref: return Ref(self.storage, self.pos.flip(dim))
  # numpy indexes the positions: torch's own slicing refuses negative steps
  def __getitem__(self, idx) -> Ref: return Ref(self.storage, torch.from_numpy(np.array(self.pos.numpy()[idx])))
  def shrink(self, arg) -> Ref: return self[tuple(slice(*a) if a is not None else slice(None) for a in arg)]
  def contiguous(self) -> Ref: return Ref.of(self.value())
  def sum(self, axis) -> Ref: return Ref.of(self.value().sum(axis))
  def _val(self, x) -> torch.Tensor: return x.value() if isinstance(x, Ref) else torch.tensor(float(x))
  def __add__(self, x) -> Ref: return Ref.of(self.value() + self._val(x))
  def __sub__(self, x) -> Ref: return Ref.of(self.value() - self._val(x))
  def __mul__(self, x) -> Ref: return Ref.of(self.value() * self._val(x))
  def assign(self, x) -> Ref:
    self.storage[self.pos] = self._val(x).expand(self.pos.shape).clone()
    return self
  def __iadd__(self, x) -> Ref: return self.assign(self + x)
  def __isub__(self, x) -> Ref: return self.assign(self - x)
  def __imul__(self, x) -> Ref: return self.assign(self * x)
  def __setitem__(self, idx, x) -> None: self[idx].assign(x)


class Reference:
  "The vocabulary of a generated program, on `Ref`."
  def __init__(self): self.seen = []
  def new(self, shape, seed): return Ref.of(torch.tensor(np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float32)))
  def full(self, shape, v): return Ref.of(torch.full(shape, float(v)))
  def arange(self, n): return Ref.of(torch.arange(n, dtype=torch.float32))
  def check(self, t): self.seen.append(t.numpy().copy())
  def rand(self, n): return None        # random values are checked on tinylit alone (range, fresh on every call)
  def jit(self, f): return f
  def pos(self, p, length, symbolic): return p
  def check_all(self, out):
    for key, t in _leaves(out):
      if key != "r": self.check(t)


def run(lines: list[str], device: str) -> str | None:
  "None if tinylit agrees with the reference on every check of the program, else what differed."
  tl, ref = Tinylit(device), Reference()
  ns_tl, ns_ref, checked = {"T": tl}, {"T": ref}, 0
  for i, line in enumerate(lines):
    exec(line, ns_ref)
    try: exec(line, ns_tl)
    except Exception: return f"line {i} `{line}` raised on tinylit:\n{traceback.format_exc(limit=4)}"
    if len(tl.seen) != len(ref.seen): return f"statement {i} `{line}`: {len(tl.seen)} checks on tinylit, {len(ref.seen)} on the reference"
    for n, (got, want) in enumerate(zip(tl.seen[checked:], ref.seen[checked:])):
      if not np.array_equal(got, want):
        return f"statement {i} `{line}`, check {checked + n}: tinylit {got.tolist()} != reference {want.tolist()}"
    checked = len(tl.seen)
  return None


def repro(lines: list[str], device: str) -> str:
  "A standalone tinylit snippet for a program."
  head = ["import numpy as np", "from tinylit import Tensor", "from tests.fuzz_state import Tinylit",
          f"T = Tinylit({device!r})"]
  return "\n".join(head + lines + ["for v in T.seen: print(v)"])


def fuzz(device: str, seed: int, start: int, stop: int, kinds: Counter | None = None) -> list[str]:
  "Reports (what differed, and a repro) of the failing programs among `start..stop-1`; the index families drawn go to `kinds`."
  fails = []
  for i in range(start, stop):
    lines = generate(seed, i, kinds=kinds)
    if (why := run(lines, device)) is not None: fails.append(f"program {i} (seed {seed}): {why}\n{repro(lines, device)}")
  return fails


if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--device", default="CPU")
  ap.add_argument("-n", type=int, default=200)
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args()
  kinds = Counter()
  fails = fuzz(args.device, args.seed, 0, args.n, kinds)
  for f in fails[:5]: print(f, "\n")
  print("index families drawn:", ", ".join(f"{k} {kinds[k]}" for k in INDEX_KINDS))
  print(f"{len(fails)} of {args.n} programs failed on {args.device} (seed {args.seed})")
  sys.exit(1 if fails else 0)
