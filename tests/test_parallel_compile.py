"""Compiling a schedule's new kernels at once (chapter 8's `compile_async`, called by chapter 8b's `run_schedule`):
the results are the ones that compiling each kernel just before it runs gives, every program is compiled once, and
the compiles run on the pool's worker threads. A compiler with `compile_batch` (CPU's and CL's) compiles the sources
that wait together in one call, one cache entry per source, falling back to one at a time when the batch fails; the
others (PYTHON, CUDA) get one source per call. On every device."""
import os, threading, time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tinylit import Tensor
from tinylit.device import Device
import tinylit.device as device_module
from tinylit.helpers import Context
from tinylit.ops import Ops
from tinylit.realize import get_program, method_cache
from devices import DEVICES


class CountingCompiles:
  """Wraps the device compiler's `compile` and `compile_batch` (the real work, below the disk cache): records the
  sources of each call, a list (one source, unless a batch), and the thread it ran on. `delay`: seconds each call
  sleeps first; `hold`: an Event that the call of that one source waits for (a worker kept busy)."""
  def __init__(self, compiler, delay: float = 0.0, hold: tuple[str, threading.Event] | None = None):
    self.compiler, self.delay, self.hold, self.calls, self.lock = compiler, delay, hold, [], threading.Lock()
    self.in_batch = threading.local()
  def _record(self, srcs: list[str]) -> None:
    with self.lock: self.calls.append((srcs, threading.current_thread().name))
    time.sleep(self.delay)
    if self.hold is not None and srcs == [self.hold[0]]: self.hold[1].wait(10)
  def __enter__(self):
    cls = type(self.compiler)
    def compile(src: str) -> bytes:
      if not getattr(self.in_batch, "on", False): self._record([src])   # a batch's own compile is recorded as the batch
      return cls.compile(self.compiler, src)
    self.compiler.compile = compile
    if cls.compile_batch is not None:
      def compile_batch(srcs: list[str]) -> bytes:
        self._record(list(srcs))
        self.in_batch.on = True
        try: return cls.compile_batch(self.compiler, srcs)
        finally: self.in_batch.on = False
      self.compiler.compile_batch = compile_batch
    return self
  def __exit__(self, *exc):
    del self.compiler.compile
    self.compiler.__dict__.pop("compile_batch", None)
  @property
  def sources(self) -> list[str]: return [src for srcs, _ in self.calls for src in srcs]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
  "An empty compile cache: every new kernel is really compiled."
  monkeypatch.setenv("TINYLIT_CACHE", str(tmp_path))


@pytest.fixture
def pool_of(monkeypatch):
  "Replace the compile pool with one of `n` workers for this test (the module keeps one pool per process)."
  pools = []
  def make(n: int):
    pools.append(ThreadPoolExecutor(n, thread_name_prefix="tinylit-compile"))
    monkeypatch.setattr(device_module, "_compile_pool", (os.getpid(), pools[-1]))
  yield make
  for p in pools: p.shutdown()


def several_kernels(device: str, seed: int) -> tuple[list[Tensor], list[np.ndarray]]:
  "Five reductions of one input, each with constants no other test uses (new kernels), and numpy's answers."
  rng = np.random.default_rng(seed)
  a_np = rng.standard_normal((8, 16)).astype(np.float32)
  consts = rng.uniform(1, 2, 5).astype(np.float32)
  a = Tensor(a_np, device=device)
  outs = [(a * float(c) + i).sum(axis=i % 2) for i, c in enumerate(consts)]
  return outs, [(a_np * c + np.float32(i)).sum(axis=i % 2) for i, c in enumerate(consts)]


def new_runners(before: set) -> list:
  return [r for k, r in method_cache.items() if k not in before]


