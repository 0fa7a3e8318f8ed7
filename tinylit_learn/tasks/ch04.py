"""Chapter 4, the scheduler (nbs/04_schedule.ipynb): phase 3's order, with the write-after-read edges of in-place
writes (`order`), and phase 1's rules, which decide the bases that get a buffer (`Decider.realizes`)."""
import numpy as np

from tinylit_learn.tasks import Task, case, expect


class Node:
  """A stand-in for a base of the lazy graph: `order` looks at a base's op, a write's target (`srcs[1].base`), and the
  base's identity, nothing else. `Node("w", target=t)` is a write (ASSIGN) into `t`; any other Node is a plain base."""
  def __init__(self, name: str, target: "Node | None" = None):
    from tinylit.ops import Ops
    self.name, self.op = name, Ops.ADD if target is None else Ops.ASSIGN
    self.srcs = () if target is None else (Node(f"{name}'s value"), target)
  @property
  def base(self): return self
  def __repr__(self): return self.name


def ordered(kernels, inputs, asked, after=None) -> list[int]:
  "`order` on kernels (each its outputs), what each loads, the outputs asked for, and each write's readers of its result."
  from tinylit.schedule import Decisions, order
  got = order(kernels, inputs, Decisions(asked=dict.fromkeys(asked), after=after or {}))
  expect(sorted(got) == list(range(len(kernels))), f"expected each of the {len(kernels)} kernels once, got {got}")
  return got


