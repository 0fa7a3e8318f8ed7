"""Chapter 9's CPU graph: a TinyJit recording on the CPU replayed as one C call (tinygrad v0.10's ClangGraph). On every
device a jitted step gives numpy's numbers; on the CPU it replays through a graph, unless captured under `JIT=2`, and
the graph's replays give the same bits as replays kernel by kernel: with threaded kernels (chapter 8a's pool), a
changing input, a bound variable that changes size, a returned input, and after a pickle round trip. The counters
count every kernel of a graph's replay."""
import pickle

import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor, TinyJit
from tinylit.device import GlobalCounters
from tinylit.helpers import Context
from tinylit.ops import Variable


def mlp_weights(device: str):
  "Weights big enough that the rules give the matmuls a thread axis on the CPU (chapter 6b's step 5)."
  rng = np.random.default_rng(0)
  return [Tensor((rng.standard_normal(s) / 16).astype(np.float32), device=device).realize() for s in ((256, 512), (512, 256), (256,))]


def step_fn(w1: Tensor, w2: Tensor, b: Tensor):
  def step(x: Tensor) -> Tensor: return ((x @ w1).relu() @ w2 + b).softmax(-1)
  return step


def inputs(device: str, n: int = 8):
  rng = np.random.default_rng(1)
  return [Tensor(rng.standard_normal((128, 256)).astype(np.float32), device=device).realize() for _ in range(n)]


@pytest.mark.parametrize("device", DEVICES)
def test_jitted_step_is_right_on_every_device(device):
  w1, w2, b = mlp_weights(device)
  step = TinyJit(step_fn(w1, w2, b))
  a, c = w1.numpy(), w2.numpy()
  for x in inputs(device, 4):
    h = np.maximum(x.numpy() @ a, 0) @ c + b.numpy()
    e = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(step(x).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
  # a graph on the CPU only: elsewhere the replay is kernel by kernel
  assert (step.graph is not None) == (device == "CPU"), (device, step.graph)


def test_graph_replays_the_same_bits_as_kernel_by_kernel():
  w = mlp_weights("CPU")
  graphed, plain = TinyJit(step_fn(*w)), TinyJit(step_fn(*w))
  xs = inputs("CPU")
  for x in xs[:2]: graphed(x)
  with Context(JIT=2):
    for x in xs[:2]: plain(x)
  assert graphed.graph is not None and plain.graph is None
  assert any(ei.prg.p.global_size and ei.prg.p.global_size[0] > 1 for ei in graphed.jit_cache), "no threaded kernel to test"
  for x in xs[2:]: np.testing.assert_array_equal(graphed(x).numpy(), plain(x).numpy())


def test_graph_counts_every_kernel():
  "Kernels, FLOPs and bytes of a graph's replay: as a replay kernel by kernel counts them."
  w = mlp_weights("CPU")
  graphed, plain = TinyJit(step_fn(*w)), TinyJit(step_fn(*w))
  xs = inputs("CPU", 4)
  for x in xs[:3]: graphed(x)
  with Context(JIT=2):
    for x in xs[:3]: plain(x)
  counts = []
  for jit in (graphed, plain):
    GlobalCounters.reset()
    jit(xs[3])
    counts.append((GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem))
  assert counts[0] == counts[1] and counts[0][0] == len(graphed.jit_cache) > 1, counts


def test_graph_with_a_variable_and_a_returned_input():
  "A bound variable in the input's shape (one capture for every length), and the input returned beside a result."
  @TinyJit
  def f(x: Tensor):
    y = (x * 2).contiguous()
    return x, (y + 1).sum(1)
  rng = np.random.default_rng(2)
  for n in (3, 5, 7, 2, 6):
    v = rng.standard_normal((4, n)).astype(np.float32)
    x = Tensor(v).reshape(4, Variable("n", 1, 8).bind(n)).contiguous().realize()
    back, s = f(x)
    np.testing.assert_allclose(s.numpy(), (v * 2 + 1).sum(1), rtol=1e-6)
    np.testing.assert_array_equal(back.reshape(4, n).numpy(), v)
  assert f.graph is not None


def test_pickled_graph_replays():
  graphed = TinyJit(step_fn(*mlp_weights("CPU")))
  xs = inputs("CPU", 4)
  for x in xs[:2]: graphed(x)
  loaded = pickle.loads(pickle.dumps(graphed))
  assert loaded.graph is not None and loaded.graph is not graphed.graph
  np.testing.assert_array_equal(loaded(xs[2]).numpy(), graphed(xs[2]).numpy())


def test_graph_counts_the_bytes_of_this_calls_inputs():
  "A bound variable changes the input's size from call to call: the graph counts this call's bytes, as kernel by kernel."
  def f(x: Tensor) -> Tensor: return ((x * 2).contiguous() + 1).sum(1)
  graphed, plain = TinyJit(f), TinyJit(f)
  def arg(n: int) -> Tensor:
    return Tensor(np.ones((4, n), np.float32)).reshape(4, Variable("n", 1, 64).bind(n)).contiguous().realize()
  for n in (2, 3): graphed(arg(n))
  with Context(JIT=2):
    for n in (2, 3): plain(arg(n))
  for n in (5, 60):
    mems = []
    for jit in (graphed, plain):
      x = arg(n)
      GlobalCounters.reset()
      jit(x)
      mems.append(GlobalCounters.global_mem)
    assert mems[0] == mems[1], (n, mems)