@pytest.mark.parametrize("device", DEVICES)
def test_each_program_compiled_once_on_the_workers(device, fresh_cache, pool_of):
  pool_of(4)
  outs, expected = several_kernels(device, seed=int(time.time_ns() % 2**32))
  before = set(method_cache)
  with CountingCompiles(Device[device].compiler, delay=0.05) as counting:
    Tensor.realize(*outs)
  runners = new_runners(before)
  assert len(runners) == len(outs), f"{len(runners)} new kernels for {len(outs)} reductions"
  assert sorted(counting.sources) == sorted({r.p.src for r in runners}), "each new program compiled exactly once"
  assert all(name.startswith("tinylit-compile") for _, name in counting.calls), counting.calls
  for out, want in zip(outs, expected): np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_parallel_gives_the_same_results(device, fresh_cache, pool_of):
  "The same kernels compiled by a pool of 4, a pool of 1, and one at a time (DEBUG=3 lowers each just before it runs)."
  results = []
  for mode in ("4 workers", "1 worker", "one at a time"):
    pool_of(1 if mode == "1 worker" else 4)
    method_cache.clear()   # the same ASTs again: compiled afresh (the disk cache is per test, the method cache global)
    outs, expected = several_kernels(device, seed=1234)
    if mode == "one at a time":
      with Context(DEBUG=3): Tensor.realize(*outs)
    else: Tensor.realize(*outs)
    results.append([o.numpy() for o in outs])
  for got in results[1:]:
    for a, b in zip(results[0], got): np.testing.assert_array_equal(a, b)
  for a, want in zip(results[0], expected): np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_source_in_flight_is_not_compiled_again(device, fresh_cache, pool_of):
  pool_of(4)
  out = several_kernels(device, seed=int(time.time_ns() % 2**31))[0][0]
  dev = Device[device]
  src = get_program(next(si.ast for si in out.schedule() if si.ast.op is Ops.SINK), dev.renderer).src
  with CountingCompiles(dev.compiler, delay=0.2) as counting:
    first, second = device_module.compile_async(dev.compiler, src), device_module.compile_async(dev.compiler, src)
    assert first is second
    lib = first.result()
  assert len(counting.calls) == 1
  assert dev.compiler.compile_cached(src) == lib   # and it went into the disk cache
  assert device_module.compile_async(dev.compiler, src).result() == lib   # done: a new compile, a disk-cache hit
  assert len(counting.calls) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_compile_error_surfaces_when_the_kernel_runs(device, fresh_cache, pool_of):
  if device == "PYTHON": pytest.skip("PYTHON's compiler keeps the text as it is: nothing to fail")
  pool_of(2)
  future = device_module.compile_async(Device[device].compiler, "this is not a kernel {")
  with pytest.raises(RuntimeError, match="compile failed"): future.result()


def kernel_sources(device: str, n: int, seed: int) -> list[tuple[str, str]]:
  "(function name, source) of `n` new kernels for `device`: reductions with constants no other test uses."
  outs, _ = several_kernels(device, seed)
  dev = Device[device]
  progs = [get_program(next(si.ast for si in o.schedule() if si.ast.op is Ops.SINK), dev.renderer) for o in outs[:n]]
  return [(p.function_name, p.src) for p in progs]


def compile_behind_a_busy_worker(compiler, first: str, rest: list[str], pool_of, counting_kw=None):
  """One worker, kept busy compiling `first` while `rest` is queued: the worker then takes the queue. Returns the
  Futures of `rest` and the CountingCompiles that saw it."""
  pool_of(1)
  release = threading.Event()
  with CountingCompiles(compiler, hold=(first, release), **(counting_kw or {})) as counting:
    first_future = device_module.compile_async(compiler, first)
    while not counting.calls: time.sleep(0.01)   # the worker has started on `first`
    futures = [device_module.compile_async(compiler, src) for src in rest]
    release.set()
    first_future.result()
    for f in futures: f.exception(timeout=60)   # wait for every one, failed or not
  return futures, counting


@pytest.mark.parametrize("device", DEVICES)
def test_sources_queued_together_are_one_compile_where_the_compiler_batches(device, fresh_cache, pool_of):
  dev = Device[device]
  (_, first), (name1, src1), (name2, src2) = kernel_sources(device, 3, seed=int(time.time_ns() % 2**31))
  futures, counting = compile_behind_a_busy_worker(dev.compiler, first, [src1, src2], pool_of)
  lib1, lib2 = (f.result() for f in futures)
  if dev.compiler.compile_batch is not None:
    assert [srcs for srcs, _ in counting.calls] == [[first], [src1, src2]], "the two queued sources in one compile"
    assert lib1 == lib2, "one binary for the batch"
  else: assert [srcs for srcs, _ in counting.calls] == [[first], [src1], [src2]], "no compile_batch: one source a call"
  # each kernel's program is found in its binary by its own name
  for name, lib in ((name1, lib1), (name2, lib2)): dev.runtime(name, lib)


