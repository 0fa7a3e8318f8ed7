"""One owner for the lazy graph's state (issue 18): a ScheduleItem holds buffers only, a LazyBuffer turns itself into
its buffer once its item ran (`become_buffer`), liveness comes from the holders and readers each base records, the
memory planner is a module of its own, and a graph whose structure was scheduled before gets the same kernel again.
Every test runs on every device."""
import ast, dataclasses, pathlib

import numpy as np
import pytest

from devices import DEVICES
from tinylit import Tensor
from tinylit.device import Buffer
from tinylit.helpers import Context
from tinylit.lazy import lazycache
from tinylit.ops import Ops
from tinylit.realize import run_schedule
from tinylit.schedule import ScheduleItem, create_schedule_with_bases, held_bases, intermediates, items_ran


def realized(dev: str, x) -> Tensor:
  return Tensor(np.asarray(x, dtype=np.float32), device=dev).realize()


@pytest.mark.parametrize("dev", DEVICES)
def test_schedule_items_hold_buffers_only(dev):
  x = realized(dev, np.arange(8))
  t = ((x * 2).contiguous() + 1).sum()
  sched = t.schedule()
  assert [f.name for f in dataclasses.fields(ScheduleItem)] == ["ast", "bufs"]
  assert len(sched) == 2 and all(isinstance(b, Buffer) for si in sched for b in si.bufs)
  run_schedule(sched)
  assert t.item() == sum(2 * i + 1 for i in range(8))


