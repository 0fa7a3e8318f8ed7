"""The caching allocator (tinygrad's `LRUAllocator`, chapter 8) on every device: a freed block is handed out again to
the next allocation of its size, sizes don't mix, views and external memory never enter the cache, `free_cache`
empties it, `LRU=0` turns it off, a kernel writing into a reused (dirty) block still computes the right answer,
`mem_used` counts Buffers and not the cache, and a failed allocation frees the cache and tries once more."""
import os, subprocess, sys

import numpy as np
import pytest

from tinylit import Tensor, dtypes
from tinylit.device import Buffer, Device, GlobalCounters, LRUAllocator
from tinylit.helpers import Context
from devices import DEVICES

# sizes no other test here uses, so that a block found in the cache is the one the test put there
ODD = 4 * 1237


def _allocator(device: str) -> LRUAllocator:
  allocator = Device[device].allocator
  assert isinstance(allocator, LRUAllocator), f"{device}: {type(allocator).__name__} is not an LRUAllocator"
  return allocator


def _cached(device: str, nbytes: int) -> list:
  "The blocks of `nbytes` bytes that the device's cache holds now (a copy of the list)."
  return list(_allocator(device).cache.get(nbytes, []))


def _has(blocks: list, block) -> bool: return any(b is block for b in blocks)


def _realized_buffer(t: Tensor) -> Buffer:
  buf = t.lazydata.base.realized
  assert buf is not None, "the tensor was not realized"
  return buf