@pytest.mark.parametrize("device", DEVICES)
def test_each_source_of_a_batch_has_its_own_cache_entry(device, fresh_cache, pool_of, tmp_path):
  dev = Device[device]
  (_, first), (_, src1), (name2, src2) = kernel_sources(device, 3, seed=int(time.time_ns() % 2**31) + 1)
  futures, _ = compile_behind_a_busy_worker(dev.compiler, first, [src1, src2], pool_of)
  if dev.compiler.cachekey is None: pytest.skip(f"{device}'s compiler keeps no cache")
  assert len(os.listdir(tmp_path)) == 3, "one file per source"
  for src, future in zip((src1, src2), futures): assert dev.compiler.cache_get(src) == future.result()
  with CountingCompiles(dev.compiler) as counting:
    lib = dev.compiler.compile_cached(src2)   # a later run asks for one of them: a hit, and its program is in it
  assert counting.calls == [] and lib == futures[1].result()
  dev.runtime(name2, lib)


@pytest.mark.parametrize("device", DEVICES)
def test_a_failing_kernel_in_a_batch_is_compiled_alone_and_named(device, fresh_cache, pool_of):
  if device == "PYTHON": pytest.skip("PYTHON's compiler keeps the text as it is: nothing to fail")
  dev = Device[device]
  (_, first), (name1, src1), (name2, src2) = kernel_sources(device, 3, seed=int(time.time_ns() % 2**31) + 2)
  bad = "this is not a kernel { /* the bad one */"
  (good1, failed, good2), counting = compile_behind_a_busy_worker(dev.compiler, first, [src1, bad, src2], pool_of)
  with pytest.raises(RuntimeError, match="compile failed") as err: failed.result()
  assert "the bad one" in str(err.value) and name1 not in str(err.value) and name2 not in str(err.value), \
    "the error is the bad kernel's own, not the batch's"
  for name, future in ((name1, good1), (name2, good2)): dev.runtime(name, future.result())
  if dev.compiler.compile_batch is not None:   # the batch failed, then each was compiled alone
    assert [srcs for srcs, _ in counting.calls] == [[first], [src1, bad, src2], [src1], [bad], [src2]]


@pytest.mark.parametrize("device", DEVICES)
def test_two_kernels_of_one_name_in_a_batch_are_compiled_apart(device, fresh_cache, pool_of):
  "Names are unique within a process, but a clash must not break a batch: each kernel then gets a binary of its own."
  dev = Device[device]
  if dev.compiler.compile_batch is None: pytest.skip(f"{device}'s compiler has no compile_batch: nothing is batched")
  (_, first), (name1, src1), (name2, src2) = kernel_sources(device, 3, seed=int(time.time_ns() % 2**31) + 3)
  clash = src2.replace(name2, name1)   # the second kernel under the first one's name
  (lib1, lib2), counting = compile_behind_a_busy_worker(dev.compiler, first, [src1, clash], pool_of)
  assert [srcs for srcs, _ in counting.calls] == [[first], [src1, clash], [src1], [clash]]
  assert lib1.result() != lib2.result()


@pytest.mark.parametrize("device", DEVICES)
def test_a_forked_process_compiles_on_its_own(device, fresh_cache):
  "A child forked while its parent compiled inherits the parent's queue and counts, but none of its workers."
  dev = Device[device]
  (_, src), = kernel_sources(device, 1, seed=int(time.time_ns() % 2**31) + 4)
  stale = device_module.Future()   # a compile of the parent's, in flight when it forked: never settled in the child
  pid = os.fork()
  if pid == 0:   # the child: it sees the parent's pool record, with the parent's pid
    ok = False
    try:
      device_module._compiling[(dev.compiler, src)] = stale
      device_module._busy += 1
      ok = device_module.compile_async(dev.compiler, src).result(timeout=60) == dev.compiler.compile(src)
    finally: os._exit(0 if ok else 1)
  _, status = os.waitpid(pid, 0)
  assert os.waitstatus_to_exitcode(status) == 0, "the child's compile_async did not compile the source itself"
