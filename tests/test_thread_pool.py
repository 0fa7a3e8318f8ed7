"""The CPU's thread pool (chapter 8a): threaded kernels launched through `tinylit_pool_run` give the same answers as
numpy, with a bound variable among their arguments, from several Python threads at once, and in a forked child;
every call of a launch runs exactly once, whoever takes it. The programs that any device can run are run on every
device; only the CPU threads them."""
import os, threading

import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor
from tinylit.device import Device
from tinylit.realize import CompiledRunner, get_program
from tinylit.ops import Variable

ROWS, COLS = 1024, 256   # 256K elements: the heuristic threads an elementwise kernel from 64K


def data(seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).standard_normal((ROWS, COLS)).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_threaded_kernel_with_a_variable(device):
  # the variable's value reaches each thread through the pool's array of addresses (an int, after the buffers)
  x = data()
  t = Tensor(x, device=device).realize()
  for n in (200, 17, 256):
    v = Variable("n", 1, COLS).bind(n)
    got = (t.shrink((None, (0, v))) * 2 + 1).contiguous().sum().item()
    np.testing.assert_allclose(got, (x[:, :n] * 2 + 1).sum(dtype=np.float64), rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_launches_from_several_python_threads(device):
  # the pool runs one launch at a time: compiled kernels launched by four Python threads at once must each give their
  # own answer (the kernels are built first, on this thread: the compiler's front end is not thread-safe, as tinygrad's)
  xs = [data(i) for i in range(4)]
  jobs = []
  for i, x in enumerate(xs):
    (si,) = ((Tensor(x, device=device).realize() * (i + 1)).exp2() + i).schedule()
    for b in si.bufs:
      if not b.is_allocated: b.allocate()
    jobs.append((CompiledRunner(get_program(si.ast, Device[device].renderer)), list(si.bufs)))
  def work(i: int):
    for _ in range(20): jobs[i][0](jobs[i][1])
  threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
  for th in threads: th.start()
  for th in threads: th.join()
  for i, x in enumerate(xs):
    np.testing.assert_allclose(jobs[i][1][0].numpy().reshape(ROWS, COLS), np.exp2(x * (i + 1)) + i, rtol=1e-5, atol=1e-6)


def test_every_call_of_a_launch_runs_exactly_once():
  # the launching thread and the workers take calls from one counter: a call taken twice adds 2 to its slot, one never
  # taken adds nothing. Many launches in a row, so that some find the workers spinning, some asleep, some late
  from tinylit.runtime.ops_cpu import ClangCompiler, CPUProgram
  calls = max(os.cpu_count() or 1, 2)   # a call per core (the pool makes a worker for each call after the first)
  src = ("void count(int* restrict slots, int core_id) { slots[core_id] += 1; }\n"
         "void count_thread(void** args, int core_id) { count((int*)args[0], core_id); }")
  prg = CPUProgram("count", ClangCompiler().compile(src))
  slots = np.zeros(calls, np.int32)
  for _ in range(500): prg(slots, global_size=(calls, 1, 1))
  np.testing.assert_array_equal(slots, np.full(calls, 500))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
def test_forked_child_makes_its_own_workers():
  # a child process has none of its parent's threads: the pool must make new ones rather than wait for the old.
  # The CPU's pool alone: an OpenCL or CUDA driver is not usable in a forked child at all (their documented limit)
  x = data()
  t = Tensor(x, device="CPU").realize()
  (t * 3).realize()   # the parent's pool exists now
  pid = os.fork()
  if pid == 0:
    ok = np.allclose((t * 5 + 1).numpy(), x * 5 + 1)
    os._exit(0 if ok else 1)
  _, status = os.waitpid(pid, 0)
  assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