def check_order():
  with case("one chain: out reads t"):
    X, T, O = Node("x"), Node("t"), Node("out")   # x: a realized input, computed by no kernel
    got = ordered([[O], [T]], [[T], [X]], [O])
    expect(got == [1, 0], f"expected [1, 0] (t's kernel, then out's), got {got}")
  with case("depth first from the outputs asked for: two chains, asked o1 then o2"):
    X, T1, T2, O1, O2 = Node("x"), Node("t1"), Node("t2"), Node("o1"), Node("o2")
    got = ordered([[T2], [O2], [T1], [O1]], [[X], [T2], [X], [T1]], [O1, O2])
    expect(got == [2, 3, 0, 1], f"expected [2, 3, 0, 1] (o1's chain, then o2's, each kernel right after what it needs), "
           f"got {got}")
  with case("a diamond: s read by t and u, both read by out"):
    X, S, T, U, O = Node("x"), Node("s"), Node("t"), Node("u"), Node("out")
    got = ordered([[O], [U], [T], [S]], [[T, U], [S], [S], [X]], [O])
    expect(got == [3, 2, 1, 0], f"expected [3, 2, 1, 0] (out's inputs in the order it loads them, s once), got {got}")
  with case("kernels no output asked for needs come last, in list order"):
    X, P, O, Q = Node("x"), Node("p"), Node("out"), Node("q")
    got = ordered([[P], [O], [Q]], [[X], [X], [X]], [O])
    expect(got == [1, 0, 2], f"expected [1, 0, 2], got {got}")
  with case("r = w + 1; w += 10 (r, a pending reader of w, runs before the write)"):
    W = Node("w")
    write, reader = Node("w += 10", target=W), Node("r")
    got = ordered([[write], [reader]], [[], [W]], [write, reader], {write: set()})
    expect(got == [1, 0], f"expected [1, 0]: r reads w's old contents, so it runs before the write; got {got}")
  with case("x += 1; x += 1 (the second write's target is the first write)"):
    X = Node("x")
    first = Node("x += 1 (first)", target=X)
    second = Node("x += 1 (second)", target=first)
    got = ordered([[second], [first]], [[], []], [second, first], {second: set(), first: {second.srcs[0]}})
    expect(got == [1, 0], f"expected [1, 0]: a write runs after the earlier write to the same memory; got {got}")
  with case("a += b; b *= 2 (a's write reads b's old contents: it runs before b's write)"):
    A, B = Node("a"), Node("b")
    wa, wb = Node("a += b", target=A), Node("b *= 2", target=B)
    got = ordered([[wb], [wa]], [[], [B]], [wb, wa], {wa: set(), wb: set()})
    expect(got == [1, 0], f"expected [1, 0], got {got}")
  with case("a += b; b += a (b's write reads a's result, a's write reads b's old contents)"):
    A, B = Node("a"), Node("b")
    wa = Node("a += b", target=A)
    wb = Node("b += a", target=B)
    got = ordered([[wb], [wa]], [[wa], [B]], [wa, wb], {wa: {wb.srcs[0]}, wb: set()})
    expect(got == [1, 0], f"expected [1, 0], got {got}")
  with case("a kernel that reads a write's result and its target runs after the write"):
    T = Node("t")
    write = Node("t += 1", target=T)
    k = Node("k")   # reads t's memory and the write's result: it is in after[write], it wants the new contents
    got = ordered([[k], [write]], [[T, write], []], [k], {write: {k}})
    expect(got == [1, 0], f"expected [1, 0]: k reads what the write computes, so no write-after-read edge; got {got}")
  with case("a write whose kernel loads its own target"):
    T = Node("t")
    write = Node("t.assign(...)", target=T)
    got = ordered([[write]], [[T]], [write], {write: set()})
    expect(got == [0], f"expected [0] (a kernel never waits for itself), got {got}")
  with case("two writes that each read the other's old contents: a cycle"):
    A, B = Node("a"), Node("b")
    wa, wb = Node("a.assign(b)", target=A), Node("b.assign(a)", target=B)
    try:
      got = ordered([[wa], [wb]], [[B], [A]], [wa, wb], {wa: set(), wb: set()})
    except RuntimeError:
      pass
    else:
      raise AssertionError(f"expected a RuntimeError (each must run before the other), got {got}")
  # the real pipeline: the order decides what the kernels read
  from tinylit import Tensor
  def arange(n): return Tensor(np.arange(n, dtype=np.float32))
  with case("the pipeline: r = w + 1; w += 10"):
    w = arange(4)
    r = w + 1
    w += 10
    w.realize()
    expect(r.numpy().tolist() == [1, 2, 3, 4], f"r: expected [1, 2, 3, 4] (w's old contents + 1), got {r.numpy().tolist()}")
    expect(w.numpy().tolist() == [10, 11, 12, 13], f"w: expected [10, 11, 12, 13], got {w.numpy().tolist()}")
  with case("the pipeline: x += 1; x += 1"):
    x = arange(4)
    x += 1
    x += 1
    expect(x.numpy().tolist() == [2, 3, 4, 5], f"expected [2, 3, 4, 5], got {x.numpy().tolist()}")
  with case("the pipeline: a += b; b += a, both realized at once"):
    a, b = arange(4), Tensor(np.full(4, 10, dtype=np.float32))
    a += b
    b += a
    Tensor.realize(b, a)
    expect(a.numpy().tolist() == [10, 11, 12, 13] and b.numpy().tolist() == [20, 21, 22, 23],
           f"expected a = [10, 11, 12, 13] and b = [20, 21, 22, 23], got {a.numpy().tolist()} and {b.numpy().tolist()}")
  with case("the pipeline: softmax over rows (three kernels, each after what it loads)"):
    xn = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
    got = Tensor(xn).softmax(1).numpy()
    want = np.exp(xn - xn.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    expect(np.allclose(got, want, rtol=1e-4), f"expected\n{np.round(want, 4)}\ngot\n{np.round(got, 4)}")


def kernel_count(*tensors) -> int:
  "Phase 1 alone: how many kernels the Decider makes for `tensors` (`_schedule`'s first line)."
  from tinylit.schedule import Decider
  # what create_schedule hands the Decider: no constant (it stays a number), no base that has its buffer already
  lbs = [t.lazydata for t in tensors if not t.lazydata.is_unrealized_const()]
  return len(Decider(list(dict.fromkeys(lb.base for lb in lbs if lb.base.realized is None))).decide().kernels)


def np_softmax(a):
  e = np.exp(a - a.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


def sum_of(t, n: int):
  "t plus n - 1 buffers of their own holding t + 1, t + 2, ...: a sum whose kernel loads n buffers."
  from tinylit import Tensor
  return sum((Tensor(t.numpy() + i) for i in range(1, n)), t)


def check_realizes():
  from tinylit import Tensor
  inputs = (np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(24, dtype=np.float32).reshape(2, 3, 4),
            np.arange(64, dtype=np.float32).reshape(8, 8) / 64, np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096)
  # (the expression, its kernels, it on Tensors a, c, m, x, it in numpy); each case builds its own input Tensors: the
  # lazy graph dedups equal ops, so a `contiguous()` in one case would force the same base in the next
  cases = [
    ("(a * 2 + 1).exp() (rule 1)", 1, lambda a, c, m, x: (a * 2 + 1).exp(), lambda a, c, m, x: np.exp(a * 2 + 1)),
    ("(a + 1).sum(0) (rule 2)", 1, lambda a, c, m, x: (a + 1).sum(0), lambda a, c, m, x: (a + 1).sum(0)),
    ("a.sum(0).sum() (a second reduce)", 2, lambda a, c, m, x: a.sum(0).sum(), lambda a, c, m, x: a.sum(0).sum()),
    ("(a.sum(1, keepdim=True) * a).sum() (a reduce read through an expand)", 2,
     lambda a, c, m, x: (a.sum(1, keepdim=True) * a).sum(), lambda a, c, m, x: (a.sum(1, keepdims=True) * a).sum()),
    ("a.T.sum(1) (a permuted input is a view)", 1, lambda a, c, m, x: a.T.sum(1), lambda a, c, m, x: a.T.sum(1)),
    ("a.max(1) + 1 (rule 3: a reshaped reduce read in order)", 1, lambda a, c, m, x: a.max(1) + 1,
     lambda a, c, m, x: a.max(1) + 1),
    ("a - a.max(1, keepdim=True) (rule 4: a reduce read through an expand)", 2, lambda a, c, m, x: a - a.max(1, keepdim=True),
     lambda a, c, m, x: a - a.max(1, keepdims=True)),
    ("c.sum(2).T + 1 (rule 4: a reduce read through a permute)", 2, lambda a, c, m, x: c.sum(2).T + 1,
     lambda a, c, m, x: c.sum(2).T + 1),
    ("a.sum() + a.max() (rule 4: two reduces)", 2, lambda a, c, m, x: a.sum() + a.max(), lambda a, c, m, x: a.sum() + a.max()),
    ("s + s.sum() with s = (a * 2).contiguous() (rule 4: alone)", 3, lambda a, c, m, x: (s := (a * 2).contiguous()) + s.sum(),
     lambda a, c, m, x: a * 2 + (a * 2).sum()),
    ("a.softmax(1)", 3, lambda a, c, m, x: a.softmax(1), lambda a, c, m, x: np_softmax(a)),
    ("m.exp() @ m, m of 8x8 (rule 4: a transcendental read through a broadcast of 8)", 2, lambda a, c, m, x: m.exp() @ m,
     lambda a, c, m, x: np.exp(m) @ m),
    ("(1 / (m + 1)) @ m (rule 4: a division read through a broadcast of 8)", 2, lambda a, c, m, x: (1 / (m + 1)) @ m,
     lambda a, c, m, x: (1 / (m + 1)) @ m),
    ("(m * 2) @ m (a cheap op is recomputed)", 1, lambda a, c, m, x: (m * 2) @ m, lambda a, c, m, x: (m * 2) @ m),
    ("(m * 2 + 1) @ m (4 bases, each element read 8 times: recomputed)", 1, lambda a, c, m, x: (m * 2 + 1) @ m,
     lambda a, c, m, x: (m * 2 + 1) @ m),
    ("(x * 2 + 1) @ x, x of 64x64 (4 bases, each element read 64 times: stored)", 2, lambda a, c, m, x: (x * 2 + 1) @ x,
     lambda a, c, m, x: (x * 2 + 1) @ x),
    ("m.exp().reshape(8, 1, 8).expand(8, 2, 8) + 1 (an exp read through a broadcast of 2: recomputed)", 1,
     lambda a, c, m, x: m.exp().reshape(8, 1, 8).expand(8, 2, 8) + 1,
     lambda a, c, m, x: np.broadcast_to(np.exp(m)[:, None], (8, 2, 8)) + 1),
    ("m.exp().reshape(8, 1, 8).expand(8, 4, 8) + 1 (an exp read through a broadcast of 4: stored)", 2,
     lambda a, c, m, x: m.exp().reshape(8, 1, 8).expand(8, 4, 8) + 1,
     lambda a, c, m, x: np.broadcast_to(np.exp(m)[:, None], (8, 4, 8)) + 1),
    ("e.exp() @ e with e = m[:4, :4] (fewer than 64 elements: recomputed)", 1, lambda a, c, m, x: (e := m[:4, :4]).exp() @ e,
     lambda a, c, m, x: np.exp(m[:4, :4]) @ m[:4, :4]),
    ("h * h.sum() with h = m + m2 + m3 + m4 (two kernels read 4 buffers through h: stored)", 3,
     lambda a, c, m, x: (h := sum_of(m, 4)) * h.sum(), lambda a, c, m, x: (h := m * 4 + 6) * h.sum()),
    ("h * h.sum() with h = m + m2 (two kernels read 2 buffers through h: recomputed)", 2,
     lambda a, c, m, x: (h := sum_of(m, 2)) * h.sum(), lambda a, c, m, x: (h := m * 2 + 1) * h.sum()),
    ("h * h.sum() with h = e + e2 + e3 + e4, e of 4x4 (fewer than 64 elements: recomputed)", 2,
     lambda a, c, m, x: (h := sum_of(m[:4, :4], 4)) * h.sum(), lambda a, c, m, x: (h := m[:4, :4] * 4 + 6) * h.sum()),
  ]
  # first a graph of constants: an input Tensor from numpy allocates memory (chapter 8's allocator, a task of its own)
  with case("Tensor.full((3, 4), 2.0).contiguous() (rule 4: alone; its constant is computed inline)"):
    got = kernel_count(Tensor.full((3, 4), 2.0).contiguous())
    expect(got == 1, f"expected 1 kernel, got {got}")
  for name, want, tinylit_fn, _ in cases:
    with case(f"kernels of {name}"):
      got = kernel_count(tinylit_fn(*map(Tensor, inputs)))
      expect(got == want, f"expected {want} kernel{'s' * (want != 1)}, got {got}")
  with case("t = a * 2 and t + 1, both asked for: t is stored, not recomputed"):
    t = Tensor(inputs[0]) * 2
    got = kernel_count(t, t + 1)
    expect(got == 2, f"expected 2 kernels, got {got}")
  with case("s = a.sum(1) and s + 1, both asked for: the reduce is stored, though s + 1 reads it in order"):
    s = Tensor(inputs[0]).sum(1)
    got = kernel_count(s, s + 1)
    expect(got == 2, f"expected 2 kernels, got {got}")

  def read_too_late(x, reduce: bool):
    "old = x + 1 (or x.sum(1)), then x.assign(x * 2): old, held by no Tensor, is read by the kernel after the write."
    old = x.sum(1) if reduce else x + 1
    x.assign(x * 2)
    return old + x[:, 0] if reduce else old * x
  W = np.arange(16, dtype=np.float32).reshape(4, 4)
  for reduce, want in ((False, (W + 1) * W * 2), (True, W.sum(1) + W[:, 0] * 2)):
    name = "old = x.sum(1); x.assign(x * 2); old + x[:, 0]" if reduce else "old = x + 1; x.assign(x * 2); old * x"
    with case(f"kernels of {name} (rule 6: old is stored before the write)"):
      got = kernel_count(read_too_late(Tensor(W), reduce))
      expect(got == 3, f"expected 3 kernels (old, the write, the result), got {got}")
    with case(f"the value of {name}"):
      got = read_too_late(Tensor(W), reduce).numpy()
      expect(np.allclose(got, want), f"expected\n{want}\ngot\n{got}")

  def cross_writes():
    "a.assign(b + 1) and b.assign(a + 1), each from the other's old contents: Decider.cycles forces b's value first."
    a, b = Tensor(np.arange(4, dtype=np.float32)), Tensor(np.full(4, 10, dtype=np.float32))
    b_value = a + 1
    a.assign(b + 1)
    b.assign(b_value)
    return a, b
  with case("kernels of a.assign(b + 1) and b.assign(a + 1) from the old a (forced: b's value is stored before both)"):
    got = kernel_count(*cross_writes())
    expect(got == 3, f"expected 3 kernels, got {got}")
  with case("the values of a.assign(b + 1) and b.assign(a + 1) from the old a"):
    a, b = cross_writes()
    Tensor.realize(a, b)
    expect(a.numpy().tolist() == [11] * 4 and b.numpy().tolist() == [1, 2, 3, 4],
           f"expected a = [11, 11, 11, 11] and b = [1, 2, 3, 4], got {a.numpy().tolist()} and {b.numpy().tolist()}")
  # the values, through the whole pipeline
  with case("the value of Tensor.full((3, 4), 2.0).contiguous()"):
    got = Tensor.full((3, 4), 2.0).contiguous().numpy()
    expect(got.tolist() == [[2.0] * 4] * 3, f"expected 2.0 everywhere, got {got.tolist()}")
  for name, _, tinylit_fn, numpy_fn in cases:
    with case(f"the value of {name}"):
      got, want = tinylit_fn(*map(Tensor, inputs)).numpy(), numpy_fn(*inputs)
      expect(got.shape == want.shape and np.allclose(got, want, rtol=1e-4),
             f"expected\n{np.round(want, 4)}\ngot\n{np.round(got, 4)}")


TASKS = [
  Task("04.1", "write order(kernels, inputs, d): phase 3, the kernels (each the list of bases it stores; inputs[i]: the "
       "bases kernel i loads) as a list of their indices, in an order where each kernel runs after the kernels that "
       "compute what it loads, a write (an ASSIGN output) after the kernel that computes its target (o.srcs[1].base), and "
       "a kernel that loads a write's target, and none of whose outputs is in d.after[write] (the bases that read the "
       "write's result), before that write (write after read). A toposort, depth first: from the kernels of the outputs "
       "asked for (d.asked, in order), then every kernel left in list order; a kernel's dependencies are visited in that "
       "order (its inputs' producers, its target's, then the readers it waits for), and a kernel goes right after them. "
       "A kernel reached again while on the path is a cycle: raise RuntimeError. Chapter 4's 'Rule 6' section and the "
       "cell before `order`.",
       "a dict base -> the kernel that stores it; a list of dependencies per kernel; then an iterative DFS with a state "
       "per kernel: new, on the path, placed.", check_order),
  Task("04.2", "write Decider.realizes(b, reads): phase 1's rules, in chapter order, as one predicate: does base `b` get "
       "a buffer of its own? `reads` holds one (kernel, view, reduce axes) triple per way a kernel reads it. True if b "
       "is asked for (self.asked), forced (self.forced) or `alone`; False for a constant (CONST); then, with the kernels that read "
       "it (self.kernel[k] for each read), True if rule 6's self.read_too_late(b, kernels); a REDUCE_AXIS is stored "
       "unless self.fuses(b, reads, kernels) (rule 3, which also joins the reduce to its reader's kernel: ask it last); "
       "any other base with 64+ elements is stored (rule 4) if several kernels read it and inlining it in each loads "
       "more than storing it once: with k kernels and r = len(read_by(b, (Ops.REDUCE_AXIS,))) buffers (a reduce "
       "counts as one), (k - 1) * (r - 1) > 2; or if some read goes through a broadcast that makes it costly to "
       "recompute: the view's _expansion(st) is 4 or more, and costly(b, that expansion). Chapter 4's 'Where kernels "
       "split, and why', 'Rule 4 again' and the cell before Decider.",
       "an if per rule, the broadcast rule last as any(...) over the reads; sizes may be symbolic (a KV cache's "
       "start_pos): compare them with resolve(...).", check_realizes),
]
