"""The memory planner (chapter 4): intermediates that nothing holds share memory when their lifetimes allow.
Every test runs on every device. Results must be the same bits with and without the planner, buffers a live
Tensor (or a live lazy graph, or an autograd context) holds must never be shared, the peak must really go down,
and NO_MEMORY_PLANNER=1 must really turn it all off."""
import os, subprocess, sys, weakref

import numpy as np
import pytest

from devices import DEVICES
from tinylit import Tensor, TinyJit, nn
from tinylit.device import GlobalCounters
from tinylit.helpers import Context
from tinylit.realize import run_schedule
import tinylit.realize as realize
from tinylit.memory import internal_memory_planner, planned_memory
from tinylit.schedule import create_schedule

def fresh(device: str, *shape: int) -> Tensor:
  """A new realized input, the same numbers on every call with that shape: the lazy graph dedups, so every run of
  a graph needs inputs of its own, and the runs must see the same values."""
  return Tensor(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32), device=device).realize()


def planned(sched) -> list:
  "The buffers of a schedule that the planner turned into views of shared blocks."
  return [b for si in sched for b in si.bufs if b._base is not None]


# ---- graphs with several kernels, each a function of fresh inputs returning the tensors to realize
def chain(dev):
  t = fresh(dev, 64, 32)
  for _ in range(5): t = (t * 2 + 1).contiguous()
  return [t]

def permuted_chain(dev):   # each kernel reads its input transposed
  t = fresh(dev, 32, 32)
  for _ in range(4): t = (t.T * 0.5 - 1).contiguous()
  return [t]

def mixed_dtypes(dev):     # float kernels reading int8 intermediates at the same element: blocks of two sizes
  x = fresh(dev, 256)
  widened = ((x * 9).cast("int8").contiguous().cast("float32") - 1).contiguous()   # its int8 input dies here
  small = (x * 40).cast("int8").contiguous()
  wide = (small.cast("float32") * 3).contiguous()
  return [(widened * 2).sum() + (wide + 1).sum(), (wide * small.cast("float32")).max()]

def reduce_epilogue(dev):  # a kernel with a reduce reads a dying intermediate at the element it writes
  x, z = fresh(dev, 16, 1), fresh(dev, 16, 8)
  y = (x * 2).contiguous()
  return [((z.sum(1, keepdim=True) + y).contiguous() * 2).contiguous()]

def softmax_and_sums(dev):
  x = fresh(dev, 16, 40)
  e = (x - x.max(1, keepdim=True)).exp().contiguous()
  sm = e / e.sum(1, keepdim=True)
  return [sm.sum(0), (sm * x).sum()]

def output_is_intermediate(dev):   # `a` is asked for *and* read by the other output: it must keep its own memory
  x = fresh(dev, 128)
  a = (x * 3).contiguous()
  b = (((a + 1).contiguous() + 2).contiguous() * a).contiguous()   # two intermediates: one alone has none to share with
  return [a, b, (b - a).sum()]

def assign_with_pending_reader(dev):   # the reader of w's old value must still run before w is overwritten
  w = fresh(dev, 48)
  # the reader allocates more than anything on the assign's path, so an order chosen only to save memory would run
  # the assign first (the write runs at once: its own schedule holds the reader, and the planner plans that one)
  old = ((w.reshape(48, 1).expand(48, 4) * 2).contiguous() + 1).contiguous()
  w.assign(((w + 1).contiguous() * 3).contiguous())
  return [old, w]

GRAPHS = [chain, permuted_chain, mixed_dtypes, reduce_epilogue, softmax_and_sums, output_is_intermediate]


def run_graph(graph, dev) -> list[np.ndarray]:
  outs = graph(dev)
  outs[0].realize(*outs[1:])
  return [o.numpy() for o in outs]


@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.__name__)
@pytest.mark.parametrize("dev", DEVICES)
def test_same_results_with_and_without_planner(graph, dev):
  with Context(NO_MEMORY_PLANNER=1): want = run_graph(graph, dev)
  got = run_graph(graph, dev)
  for w, g in zip(want, got): np.testing.assert_array_equal(g, w)


