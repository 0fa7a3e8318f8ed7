"""Kernel counts like tinygrad v0.10's (issue 18, point 4): constants folded while the lazy graph is built (chapter 2),
pow, reductions and indexing with constants (chapters 1f, 1d), and arange/eye/linspace as lazy graphs (chapter 1e).
Each case checks how many kernels the schedule holds and the values they compute, on every device."""
import math

import numpy as np
import pytest

from tinylit import Tensor, dtypes, nn
from tinylit.ops import Ops
from tinylit.schedule import create_schedule
from devices import DEVICES


def kernels(t: Tensor) -> int:
  "How many kernels (not copies) realizing `t` would run, as tinygrad's test_schedule counts them."
  return sum(1 for si in create_schedule([t.lazydata]) if si.ast.op is Ops.SINK)


def check(t: Tensor, count: int, expected) -> None:
  assert kernels(t) == count, f"{kernels(t)} kernels, expected {count}"
  np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_identities_fold(device):
  x = Tensor([1.0, 2.0, 3.0, 4.0], device=device).realize()
  xs = [1.0, 2.0, 3.0, 4.0]
  for expr, t, expected in [("x+0", x + 0, xs), ("0+x", 0 + x, xs), ("x-0", x - 0, xs), ("x*1", x * 1, xs),
                            ("1*x", 1 * x, xs), ("x/1", x / 1, xs),
                            ("x+zeros", x + Tensor.zeros(4, device=device), xs),
                            ("x*ones", x * Tensor.ones(4, device=device), xs),
                            ("x+zeros[1:5]", x + Tensor.zeros(6, device=device).shrink(((1, 5),)), xs)]:
    assert kernels(t) == 0, expr
    np.testing.assert_equal(t.numpy(), expected, err_msg=expr)
  i = Tensor([1, -2, 3, -4], device=device).realize()
  check(i // 1, 0, [1, -2, 3, -4])
  check(i // Tensor.ones(4, dtype=dtypes.int32, device=device), 0, [1, -2, 3, -4])
  b = Tensor([True, False], device=device).realize()
  for t, expected in [(b * True, [True, False]), (b * False, [False, False]), (True * b, [True, False]), (False * b, [False, False])]:
    assert kernels(t) == 0
    np.testing.assert_equal(t.numpy(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_not_folded(device):
  "A padded constant is not the same number everywhere: no identity applies, one kernel (as in tinygrad)."
  x = Tensor([1.0, 2.0, 3.0, 4.0], device=device).realize()
  check(x + Tensor.zeros(2, device=device).pad(((1, 1),)), 1, [1.0, 2.0, 3.0, 4.0])
  check(x * Tensor.ones(2, device=device).pad(((1, 1),)), 1, [0.0, 2.0, 3.0, 0.0])
  check(x + 1, 1, [2.0, 3.0, 4.0, 5.0])


@pytest.mark.parametrize("device", DEVICES)
def test_times_zero(device):
  "An integer x*0 is folded to 0; a float one is not (tinygrad v0.10 folds it too): NaN*0 and inf*0 are NaN, as in torch."
  x = Tensor([math.nan, math.inf, 1.0], device=device).realize()
  check(x * 0, 1, [math.nan, math.nan, 0.0])
  check(0 * x, 1, [math.nan, math.nan, 0.0])
  i = Tensor([3, -7, 5], device=device).realize()
  check(i * 0, 0, [0, 0, 0])
  check(0 * i, 0, [0, 0, 0])


@pytest.mark.parametrize("device", DEVICES)
def test_pow_folds(device):
  "x**1 is x without a kernel; x**0 and 1**x are 1 even at NaN (C's pow), computed by one kernel since a float x*0 is not folded."
  x = Tensor([1.0, 2.0, 3.0, 4.0], device=device).realize()
  check(x ** 1, 0, [1.0, 2.0, 3.0, 4.0])
  check(x ** Tensor.ones(4, device=device), 0, [1.0, 2.0, 3.0, 4.0])
  # each on a fresh x: x ** 0 and x ** zeros are one graph, which the lazy cache would share once realized
  for f in (lambda x: x ** 0, lambda x: 1 ** x, lambda x: x ** Tensor.zeros(4, device=device), lambda x: Tensor.ones(4, device=device) ** x):
    check(f(Tensor([1.0, 2.0, 3.0, 4.0], device=device).realize()), 1, [1.0] * 4)
  check(Tensor([math.nan, math.inf], device=device) ** 0, 1, [1.0, 1.0])
  w = Tensor([2.0, -3.0], device=device, requires_grad=True)
  (w ** 0).sum().backward()
  np.testing.assert_equal(w.grad.numpy(), [0.0, 0.0])


@pytest.mark.parametrize("device", DEVICES)
def test_constant_reductions(device):
  check(Tensor.ones(4, 5, 6, device=device).sum(), 0, 120)
  check(Tensor.ones(4, 5, 6, device=device).sum(axis=0), 0, np.full((5, 6), 4))
  check(Tensor(4, device=device).sum(), 0, 4)
  check(Tensor.full((2, 3), 2, device=device).prod(), 0, 64)
  check(Tensor.full((4, 5, 6), 2, device=device).prod(axis=0), 0, np.full((5, 6), 16))
  check(Tensor.ones(4, 5, 6, device=device).max(), 0, 1)
  check(Tensor.full((3, 4), 7, dtype=dtypes.int32, device=device).sum(axis=1), 0, [28, 28, 28])
  # a padded constant is not one number: its sum is a kernel, and so is anything where f(0) != 0 matters
  check(Tensor.ones(4, device=device).pad(((1, 1),)).sum(), 1, 4)
  check(Tensor.ones(4, device=device).pad(((1, 1),)).exp().sum(), 1, 4 * math.e + 2)


@pytest.mark.parametrize("device", DEVICES)
def test_cast_of_padded_constant(device):
  t = Tensor.ones(4, device=device).pad(((1, 1),))
  check(t.cast(dtypes.int16), 0, [0, 1, 1, 1, 1, 0])
  check(Tensor.full(4, -1, device=device).pad(((1, 1),)).cast(dtypes.uint16), 0, [0, 65535, 65535, 65535, 65535, 0])
  check(t.cast(dtypes.int64), 1, [0, 1, 1, 1, 1, 0])   # a wider dtype: cast after the view, as tinygrad does


@pytest.mark.parametrize("device", DEVICES)
def test_constant_index(device):
  t = Tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), device=device).realize()
  check(t[:, :, Tensor(1, device=device), :], 0, [[[4.0, 5.0, 6.0, 7.0]]])
  check(t[:, :, Tensor(1, device=device) + 2, :], 0, [[[12.0, 13.0, 14.0, 15.0]]])
  check(t[:, :, Tensor(1, device=device), Tensor(0, device=device)], 0, [[4.0]])
  check(t[:, :, Tensor(-1, device=device), :], 0, [[[12.0, 13.0, 14.0, 15.0]]])
  check(t[:, :, Tensor(7, device=device), :], 1, [[[0.0, 0.0, 0.0, 0.0]]])   # out of range: a gather, which reads 0


@pytest.mark.parametrize("device", DEVICES)
def test_arange_is_one_kernel(device):
  for args, kwargs in [((10,), {}), ((1, 7, 2), {}), ((5, -3, -2), {}), ((3, 1000), {}), ((0, 10, 2.5), {"dtype": dtypes.int32}),
                       ((2, 5), {"dtype": dtypes.float32}), ((1, 2, 0.25), {}), ((3,), {"dtype": dtypes.bool})]:
    t = Tensor.arange(*args, device=device, **kwargs)
    assert len(t.schedule()) == 1, args
    np.testing.assert_equal(t.numpy(), np.arange(*args).astype(t.dtype.np), err_msg=str(args))
  np.testing.assert_allclose(Tensor.arange(0, 1, 0.1, device=device).numpy(), np.arange(0, 1, 0.1), rtol=1e-6)
  assert len(Tensor.arange(1, device=device).schedule()) == 0 and Tensor.arange(0, device=device).shape == (0,)


@pytest.mark.parametrize("device", DEVICES)
def test_arange_fuses(device):
  x = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4), device=device).realize()
  check(Tensor.arange(4, device=device) + x, 1, np.arange(4) + np.arange(16).reshape(4, 4))
  y = Tensor(np.ones((5, 2), np.float32), device=device).realize()
  check((y + Tensor.arange(10, device=device)[2]).sum(), 1, 30.0)
  check((y + Tensor.arange(10, device=device).contiguous()[2]).sum(), 2, 30.0)
  emb = nn.Embedding(10, 3)
  emb.weight = Tensor(np.arange(30, dtype=np.float32).reshape(10, 3), device=device).realize()
  idx = Tensor([[1, 4, 9]], device=device).realize()
  check(emb(idx), 1, np.arange(30).reshape(10, 3)[[[1, 4, 9]]])


@pytest.mark.parametrize("device", DEVICES)
def test_eye_and_linspace(device):
  for n, m in [(3, None), (2, 3), (3, 2), (1, None)]:
    t = Tensor.eye(n, m, device=device)
    assert kernels(t) == 0   # one padded constant: a view, computed where it is read
    np.testing.assert_equal(t.numpy(), np.eye(n, m, dtype=np.float32))
  for args in [(0, 1, 5), (5, 10, 3), (-1, 1, 1), (0, 1, 0), (0, 10, 4), (2.5, -7.0, 11)]:
    t = Tensor.linspace(*args, device=device)
    assert len(t.schedule()) <= 1
    np.testing.assert_allclose(t.numpy(), np.linspace(*args).astype(np.float32), rtol=1e-6, atol=1e-6)
    if args[2] > 1: assert t.numpy()[-1] == np.float32(args[1])   # both ends exact, as numpy