@pytest.mark.parametrize("dev", DEVICES)
def test_looking_is_free_and_running_realizes(dev):
  x = realized(dev, np.arange(6))
  t = x * 3 + 1
  base = t.lazydata.base
  sched, computes = create_schedule_with_bases([t.lazydata])
  assert base.realized is None and base.op is Ops.ADD and base.srcs   # looking changed nothing
  key = base.cache_key
  assert lazycache.get(key) is base
  run_schedule(sched)
  assert base.realized is None and base.srcs     # the runtime knows nothing of the lazy graph ...
  items_ran(sched, computes, complete=True)      # ... Tensor.realize tells it what ran
  assert base.realized is base.buffer and base.op is Ops.BUFFER and base.srcs == ()
  assert lazycache.get(key) is None              # become_buffer left the dedup cache
  assert t.lazydata.base is base
  np.testing.assert_array_equal(t.numpy(), np.arange(6) * 3 + 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_items_ran_partly_keeps_shared_bases_unrealized(dev):
  "An item whose output is a planned view only realizes its base once the whole schedule ran."
  x = realized(dev, np.ones(64))
  mids = []
  t = x
  for _ in range(4):
    t = (t * 2 + 1).contiguous()
    mids.append(t.lazydata.base)
  del mids[-1]
  sched, computes = create_schedule_with_bases([t.lazydata])
  planned = [si for si in sched if si.bufs[0]._base is not None]
  assert planned, "nothing was planned: the test would prove nothing"
  for si in sched: lower_and_run(si)
  items_ran(sched, computes, complete=False)
  assert all(b.realized is None for b in mids if b.buffer not in {si.bufs[0] for si in sched})
  assert t.lazydata.base.realized is not None     # the output wrote its own buffer: it is realized
  items_ran(sched, computes, complete=True)
  assert all(b.realized is not None for b in mids)
  np.testing.assert_array_equal(t.numpy(), np.full(64, 31.0))


def lower_and_run(si):
  from tinylit.realize import lower_schedule_item
  lower_schedule_item(si).run()


@pytest.mark.parametrize("dev", DEVICES)
def test_holders_and_readers_are_on_record(dev):
  x = realized(dev, np.arange(4))
  kept = (x * 2).contiguous()
  base = kept.lazydata.base
  assert [id(t) for t in base.holders] == [id(kept)]
  reader = kept + 1                               # a lazy base that reads kept's base
  assert [id(r) for r in base.readers] == [id(reader.lazydata.base)]
  view = kept.reshape(2, 2)                       # a view's tensor holds the same base
  assert len(base.holders) == 2
  del view
  assert [id(t) for t in base.holders] == [id(kept)]
  reader.realize()
  assert base.readers == []                       # a computed base reads nothing any more
  np.testing.assert_array_equal(reader.numpy(), np.arange(4) * 2 + 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_held_and_intermediate_bases(dev):
  x = realized(dev, np.arange(8))
  kept = (x * 2).contiguous()                     # a Tensor holds it
  later = (x + 5).contiguous()
  pending = later - 1                             # a lazy graph outside the schedule reads it
  total = ((kept + 1).contiguous() * later * (x - 1).contiguous()).sum()
  with Context(NO_MEMORY_PLANNER=1): sched, computes = create_schedule_with_bases([total.lazydata])
  held = held_bases(computes, [total.lazydata])
  assert kept.lazydata.base in held and later.lazydata.base in held and total.lazydata.base in held
  temps = intermediates(computes, [total.lazydata])
  assert len(temps) == 2 and kept.lazydata.base.buffer not in temps and later.lazydata.base.buffer not in temps
  run_schedule(sched)
  xs = np.arange(8, dtype=np.float32)
  np.testing.assert_array_equal(pending.numpy(), xs + 4)
  np.testing.assert_allclose(total.numpy(), ((xs * 2 + 1) * (xs + 5) * (xs - 1)).sum())


@pytest.mark.parametrize("dev", DEVICES)
def test_same_structure_same_kernel_right_buffers(dev):
  rng = np.random.default_rng(0)
  xs, ys = rng.standard_normal((2, 3, 4)).astype(np.float32)
  x, y = realized(dev, xs), realized(dev, ys)
  first, second = (x - y).schedule(), (y - x).schedule()     # one structure, the inputs swapped
  assert first[0].ast is second[0].ast
  assert first[0].bufs[1:] == second[0].bufs[1:][::-1]
  run_schedule(first)
  run_schedule(second)
  for got, want in (((x - y), xs - ys), ((y - x), ys - xs), ((x + x), xs + xs), ((x + y), xs + ys),
                    ((x.T + y.T), (xs + ys).T), ((x.T * y.T).sum(0), (xs * ys).sum(1))):
    for _ in range(2): np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
  assert len((x + x).schedule()[0].inputs) == 1 and len((x + y).schedule()[0].inputs) == 2


@pytest.mark.parametrize("dev", DEVICES)
def test_cached_kernels_with_two_inputs_on_one_buffer(dev):
  "Two bases on one Buffer, then the same structure on two buffers, and again: each kernel argument gets its own input."
  from tinylit.lazy import LazyBuffer
  a_np, b_np = np.arange(4, dtype=np.float32), np.full(4, 10, dtype=np.float32)
  buf, other = realized(dev, a_np).lazydata.base.buffer, realized(dev, b_np)
  def on(buffer): return Tensor(LazyBuffer.from_buffer(buffer, (4,)), device=dev)
  for _ in range(2):
    np.testing.assert_array_equal((on(buf) * 2 + on(buf)).numpy(), a_np * 3)
    np.testing.assert_array_equal((on(buf) * 2 + other).numpy(), a_np * 2 + b_np)


@pytest.mark.parametrize("dev", DEVICES)
def test_cached_kernels_keep_the_sign_of_zero(dev):
  "-0.0 == 0.0 in Python: the structure key must still tell the two constants apart."
  x = realized(dev, np.ones(4))
  for _ in range(2):
    pos, neg = (x - 5).maximum(0.0).numpy(), (x - 5).maximum(-0.0).numpy()
    assert not np.signbit(pos).any() and np.signbit(neg).all()


def test_no_module_imports_another_modules_private_names():
  "The layers from the lazy graph to the JIT (chapter 1's Tensor and its mixin groups, one package, are outside this check)."
  root = pathlib.Path(__file__).resolve().parents[1] / "tinylit"
  found = []
  for name in ("lazy", "schedule", "memory", "realize", "jit", "device", "search"):
    path = root / f"{name}.py"
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] != "":
        found += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_") and a.name != "__future__"]
  assert found == []


def test_the_jit_and_the_scheduler_share_one_planner():
  import tinylit.jit, tinylit.memory, tinylit.schedule
  assert tinylit.jit.internal_memory_planner is tinylit.memory.internal_memory_planner
  assert tinylit.schedule.memory_planner is tinylit.memory.memory_planner
  assert not hasattr(tinylit.schedule, "_internal_memory_planner")