def test_every_graph_is_really_planned():
  "The graphs above would test nothing if the planner left them alone: each one has planned buffers, most share."
  sharing = set()
  for graph in GRAPHS:
    outs = graph("CPU")
    sched = outs[0].schedule(*outs[1:])
    assert planned(sched), graph.__name__
    before, after = planned_memory([si.bufs for si in sched])
    if after < before: sharing.add(graph.__name__)
    # an output is written into its own buffer, which nothing else uses (blocks are buffers of their own)
    asked = {o.lazydata.base.buffer for o in outs}
    assert all(si.bufs[0]._base is None for si in sched if si.bufs[0] in asked), graph.__name__
    assert len([si for si in sched if si.bufs[0] in asked]) == len(asked), graph.__name__
    run_schedule(sched)
  # in the other two, the intermediates' lifetimes all overlap
  assert sharing == {"chain", "permuted_chain", "mixed_dtypes", "softmax_and_sums"}


def mlp_step(dev, steps: int = 2, sizes=(784, 256, 10), batch: int = 128):
  "SGD steps of an MLP with a relu hidden layer: its losses and final weights."
  rng = np.random.default_rng(1)
  n_in, n_hid, n_out = sizes
  def param(*shape): return Tensor((rng.standard_normal(shape) * 0.05).astype(np.float32), device=dev, requires_grad=True)
  w1, b1, w2, b2 = param(n_hid, n_in), param(n_hid), param(n_out, n_hid), param(n_out)
  x = Tensor(rng.standard_normal((batch, n_in)).astype(np.float32), device=dev)
  y = Tensor(rng.integers(0, n_out, batch).astype(np.int32), device=dev)
  opt = nn.optim.SGD([w1, b1, w2, b2], lr=0.01)
  losses = []
  for _ in range(steps):
    with Tensor.train():
      opt.zero_grad()
      loss = ((x @ w1.T + b1).relu() @ w2.T + b2).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
    losses.append(loss.numpy())
  return losses, [p.numpy() for p in (w1, b1, w2, b2)]


@pytest.mark.parametrize("dev", DEVICES)
def test_mlp_training_step_same_with_and_without_planner(dev):
  with Context(NO_MEMORY_PLANNER=1): want_losses, want_weights = mlp_step(dev)
  got_losses, got_weights = mlp_step(dev)
  np.testing.assert_array_equal(got_losses, want_losses)
  for w, g in zip(want_weights, got_weights): np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dev", DEVICES)
def test_planned_buffers_belong_to_nothing_alive(dev):
  "Every LazyBuffer whose memory was shared is gone once the schedule ran: the planner's prediction holds."
  outs = softmax_and_sums(dev) + chain(dev)
  sched = create_schedule([o.lazydata for o in outs])
  # the bases whose own buffer no item uses: computed into a planned view, or inlined into a kernel
  planned_bases = [lb for lb in _graph_bases(outs) if lb.buffer not in {b for si in sched for b in si.bufs}]
  shared = [weakref.ref(lb) for lb in planned_bases]
  del planned_bases
  assert len(shared) >= 5
  out_buffers = {o.lazydata.base.buffer for o in outs}
  assert not any(b in out_buffers for b in planned(sched))   # outputs keep buffers of their own
  del sched
  outs[0].realize(*outs[1:])   # the same schedule again, run, and its bases marked realized: their graph goes
  assert [r() for r in shared] == [None] * len(shared)


@pytest.mark.parametrize("dev", DEVICES)
def test_buffers_held_by_live_tensors_are_never_shared(dev):
  x = fresh(dev, 96)
  held = (x * 2).contiguous()                     # a Tensor holds it: never shared
  lazy_reader = (held + 1).contiguous() * 5       # not realized now, but reads `held` later
  inner = ((x + 1).contiguous() * 3).contiguous()
  pending = inner - 2                             # a lazy graph holds `inner` (a kernel below) past this schedule
  out = ((held * inner).contiguous() + (held - inner).contiguous()).contiguous()
  sched = out.schedule()
  protected = {held.lazydata.base.buffer, inner.lazydata.base.buffer, out.lazydata.base.buffer}
  assert planned(sched), "nothing was planned: the test would prove nothing"
  for si in sched:
    for b in si.bufs:
      assert b not in protected or b._base is None
  run_schedule(sched)
  xs = x.numpy()
  np.testing.assert_allclose(held.numpy(), xs * 2, rtol=1e-6)
  np.testing.assert_allclose(lazy_reader.numpy(), (xs * 2 + 1) * 5, rtol=1e-6)
  np.testing.assert_allclose(pending.numpy(), (xs + 1) * 3 - 2, rtol=1e-6)
  np.testing.assert_allclose(out.numpy(), xs * 2 * (xs + 1) * 3 + xs * 2 - (xs + 1) * 3, rtol=1e-5)


