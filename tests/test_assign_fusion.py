"""Lazy assign and multi-output kernels (issue 18, section 4): `assign` records a write that runs with the next realize
or read, a step's writes are scheduled together, and outputs that share a reduce share one kernel -- tinygrad v0.10's
kernel counts -- while torch's write semantics hold (a view sees the write, a value made before it keeps the old
contents). Every test runs on every device."""
import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor, TinyJit
from tinylit.device import GlobalCounters
from tinylit.ops import Ops
from tinylit.schedule import create_schedule


def kernels(fn) -> int:
  "How many kernels `fn()` launches."
  k0 = GlobalCounters.kernel_count
  fn()
  return GlobalCounters.kernel_count - k0


def filled(value: float, *shape: int, device: str) -> Tensor:
  return Tensor.full(shape, value, device=device).contiguous().realize()


@pytest.mark.parametrize("device", DEVICES)
def test_assign_runs_nothing_until_realized(device):
  a = filled(1.0, 4, device=device)
  assert kernels(lambda: a.assign(a + 1)) == 0
  assert a.lazydata.base.op is Ops.ASSIGN
  assert kernels(a.realize) == 1
  np.testing.assert_array_equal(a.numpy(), [2, 2, 2, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_three_assigns_sharing_a_reduce_are_one_kernel(device):
  # tinygrad v0.10's test_simple_assignment_multioutput: one kernel with three outputs, the reduce computed once
  a = Tensor.randn(32, 32, device=device).realize()
  b, c, d = filled(1.0, 32, device=device), filled(2.0, 32, device=device), filled(3.0, 32, device=device)
  r = a.sum(axis=1)
  b.assign(r + b)
  c.assign(r + c)
  d.assign(r + d)
  (si,) = Tensor.schedule(b, c, d)
  assert len(si.outputs) == 3 and sum(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort) == 1
  assert kernels(lambda: Tensor.realize(b, c, d)) == 1
  expected = a.numpy().sum(1)
  for t, v in ((b, 1), (c, 2), (d, 3)): np.testing.assert_allclose(t.numpy(), expected + v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_sharing_a_reduce_are_one_kernel_without_assign(device):
  a = Tensor.randn(16, 8, device=device).realize()
  r = a.max(axis=1)
  x, y = r + 1, r * 2
  assert kernels(lambda: Tensor.realize(x, y)) == 1
  np.testing.assert_allclose(x.numpy(), a.numpy().max(1) + 1, rtol=1e-6)
  np.testing.assert_allclose(y.numpy(), a.numpy().max(1) * 2, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_different_reduces_are_different_kernels(device):
  a = Tensor.randn(16, 8, device=device).realize()
  x, y = a.sum(1) + 1, a.max(1) + 1
  assert kernels(lambda: Tensor.realize(x, y)) == 2
  np.testing.assert_allclose(y.numpy(), a.numpy().max(1) + 1, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_two_identical_assigns_are_one_write(device):
  # tinygrad v0.10's test_double_assign_alt, on the lazy graph
  a = filled(1.0, 4, device=device)
  b = Tensor([1.0, 2, 3, 4], device=device).realize().lazydata
  a1, a2 = a.lazydata.assign(b), a.lazydata.assign(b)
  assert a1 is a2 and len(create_schedule([a1, a2])) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_masked_read_of_the_target_stays_in_place(device):
  # tinygrad v0.10's test_permuted_assignment_masked_view_possible: the padded view equals the written one where it
  # is not padding, so the kernel reads each element only where it writes it
  a = filled(1.0, 4, 4, device=device)
  a.assign(a + a.shrink((None, (0, 2))).pad((None, (0, 2)), value=2))
  assert kernels(a.realize) == 1
  np.testing.assert_array_equal(a.numpy(), np.ones((4, 4)) + np.pad(np.ones((4, 2)), ((0, 0), (0, 2)), constant_values=2))


@pytest.mark.parametrize("device", DEVICES)
def test_a_held_value_of_the_old_contents_gets_its_own_kernel(device):
  # the same write, but the padded value is held by a tensor: it keeps the old contents (torch), so it is computed
  # before the write (tinygrad would compute it again later, from the new contents)
  a = filled(1.0, 4, 4, device=device)
  b = a.shrink((None, (0, 2))).pad((None, (0, 2)), value=2)
  a.assign(a + b)
  assert kernels(a.realize) == 2
  np.testing.assert_array_equal(b.numpy(), np.pad(np.ones((4, 2)), ((0, 0), (0, 2)), constant_values=2))


@pytest.mark.parametrize("device", DEVICES)
def test_crossover_assigns_are_two_kernels_in_either_order(device):
  for order in ((0, 1), (1, 0)):
    a, b = filled(2.0, 4, device=device), filled(3.0, 4, device=device)
    a += b
    b += a
    first, second = (a, b) if order == (0, 1) else (b, a)
    assert kernels(lambda first=first, second=second: Tensor.realize(first, second)) == 2
    np.testing.assert_array_equal(a.numpy(), [5] * 4)
    np.testing.assert_array_equal(b.numpy(), [8] * 4)


@pytest.mark.parametrize("device", DEVICES)
def test_writes_that_read_each_others_old_contents(device):
  # tinygrad v0.10's test_assign_double_diamond_reduce: b0's write reads the old b1 and b1's the old b0 (b0.contiguous()
  # of a realized tensor is the tensor itself)
  a0, a1 = filled(10, 16, 16, device=device), filled(20, 16, 16, device=device)
  b0, b1 = filled(1, 16, device=device), filled(2, 16, device=device)
  r0, r1 = (a0 - b1.contiguous()).sum(1), (a1 - b0.contiguous()).sum(1)
  b0.assign(r0 * b0)
  b1.assign(r1 * b1)
  Tensor.realize(b0, b1)
  np.testing.assert_array_equal(b0.numpy(), [128] * 16)
  np.testing.assert_array_equal(b1.numpy(), [608] * 16)


@pytest.mark.parametrize("device", DEVICES)
def test_cycles_tinygrad_refuses_compute_the_right_answer(device):
  # tinygrad v0.10 raises "cycle detected" (test_crossunder_assign, test_assign_diamond_cycle)
  a, b = filled(2, 4, device=device), filled(3, 4, device=device)
  c = a + 9
  a += b
  b += c
  Tensor.realize(a, b)
  np.testing.assert_array_equal(a.numpy(), [5] * 4)
  np.testing.assert_array_equal(b.numpy(), [14] * 4)
  a, b = filled(2, 4, device=device), filled(3, 4, device=device)
  a_prev = a * 4
  b += a_prev
  a += b   # reads the new b
  b += a_prev
  Tensor.realize(a, b)
  np.testing.assert_array_equal(a.numpy(), [13] * 4)
  np.testing.assert_array_equal(b.numpy(), [19] * 4)


@pytest.mark.parametrize("device", DEVICES)
def test_permuted_reads_of_the_target_are_right(device):
  # tinygrad v0.10 raises "contiguous" (test_permuted_assignment_correct, test_post_permuted_assignment)
  a = Tensor.arange(16, device=device, dtype="float32").reshape(4, 4).contiguous().realize()
  b = Tensor.arange(16, device=device, dtype="float32").reshape(4, 4).contiguous().realize()
  a.assign(a.permute(1, 0) + b)
  expected = np.arange(16).reshape(4, 4).T + np.arange(16).reshape(4, 4)
  np.testing.assert_array_equal(a.numpy(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_pending_writes_keep_torch_semantics(device):
  a = Tensor([1.0, 2, 3, 4], device=device).realize()
  before = a * 10                 # made before the write: keeps the old contents
  view = a[1:]                    # a view: sees the write
  a.assign(a + 1)
  after = a * 10                  # made after the write: sees it
  a.assign(a + 1)                 # a second write to the same memory, in order
  np.testing.assert_array_equal(before.numpy(), [10, 20, 30, 40])
  np.testing.assert_array_equal(view.numpy(), [4, 5, 6])
  np.testing.assert_array_equal(after.numpy(), [20, 30, 40, 50])
  np.testing.assert_array_equal(a.numpy(), [3, 4, 5, 6])


@pytest.mark.parametrize("device", DEVICES)
def test_a_read_of_anything_runs_pending_writes(device):
  a = filled(1.0, 4, device=device)
  buf = a.lazydata.base.buffer
  a.assign(a + 1)
  Tensor([7.0], device=device).numpy()   # an unrelated read: the write before it has landed in the memory
  np.testing.assert_array_equal(buf.numpy(), [2, 2, 2, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replays_a_write_whose_function_returns_nothing(device):
  w = filled(0.0, 4, device=device)
  @TinyJit
  def bump(x: Tensor) -> None: w.assign(w + x)
  for _ in range(4): bump(Tensor([1.0, 2, 3, 4], device=device))
  np.testing.assert_array_equal(w.numpy(), [4, 8, 12, 16])


@pytest.mark.parametrize("device", DEVICES)
def test_an_optimizer_step_is_one_schedule(device):
  from tinylit import nn
  Tensor.manual_seed(0)
  layer = nn.Linear(8, 4)
  for p in (layer.weight, layer.bias): p.to_(device).realize()
  opt = nn.optim.Adam([layer.weight, layer.bias], lr=0.1)
  x = Tensor.randn(16, 8, device=device).realize()
  with Tensor.train():
    for _ in range(2):
      opt.zero_grad()
      layer(x).square().mean().backward()
      opt.step()
  w = layer.weight.numpy()
  # the same two steps in numpy
  Tensor.manual_seed(0)
  ref = nn.Linear(8, 4)
  W, B, X = ref.weight.numpy().astype(np.float64), ref.bias.numpy().astype(np.float64), x.numpy().astype(np.float64)
  m, v = [np.zeros_like(W), np.zeros_like(B)], [np.zeros_like(W), np.zeros_like(B)]
  for t in (1, 2):
    y = X @ W.T + B
    gy = 2 * y / y.size
    for i, (p, g) in enumerate(((W, gy.T @ X), (B, gy.sum(0)))):
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      p -= 0.1 * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
  np.testing.assert_allclose(w, W, rtol=1e-4, atol=1e-5)
