"""Chapter 6, the linearizer (nbs/06_linearize.ipynb): the launch grid (`_thread_dims`) and the order of a kernel's
UOps with its loops opened and closed (`linearize`)."""
import itertools, math

from tinylit_learn.tasks import Task, case, expect


def evaluate(u, specials: dict[str, int]) -> int:
  "The value of an index expression of SPECIALs, constants, +, *, // and % (all non-negative here)."
  from tinylit.ops import Ops
  if u.op is Ops.SPECIAL: return specials[u.arg[0]]
  if u.op is Ops.CONST: return u.arg
  a, b = (evaluate(s, specials) for s in u.src)
  return {Ops.ADD: a + b, Ops.MUL: a * b, Ops.IDIV: a // b, Ops.MOD: a % b}[u.op]


def check_thread_dims():
  from tinylit.kernel import _thread_dims, get_grouped_dims
  cuda = (2**31 - 1, 65535, 65535)
  for sizes, max_sizes in [([5], (8, 8, 8)), ([4, 3], (8, 8, 8)), ([2, 3, 4], (64, 64, 64)), ([2, 3, 4, 5], (64, 64, 64)),
                           ([3, 2, 2, 2, 3], (16, 16, 16)), ([3, 70000], cuda), ([70000, 3], cuda), ([4, 5], (64,))]:
    with case(f"loops of sizes {sizes} on a grid of at most {max_sizes}"):
      dims, grid = _thread_dims(sizes, max_sizes)
      expect(len(grid) == len(max_sizes) and all(g <= m for g, m in zip(grid, max_sizes)),
             f"the grid {grid} must have {len(max_sizes)} dimensions, none longer than {max_sizes}")
      expect(math.prod(grid) == math.prod(sizes), f"the grid {grid} must have one thread per iteration: {math.prod(sizes)}")
      if len(sizes) <= len(max_sizes) and all(s <= m for s, m in zip(reversed(sizes), max_sizes)):
        expect(list(grid[:len(sizes)]) == sizes[::-1], f"loops that fit one dimension each: expected the innermost on "
               f"dimension 0, i.e. a grid starting {tuple(sizes[::-1])}, got {grid}")
      idxs = get_grouped_dims("g", sizes, max_sizes)
      seen = set()
      for point in itertools.product(*[range(g) for g in grid]) if math.prod(grid) <= 5000 else []:
        vals = tuple(evaluate(i, {f"g{d}": p for d, p in enumerate(point)}) for i in idxs)
        expect(all(0 <= v < s for v, s in zip(vals, sizes)), f"thread {point} computes loop indices {vals}, outside {sizes}")
        seen.add(vals)
      expect(not seen or len(seen) == math.prod(sizes), f"the threads reach {len(seen)} of the {math.prod(sizes)} iterations "
             "(some iteration is done twice, another never)")
  with case("loops of sizes [100000, 100000] on a grid of at most (1024, 1024)"):
    try:
      _thread_dims([100000, 100000], (1024, 1024))
    except ValueError:
      pass
    else:
      raise AssertionError("expected a ValueError: no grid of at most (1024, 1024) holds 10**10 threads")


def check_order(uops) -> None:
  "What any right order of a kernel's UOps has: sources first, loops nested, and nothing inside a loop it doesn't need."
  from tinylit.ops import Ops
  seen, stack, loops_of = set(), [], {}
  for i, u in enumerate(uops):
    srcs = u.src[:1] if u.op is Ops.DEFINE_ACC else u.src
    if u.op is Ops.ENDRANGE:
      expect(stack and stack[-1] is u.src[0], f"position {i}: ENDRANGE closes {u.src[0].arg}, but the innermost open loop is "
             f"{stack[-1].arg if stack else 'none'}")
      stack.pop()
      continue
    missing = [s.op for s in srcs if s not in seen]
    expect(not missing, f"position {i}: {u.op} comes before its source(s) {missing}")
    seen.add(u)
    loops_of[u] = set(stack)
    if u.op is Ops.RANGE: stack.append(u)
    expect(u.op is not Ops.RANGE or all(r in stack for r in srcs if r.op is Ops.RANGE), f"position {i}: a loop outside one it needs")
    for s in u.src:
      if s.op is Ops.RANGE and u.op is not Ops.DEFINE_ACC:
        expect(s in stack, f"position {i}: {u.op} uses the index of loop {s.arg} outside that loop")
  expect(not stack, f"the loops {[r.arg for r in stack]} are never closed (ENDRANGE)")
  placed = [u for u in uops if u.op is not Ops.ENDRANGE]
  expect(len(placed) == len(set(placed)), "a UOp appears twice")
  # hoisting: a load that doesn't depend on a loop must not sit inside it (it would be read again every iteration)
  for u in uops:
    if u.op is Ops.LOAD:
      needs = {r for r in u.toposort if r.op is Ops.RANGE}
      extra = [r.arg for r in loops_of.get(u, ()) if r not in needs]
      expect(not extra, f"a load sits inside loop(s) {extra} whose index it doesn't use: it belongs outside them")


def check_linearize():
  import numpy as np
  from tinylit import Tensor
  from tinylit.device import Device
  from tinylit.kernel import linearize
  from tinylit.ops import Ops, UOp
  from tinylit.realize import get_program
  with case("an empty kernel: linearize(UOp(Ops.SINK, None, ()))"):
    got = linearize(UOp(Ops.SINK, None, ()))
    expect(got == [], f"expected [], got {got}")
  rng = np.random.default_rng(0)
  a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(6, 8), (8, 5), (6, 5)])
  programs = {"a * 2 + 1": (lambda A, B, C: A * 2 + 1, lambda: a * 2 + 1),
              "a.sum()": (lambda A, B, C: A.sum(), lambda: a.sum()),
              "a.sum(axis=1)": (lambda A, B, C: A.sum(axis=1), lambda: a.sum(axis=1)),
              "a.max(axis=0) + a.sum(axis=0)": (lambda A, B, C: A.max(axis=0) + A.sum(axis=0), lambda: a.max(axis=0) + a.sum(axis=0)),
              "a @ b + c": (lambda A, B, C: A @ B + C, lambda: a @ b + c),
              "(a @ b).relu().sum(axis=0)": (lambda A, B, C: (A @ B).relu().sum(axis=0), lambda: np.maximum(a @ b, 0).sum(axis=0))}
  for name, (tinylit_fn, numpy_fn) in programs.items():
    with case(f"the kernels of {name}, in order"):
      out = tinylit_fn(Tensor(a, device="PYTHON"), Tensor(b, device="PYTHON"), Tensor(c, device="PYTHON"))
      for si in out.schedule():
        if si.ast.op is Ops.SINK: check_order(get_program(si.ast, Device["PYTHON"].renderer).uops)
    with case(f"{name} run on the PYTHON device (it runs the UOps in your order)"):
      out = tinylit_fn(Tensor(a, device="PYTHON"), Tensor(b, device="PYTHON"), Tensor(c, device="PYTHON"))
      got, want = out.numpy(), numpy_fn()
      expect(np.allclose(got, want, rtol=1e-4, atol=1e-4), f"expected\n{np.round(want, 4)}\ngot\n{np.round(got, 4)}")


