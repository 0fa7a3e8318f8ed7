"""The paths issue 17's overhead work made shorter (realize of a cached kernel, TinyJit replay): each shortcut keeps
what the longer path did. A kernel's bytes are counted once per ExecItem and again after TinyJit swaps an input; a
replay passes this call's variable values to kernels with none of their own; a kernel with a variable and no value
for it still refuses by name; the record of which base a ScheduleItem computes lives as long as the item; and
dedup keeps a realized node out of the cache. Every test runs on every device."""
import gc

import numpy as np
import pytest

from tinylit import Tensor, TinyJit, Variable
from tinylit.device import Buffer, Device, GlobalCounters, launch
from tinylit.dtype import dtypes
from tinylit.lazy import lazycache
from tinylit.realize import get_runner, lower_schedule_item
from tinylit.schedule import create_schedule, create_schedule_with_bases
from devices import DEVICES


@pytest.mark.parametrize("device", DEVICES)
def test_cached_kernel_realize_counts_bytes(device):
  "Realizing the same small add twice (the second from the kernel cache) counts its 3 x 64 bytes each time."
  a, b = (Tensor.ones(4, 4, device=device).contiguous().realize() for _ in range(2))
  (a + b).realize()
  for _ in range(2):
    before_mem, before_k = GlobalCounters.global_mem, GlobalCounters.kernel_count
    out = (a + b).realize()
    assert (GlobalCounters.global_mem - before_mem, GlobalCounters.kernel_count - before_k) == (3 * 64, 1)
    np.testing.assert_equal(out.numpy(), np.full((4, 4), 2, np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replay_counts_swapped_input_bytes(device):
  """A replay whose input is another buffer (of another size: the capture saw 8 floats of 16, the replay 12 of 12)
  counts that buffer's bytes, not the capture's."""
  @TinyJit
  def double(x: Tensor) -> Tensor: return (x * 2).contiguous()
  n = Variable("n", 1, 16)
  inputs = [Tensor(np.arange(16, dtype=np.float32), device=device)[:k].contiguous().realize() for k in (8, 8, 12)]
  outs, mems = [], []
  for x, k in zip(inputs, (8, 8, 12)):
    xs = x.reshape(n.bind(k))
    before = GlobalCounters.global_mem
    outs.append(double(xs).realize())   # call 1 returns a lazy tensor
    mems.append(GlobalCounters.global_mem - before)
    # the output's shape is symbolic: read its buffer's first k values
    np.testing.assert_equal(outs[-1].lazydata.base.buffer.numpy()[:k], np.arange(k, dtype=np.float32) * 2)
  assert mems[2] - mems[1] == inputs[2].lazydata.base.buffer.nbytes - inputs[1].lazydata.base.buffer.nbytes


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replay_passes_variable_values(device):
  "Kernels with and without a variable of their own, replayed with a new value each call, give this call's sums."
  @TinyJit
  def step(x: Tensor, pos) -> Tensor:
    return ((x + 1).contiguous() * Tensor(pos, device=device)).contiguous()
  p = Variable("p", 1, 100)
  x = Tensor(np.arange(4, dtype=np.float32), device=device).realize()
  for v in (3, 5, 7, 11):
    np.testing.assert_allclose(step(x, p.bind(v)).numpy(), (np.arange(4) + 1) * v)


@pytest.mark.parametrize("device", DEVICES)
def test_launch_without_variable_value_names_it(device):
  "A symbolic kernel launched with no value (None or an empty dict) for its variable raises, naming the variable."
  n = Variable("rows", 1, 8)
  x = Tensor(np.ones(4, np.float32), device=device).realize()
  (si,) = create_schedule([(x.reshape(n.bind(4)) + 1).contiguous().lazydata])
  ei = lower_schedule_item(si)
  assert ei.prg.p.vars, "the kernel should take the variable as an argument"
  for var_vals in (None, {}):
    with pytest.raises(ValueError, match="no value for variable rows"): launch(ei.prg.p, ei.prg.prg, ei.bufs, var_vals)


@pytest.mark.parametrize("device", DEVICES)
def test_schedule_names_the_bases_its_items_compute(device):
  "create_schedule_with_bases returns, with the items, the base each computes; looking is free, realize marks it."
  a = Tensor.ones(4, device=device).contiguous().realize()
  out = (a * 3).contiguous()
  (si,), (bases,) = create_schedule_with_bases([out.lazydata])
  assert bases == (out.lazydata.base,) and si.bufs[0] is out.lazydata.base.buffer
  assert out.lazydata.base.realized is None   # looking is free
  out.realize()
  assert out.lazydata.base.realized is not None
  np.testing.assert_equal(out.numpy(), np.full(4, 3, np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_realized_node_leaves_dedup_cache(device):
  "After a cached kernel ran, its node is a buffer and not in lazycache; the same graph again is a new node."
  a, b = (Tensor.ones(4, device=device).contiguous().realize() for _ in range(2))
  (a - b).realize()   # the kernel is cached now
  c = a - b
  key = c.lazydata.base.cache_key
  assert lazycache.get(key) is c.lazydata.base
  c.realize()
  assert lazycache.get(key) is None and c.lazydata.base.realized is not None
  d = a - b
  assert d.lazydata.base is not c.lazydata.base and d.lazydata.base.realized is None
  np.testing.assert_equal(d.numpy(), np.zeros(4, np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_memory_counters_rise_and_fall(device):
  "Allocating and freeing a buffer moves mem_used by its bytes and leaves the peak at the high-water mark."
  gc.collect()
  used, peak_dev = GlobalCounters.mem_used, GlobalCounters.mem_peak_per_device.get(device, 0)
  buf = Buffer(device, 1000, dtypes.float32).allocate()
  assert buf.nbytes == 4000 and GlobalCounters.mem_used - used == 4000
  assert GlobalCounters.mem_peak_per_device[device] >= max(peak_dev, GlobalCounters.mem_used_per_device[device])
  peak = GlobalCounters.mem_peak
  del buf
  gc.collect()
  assert GlobalCounters.mem_used == used and GlobalCounters.mem_peak == peak


@pytest.mark.parametrize("device", DEVICES)
def test_runner_from_cache_is_the_same(device):
  "The second realize of a graph of the same structure runs the very same compiled runner."
  a, b = (Tensor.ones(3, 5, device=device).contiguous().realize() for _ in range(2))
  asts = []
  for _ in range(2):
    (si,) = (a * b).schedule()
    asts.append(si.ast)
  assert asts[0] is asts[1]
  assert get_runner(Device.canonicalize(device), asts[0]) is get_runner(Device.canonicalize(device), asts[1])