@pytest.mark.parametrize("dev", DEVICES)
def test_forward_realized_before_backward(dev):
  "Autograd keeps forward values for the backward pass: realizing the forward first must not free them."
  def run():
    x = Tensor(np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8), device=dev, requires_grad=True)
    w = Tensor(np.linspace(1, -1, 64, dtype=np.float32).reshape(8, 8), device=dev, requires_grad=True)
    loss = ((x @ w).relu().exp() * (x - w).sigmoid()).sum()
    loss.realize()
    loss.backward()
    return loss.numpy(), x.grad.numpy(), w.grad.numpy()
  with Context(NO_MEMORY_PLANNER=1): want = run()
  for w_, g in zip(want, run()): np.testing.assert_array_equal(g, w_)


def peak_while_realizing(graph, dev) -> int:
  outs = graph(dev)
  GlobalCounters.reset()
  before = GlobalCounters.mem_used_per_device.get(dev, 0)
  outs[0].realize(*outs[1:])
  return GlobalCounters.mem_peak_per_device[dev] - before


@pytest.mark.parametrize("dev", DEVICES)
def test_peak_goes_down(dev):
  with Context(NO_MEMORY_PLANNER=1): without = peak_while_realizing(chain, dev)
  with_planner = peak_while_realizing(chain, dev)
  nbytes = 64 * 32 * 4
  # five kernels, four intermediates and an output: without the planner all five buffers are held at the end; with
  # it the four intermediates take turns in two blocks (each kernel reads one while it writes the next)
  assert without == 5 * nbytes
  assert with_planner == 3 * nbytes
  with Context(NO_MEMORY_PLANNER=1): without = peak_while_realizing(permuted_chain, dev)
  with_planner = peak_while_realizing(permuted_chain, dev)
  assert (without, with_planner) == (4 * 32 * 32 * 4, 3 * 32 * 32 * 4)


@pytest.mark.parametrize("dev", DEVICES)
def test_no_kernel_writes_over_what_it_reads(dev):
  for graph in (chain, permuted_chain, mixed_dtypes, reduce_epilogue):
    outs = graph(dev)
    sched = outs[0].schedule(*outs[1:])
    assert planned(sched), graph.__name__   # the planner shared something
    for si in sched:   # the blocks a kernel writes and the ones it reads are different memory
      written = {b._base or b for b in si.outputs}
      assert not written & {b._base or b for b in si.inputs}, graph.__name__
    run_schedule(sched)


def test_no_memory_planner_turns_it_off():
  outs = softmax_and_sums("CPU") + chain("CPU")
  with Context(NO_MEMORY_PLANNER=1): sched = create_schedule([o.lazydata for o in outs])
  assert planned(sched) == []
  assert all(b._base is None for si in sched for b in si.bufs)   # every kernel writes its own base's buffer
  code = ("from tinylit import Tensor\nimport numpy as np\nt = Tensor(np.ones(16, np.float32)).realize()\n"
          "for _ in range(4): t = (t * 2).contiguous()\nprint(sum(b._base is not None for si in t.schedule() for b in si.bufs))")
  env = {k: v for k, v in os.environ.items() if k != "NO_MEMORY_PLANNER"}
  runs = [subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True, check=True)
          for extra in ({}, {"NO_MEMORY_PLANNER": "1"})]
  assert [int(r.stdout) for r in runs] == [6, 0]   # 3 intermediates, each written and read once; then none


def test_debug_line(capsys):
  outs = chain("CPU")
  with Context(DEBUG=1): outs[0].realize()
  assert capsys.readouterr().out.splitlines()[0] == \
    "scheduled 5 kernels, intermediates 32.8 KB -> 16.4 KB with the memory planner (50% saved)"
  outs = chain("CPU")
  with Context(DEBUG=1, NO_MEMORY_PLANNER=1): outs[0].realize()
  assert capsys.readouterr().out.splitlines()[0] == "scheduled 5 kernels, intermediates 32.8 KB (memory planner off)"