TASKS = [
  Task("06.1", "write _thread_dims: place a kernel's global loops (sizes, outermost first) on a launch grid of at most "
       "max_sizes: return each loop's (grid dimension, divisor, modulus) and the grid. The innermost loop goes on "
       "dimension 0, the next on 1...; with more loops than dimensions the outer ones share the last dimension, and loop "
       "i's index is (id // product of the sharing loops inside it) % size (no modulus, None, for the outermost). A grid "
       "too long in a dimension uses fewer dimensions; none fits: ValueError. get_grouped_dims (chapter 6) builds the "
       "SPECIALs from your answer.",
       "try max_dims = len(max_sizes), then fewer; shared = max(n - max_dims + 1, 1) outer loops share dimension n - shared.",
       check_thread_dims),
  Task("06.2", "write linearize: order a lowered kernel's UOps (sink.toposort) into a list, each RANGE opening a loop and "
       "an ENDRANGE (UOp(Ops.ENDRANGE, None, (range,))) closing it. Each UOp goes in the innermost loop whose index it "
       "depends on, so loop-invariant work is hoisted out; an accumulator (DEFINE_ACC) is declared just outside its "
       "reduce loops, and whatever reads the accumulated value (through its ASSIGN) comes after those loops close. "
       "Loops nest by LOOP_ORDER (block, global, reduce), then by axis.",
       "first compute, for each UOp, the set of loops it runs in (the union of its sources' loops; an ASSIGN's value "
       "leaves its reduce loops); then emit level by level, treating each child loop as one unit in a toposort.",
       check_linearize),
]
