"""Compiling a schedule's new kernels at once (chapter 8's `compile_async`, called by chapter 8b's `run_schedule`):
the results are the ones that compiling each kernel just before it runs gives, every program is compiled once, and
the compiles run on the pool's worker threads. On every device."""
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
  "Wraps the device compiler's `compile` (the real work, below the disk cache): records each source and its thread."
  def __init__(self, compiler, delay: float = 0.0):
    self.compiler, self.delay, self.calls, self.lock = compiler, delay, [], threading.Lock()
  def __enter__(self):
    original = type(self.compiler).compile
    def compile(src: str) -> bytes:
      with self.lock: self.calls.append((src, threading.current_thread().name))
      time.sleep(self.delay)
      return original(self.compiler, src)
    self.compiler.compile = compile
    return self
  def __exit__(self, *exc): del self.compiler.compile


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
  sources = [src for src, _ in counting.calls]
  assert sorted(sources) == sorted({r.p.src for r in runners}), "each new program compiled exactly once"
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