@pytest.mark.parametrize("device", DEVICES)
def test_freed_block_comes_back(device):
  buf = Buffer(device, ODD // 4, dtypes.float32).allocate()
  block = buf._buf
  del buf
  assert _has(_cached(device, ODD), block), "a freed Buffer's block is not in the cache"
  again = Buffer(device, ODD // 4, dtypes.float32).allocate()
  assert again._buf is block, "the next allocation of that size did not get the cached block back"
  assert not _has(_cached(device, ODD), block), "a block handed out is still in the cache"


@pytest.mark.parametrize("device", DEVICES)
def test_sizes_dont_mix(device):
  small = Buffer(device, ODD // 4, dtypes.float32).allocate()
  block = small._buf
  del small
  # one element more: 4 bytes more, a different cache entry
  bigger = Buffer(device, ODD // 4 + 1, dtypes.float32).allocate()
  assert bigger._buf is not block
  assert _has(_cached(device, ODD), block), "another size's allocation took the cached block"
  # the same bytes in another dtype is the same size: the block may serve it (the cache is keyed by bytes)
  as_ints = Buffer(device, ODD // 4, dtypes.int32).allocate()
  assert as_ints._buf is block


@pytest.mark.parametrize("device", DEVICES)
def test_views_never_cached(device):
  base = Buffer(device, 2 * ODD, dtypes.uint8).allocate()
  base_block = base._buf
  view = Buffer(device, ODD // 4, dtypes.float32, base=base).allocate()
  before = _cached(device, ODD)
  del view
  assert len(_cached(device, ODD)) == len(before), "a view's memory went into the cache"
  del base
  assert _has(_cached(device, 2 * ODD), base_block), "the base's block should be cached, once"
  assert sum(b is base_block for b in _cached(device, 2 * ODD)) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_external_memory_never_cached(device):
  host = np.arange(ODD // 4, dtype=np.float32)
  try: t = Tensor.from_blob(host.ctypes.data, host.shape, dtype=dtypes.float32, device=device)
  except NotImplementedError as e: pytest.skip(f"{device} has no host-address buffers: {e}")
  buf = _realized_buffer(t)
  before = _cached(device, ODD)
  np.testing.assert_equal(t.numpy(), host)
  del t, buf
  assert len(_cached(device, ODD)) == len(before), "from_blob memory went into the cache"
  # and the owner's memory is untouched by what the next buffer of that size does
  other = Buffer(device, ODD // 4, dtypes.float32).copyin(memoryview(np.full(ODD // 4, -1, np.float32)))
  np.testing.assert_equal(host, np.arange(ODD // 4, dtype=np.float32))
  del other


@pytest.mark.parametrize("device", DEVICES)
def test_mem_used_counts_buffers_not_cache(device):
  used = GlobalCounters.mem_used_per_device.get(device, 0)
  buf = Buffer(device, 3 * ODD // 4, dtypes.float32).allocate()
  assert GlobalCounters.mem_used_per_device[device] - used == 3 * ODD
  del buf
  assert GlobalCounters.mem_used_per_device[device] == used
  assert len(_cached(device, 3 * ODD)) >= 1, "the block should still be held, by the cache"
  # taking it back from the cache counts again
  again = Buffer(device, 3 * ODD // 4, dtypes.float32).allocate()
  assert GlobalCounters.mem_used_per_device[device] - used == 3 * ODD
  del again


@pytest.mark.parametrize("device", DEVICES)
def test_free_cache_empties_it(device, monkeypatch):
  allocator = _allocator(device)
  bufs = [Buffer(device, 5 * ODD // 4, dtypes.float32).allocate() for _ in range(3)]
  del bufs
  assert len(allocator.cache[5 * ODD]) >= 3
  freed = []
  real_free = allocator._free
  monkeypatch.setattr(allocator, "_free", lambda opaque, nbytes: (freed.append(nbytes), real_free(opaque, nbytes)))
  held = sum(len(blocks) for blocks in allocator.cache.values())
  allocator.free_cache()
  assert all(len(blocks) == 0 for blocks in allocator.cache.values())
  assert len(freed) == held and freed.count(5 * ODD) >= 3, "free_cache must give each block back to the device"


@pytest.mark.parametrize("device", DEVICES)
def test_lru_0_turns_it_off(device, monkeypatch):
  allocator = _allocator(device)
  freed = []
  real_free = allocator._free
  monkeypatch.setattr(allocator, "_free", lambda opaque, nbytes: (freed.append(opaque), real_free(opaque, nbytes)))
  buf = Buffer(device, 7 * ODD // 4, dtypes.float32).allocate()
  block = buf._buf
  with Context(LRU=0):
    del buf
  assert not _has(_cached(device, 7 * ODD), block) and _has(freed, block), "with LRU=0 a freed block goes to _free"


@pytest.mark.parametrize("device", DEVICES)
def test_lru_0_from_the_environment(device):
  "LRU=0 in the environment, as tinygrad reads it: a fresh process caches nothing and still computes."
  code = ("import sys; from tinylit import Tensor; from tinylit.device import Device, LRU\n"
          "a = Tensor([1.0, 2.0, 3.0], device=sys.argv[1])\n"
          "for _ in range(3): (a * 2).realize()\n"
          "print(LRU.value, sum(map(len, Device[sys.argv[1]].allocator.cache.values())), (a * 2).tolist())")
  env = {**os.environ, "LRU": "0"}
  out = subprocess.run([sys.executable, "-c", code, device], env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split()[:2] == ["0", "0"], out.stdout
  assert "[2.0, 4.0, 6.0]" in out.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_realize_loop_reuses_memory(device, monkeypatch):
  "Realizing the same computation again takes no new memory from the device: every output comes from the cache."
  allocator = _allocator(device)
  a, b = Tensor.ones(33, 17, device=device).contiguous().realize(), Tensor.ones(33, 17, device=device).contiguous().realize()
  for _ in range(2): ((a + b) * a).sum(axis=1).realize()   # compile, and leave the outputs' blocks in the cache
  calls = []
  real_alloc = allocator._alloc
  monkeypatch.setattr(allocator, "_alloc", lambda nbytes: (calls.append(nbytes), real_alloc(nbytes))[1])
  for _ in range(5): np.testing.assert_allclose(((a + b) * a).sum(axis=1).numpy(), np.full(33, 34.0))
  assert calls == [], f"{device}: realizes after the first took new memory: {calls}"


DIRTY_CASES = {
  "add": (lambda x, y: x + y, lambda x, y: x + y),
  "sum over an axis": (lambda x, y: (x * y).sum(axis=1), lambda x, y: (x * y).sum(axis=1)),
  "pad": (lambda x, y: x.pad(((1, 1), (0, 2))) + 1, lambda x, y: np.pad(x, ((1, 1), (0, 2))) + 1),
  "matmul": (lambda x, y: x @ y.T, lambda x, y: x @ y.T),
  "max": (lambda x, y: x.max(axis=0), lambda x, y: x.max(axis=0)),
}


@pytest.mark.parametrize("case", DIRTY_CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_dirty_reused_block_gives_right_answer(device, case):
  "The cache is filled with blocks of NaN bytes of the output's size: the kernel writes into one and must not read it."
  tiny_fn, np_fn = DIRTY_CASES[case]
  rng = np.random.default_rng(0)
  x_np, y_np = rng.standard_normal((6, 10)).astype(np.float32), rng.standard_normal((6, 10)).astype(np.float32)
  x, y = Tensor(x_np, device=device).realize(), Tensor(y_np, device=device).realize()
  want = np_fn(x_np, y_np)
  out = tiny_fn(x, y)
  nbytes = int(np.prod(out.shape)) * 4
  garbage = [Buffer(device, nbytes, dtypes.uint8).copyin(memoryview(np.full(nbytes, 0xFF, np.uint8))) for _ in range(4)]
  dirty = [g._buf for g in garbage]
  del garbage   # four blocks of NaNs (0xFFFFFFFF) now wait in the cache for the output
  out.realize()
  assert _has(dirty, _realized_buffer(out)._buf), "the output did not land in a dirty block: the test tests nothing"
  np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


class _FlakyDevice(LRUAllocator):
  "A device's allocator with room for `room` blocks: one more raises `error`, as a full device does."
  def __init__(self, device: str, room: int, error: type[Exception]):
    super().__init__()
    self.real, self.room, self.error, self.held, self.failures = _allocator(device), room, error, 0, 0
  def _alloc(self, nbytes: int):
    if self.held >= self.room:
      self.failures += 1
      raise self.error(f"out of memory for {nbytes} bytes")
    self.held += 1
    return self.real._alloc(nbytes)
  def _free(self, opaque, nbytes: int) -> None:
    self.held -= 1
    self.real._free(opaque, nbytes)


@pytest.mark.parametrize("error", [MemoryError, RuntimeError])
@pytest.mark.parametrize("device", DEVICES)
def test_alloc_failure_frees_cache_and_retries(device, error):
  flaky = _FlakyDevice(device, room=2, error=error)
  blocks = [flaky.alloc(ODD), flaky.alloc(ODD)]
  for block in blocks: flaky.free(block, ODD)
  assert (flaky.held, len(flaky.cache[ODD])) == (2, 2)
  # another size: the device is full of cached blocks; the first try fails, the cache is freed, the second succeeds
  block = flaky.alloc(2 * ODD)
  assert (flaky.failures, flaky.held, len(flaky.cache[ODD])) == (1, 1, 0)
  # the block works
  buf = np.arange(2 * ODD, dtype=np.uint8)
  flaky.real.copyin(block, memoryview(buf))
  back = np.empty_like(buf)
  flaky.real.copyout(memoryview(back), block)
  np.testing.assert_equal(back, buf)


@pytest.mark.parametrize("device", DEVICES)
def test_alloc_failure_twice_or_other_errors_propagate(device):
  full = _FlakyDevice(device, room=0, error=MemoryError)
  with pytest.raises(MemoryError, match="out of memory"): full.alloc(ODD)
  assert full.failures == 2, "the allocation is tried exactly twice: once, and once after freeing the cache"
  wrong = _FlakyDevice(device, room=0, error=ValueError)
  with pytest.raises(ValueError): wrong.alloc(ODD)
  assert wrong.failures == 1, "only a device's out-of-memory errors (RuntimeError, MemoryError) free the cache"


@pytest.mark.parametrize("device", DEVICES)
def test_cpu_blocks_start_on_64_bytes(device):
  "The CPU's blocks start on a 64-byte boundary (a 16-float vector never straddles two cache lines), cached or not."
  if device != "CPU": pytest.skip(f"alignment is the CPU allocator's choice; {device} keeps its own")
  if os.getenv("CPU_SANITIZE"): pytest.skip("CPU_SANITIZE=1: blocks are malloc's own, for ASan (the next test)")
  sizes = [1, 4, 60, 1000, 4 * 1237, 256 * 1024, 3 << 20]
  bufs = [Buffer(device, n, dtypes.uint8).allocate() for n in sizes]
  assert [b._buf.ctypes.data % 64 for b in bufs] == [0] * len(sizes)
  assert [b._buf.nbytes for b in bufs] == sizes, "an aligned block must still be exactly the size asked for"
  del bufs
  again = [Buffer(device, n, dtypes.uint8).allocate() for n in sizes]   # from the cache now
  assert [b._buf.ctypes.data % 64 for b in again] == [0] * len(sizes)


@pytest.mark.parametrize("device", DEVICES)
def test_cpu_sanitize_keeps_blocks_exact_and_uncached(device):
  "Under CPU_SANITIZE=1 (ASan) the CPU's blocks are malloc's own, not aligned slices, and freed at once: ASan sees both."
  if device != "CPU": pytest.skip(f"CPU_SANITIZE is the CPU device's; {device} has none")
  code = ("from tinylit import dtypes; from tinylit.device import Buffer, Device\n"
          "b = Buffer('CPU', 100, dtypes.uint8).allocate()\n"
          "exact = b._buf.base is None and b._buf.nbytes == 100\n"
          "del b\n"
          "print(exact, sum(map(len, Device['CPU'].allocator.cache.values())))")
  env = {**os.environ, "CPU_SANITIZE": "1"}
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split() == ["True", "0"], out.stdout