@pytest.mark.parametrize("dev", DEVICES)
def test_planner_over_jit_captured_kernels(dev):
  """What TinyJit can do with the planner: plan the captured kernels across all the schedules of a call, keeping
  the inputs and every buffer that isn't a view (only the planner makes views; anything else may belong to a tensor)."""
  rng = np.random.default_rng(2)
  w = Tensor(rng.standard_normal((24, 24)).astype(np.float32), device=dev).realize()
  def step(x: Tensor) -> Tensor:
    h = ((x @ w).relu().contiguous() * 2).contiguous()
    first = (h.exp() / (1 + h).sum()).realize()                    # one schedule ...
    return ((first @ w).contiguous() - first.max()).realize()      # ... and another
  f = TinyJit(step)
  xs = [rng.standard_normal((24, 24)).astype(np.float32) for _ in range(4)]
  for x in xs[:3]: f(Tensor(x, device=dev))                         # run, capture, replay
  keep = {b for ei in f.jit_cache for b in ei.bufs if b._base is None}
  assigned = internal_memory_planner([ei.bufs for ei in f.jit_cache], keep)
  assert assigned, "the captured kernels share nothing: the test would prove nothing"
  before, after = planned_memory([ei.bufs for ei in f.jit_cache])
  for ei in f.jit_cache: ei.bufs = [assigned.get(b, b) for b in ei.bufs]
  assert planned_memory([ei.bufs for ei in f.jit_cache])[1] <= after < before
  got = f(Tensor(xs[3], device=dev)).numpy()
  with Context(NO_MEMORY_PLANNER=1): want = step(Tensor(xs[3], device=dev)).numpy()
  np.testing.assert_array_equal(got, want)
  with Context(NO_MEMORY_PLANNER=1):
    assert internal_memory_planner([ei.bufs for ei in f.jit_cache], keep) == {}


@pytest.mark.parametrize("dev", DEVICES)
def test_a_schedule_cut_short_leaves_no_stale_intermediate(dev, monkeypatch):
  """A kernel fails halfway through `realize`: the items before it ran (run_schedule took them off its list, and
  realize marks what they computed), but the intermediates they wrote had their memory shared, so they must stay
  unrealized (computed again next time), not become buffers whose block a later kernel has already overwritten."""
  x = fresh(dev, 64)
  t = chain_of(x, 6)
  assert planned(t.schedule())
  lower, lowered = realize.lower_schedule_item, []
  def fail(*args, **kwargs): raise RuntimeError("the fifth kernel failed")
  def fifth_fails(si):
    lowered.append(ei := lower(si))
    if len(lowered) == 5: ei.run = fail
    return ei
  monkeypatch.setattr(realize, "lower_schedule_item", fifth_fails)
  with pytest.raises(RuntimeError, match="fifth kernel failed"): t.realize()
  monkeypatch.undo()
  assert t.lazydata.base.realized is None
  np.testing.assert_allclose(t.numpy(), reference_chain(x.numpy(), 6), rtol=1e-6)


def chain_of(x: Tensor, n: int) -> Tensor:
  for i in range(n): x = (x * 2 + i).contiguous()
  return x


def reference_chain(x: np.ndarray, n: int) -> np.ndarray:
  for i in range(n): x = x * 2 + i
  return x


def _graph_bases(outs) -> list:
  "The unrealized bases behind the tensors `outs`."
  seen, stack = {}, [o.lazydata.base for o in outs]
  while stack:
    lb = stack.pop()
    if lb in seen or lb.realized is not None: continue
    seen[lb] = None
    stack.extend(s.base for s in lb.srcs)
  return list(seen)


def test_scheduling_leaves_no_lazybuffer_to_the_cycle_collector():
  """Refcounting frees an intermediate's LazyBuffer (and its Buffer) as soon as the schedule has run. A reference cycle
  would keep it until Python's cycle collector happens to run: memory held longer, the planner seeing a holder that
  comes and goes, and later graphs deduplicated against it or not depending on when that is."""
  import gc
  from tinylit.lazy import LazyBuffer
  gc.collect()
  gc.disable()
  gc.set_debug(gc.DEBUG_SAVEALL)
  try:
    mlp_step("CPU", steps=1, sizes=(16, 8, 4), batch=4)           # SGD: in-place writes and their pending readers
    outs = assign_with_pending_reader("CPU")
    outs[0].realize(*outs[1:])
    gc.collect()
    stuck = [o for o in gc.garbage if isinstance(o, LazyBuffer)]
  finally:
    gc.set_debug(0)
    gc.garbage.clear()
    gc.enable()
  assert stuck == []
