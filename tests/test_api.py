"""The Tensor API beyond single ops: creation, indexing, joining, dtypes, autograd bookkeeping, and clear errors."""
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinylit import Tensor, dtypes

from devices import DEVICES
X = np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("idx", [1, -1, (slice(None), 2), (slice(1, 3), -2), (Ellipsis, 1), (None, 0, slice(None, None, -1)),
                                 (slice(None, None, -2), None, slice(1, 5, 3)), (slice(None), slice(None), slice(4, 0, -2)),
                                 (0, 0, 0), (slice(5, 9),)])
def test_basic_indexing(device, idx):
  np.testing.assert_array_equal(Tensor(X, device=device)[idx].numpy(), X[idx])

@pytest.mark.parametrize("device", DEVICES)
def test_tensor_indexing_and_grad(device):
  I, J = np.array([[0, 2], [3, -1]]), np.array([1, 4])
  t = Tensor(X, device=device, requires_grad=True)
  np.testing.assert_array_equal(t[Tensor(I, device=device)].numpy(), X[I])
  np.testing.assert_array_equal(t[:, Tensor(J, device=device)].numpy(), X[:, J])
  np.testing.assert_array_equal(t[Tensor(J[:1], device=device), :, Tensor(J, device=device)].numpy(), X[J[:1], :, J])
  np.testing.assert_array_equal(t[[0, 3], 1:3].numpy(), X[[0, 3], 1:3])
  t[Tensor(I, device=device), 2].sum().backward()
  tt = torch.tensor(X, requires_grad=True); tt[torch.tensor(I), 2].sum().backward()
  np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy())

@pytest.mark.parametrize("device", DEVICES)
def test_join_split(device):
  t, x = Tensor(X, device=device), torch.tensor(X)
  np.testing.assert_array_equal(t.cat(t[:2], dim=0).numpy(), torch.cat([x, x[:2]]).numpy())
  np.testing.assert_array_equal(Tensor.stack(t, t, dim=-1).numpy(), torch.stack([x, x], -1).numpy())
  for a, b in zip(t.split([1, 2, 3], 2), x.split([1, 2, 3], 2)): np.testing.assert_array_equal(a.numpy(), b.numpy())
  for a, b in zip(t.chunk(3, 1), x.chunk(3, 1)): np.testing.assert_array_equal(a.numpy(), b.numpy())
  np.testing.assert_array_equal(t.repeat(2, 1, 1, 2).numpy(), x.repeat(2, 1, 1, 2).numpy())
  index = torch.tensor([[[0, 3]] * 5] * 4)
  np.testing.assert_array_equal(t.gather(2, Tensor(index.numpy(), device=device)).numpy(), torch.gather(x, 2, index).numpy())

def test_creation():
  Tensor.manual_seed(3); a = Tensor.rand(3, 4).numpy()
  Tensor.manual_seed(3); b = Tensor.rand(3, 4).numpy()
  np.testing.assert_array_equal(a, b)
  assert 0 <= a.min() and a.max() < 1
  np.testing.assert_array_equal(Tensor.arange(2, 10, 3).numpy(), np.arange(2, 10, 3))
  np.testing.assert_allclose(Tensor.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
  np.testing.assert_array_equal(Tensor.eye(3).numpy(), np.eye(3))
  np.testing.assert_array_equal(Tensor.full((2, 2), 7).numpy(), np.full((2, 2), 7))
  assert Tensor.full((2, 2), 7).dtype == dtypes.int32 and Tensor.zeros(2).dtype == dtypes.float32
  np.testing.assert_array_equal(Tensor.ones(2, 3).zeros_like().numpy(), np.zeros((2, 3)))
  r = Tensor.randint(1000, low=5, high=9).numpy(); assert r.min() >= 5 and r.max() < 9
  n = Tensor.randn(10000).numpy(); assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
  k = Tensor.kaiming_uniform(64, 32).numpy(); assert abs(k).max() <= np.sqrt(3) * np.sqrt(2 / (1 + 0.01 ** 2)) / np.sqrt(32)
  assert Tensor.empty(2, 3).shape == (2, 3)

def test_properties_and_conversion():
  t = Tensor([[1, 2, 3], [4, 5, 6]])
  assert (t.shape, t.ndim, t.numel(), t.dtype, t.device, t.T.shape) == ((2, 3), 2, 6, dtypes.int32, "CPU", (3, 2))
  assert t.tolist() == [[1, 2, 3], [4, 5, 6]] and t[1, 2].item() == 6
  assert t.float().dtype == dtypes.float32 and t.bool().dtype == dtypes.bool and t.float().int().dtype == dtypes.int32

@pytest.mark.parametrize("pair", [("int8", "uint8", "int16"), ("int32", "float16", "float16"), ("bool", "int64", "int64"),
                                  ("uint32", "int32", "int64"), ("float16", "float32", "float32"), ("uint64", "int64", "float16")])
def test_promotion(pair):
  a, b, out = (getattr(dtypes, n) for n in pair)
  assert (Tensor([1], dtype=a) + Tensor([1], dtype=b)).dtype == out

def test_weak_scalars():
  assert (Tensor([1.0]).half() + 3).dtype == dtypes.float16
  assert (Tensor([1.0]).half() * 2.5).dtype == dtypes.float16
  assert (Tensor([1], dtype="int8") + 3).dtype == dtypes.int8
  assert (Tensor([1], dtype="int8") + 3.5).dtype == dtypes.float32
  assert (Tensor([True]) + 1).dtype == dtypes.int32

def test_bitwise_ints():
  a, b = np.array([5, -3, 12], dtype=np.int32), np.array([3, 6, -1], dtype=np.int32)
  np.testing.assert_array_equal((Tensor(a) & Tensor(b)).numpy(), a & b)
  np.testing.assert_array_equal((Tensor(a) | Tensor(b)).numpy(), a | b)
  np.testing.assert_array_equal((Tensor(a) ^ Tensor(b)).numpy(), a ^ b)
  np.testing.assert_array_equal((~Tensor(a)).numpy(), ~a)
  np.testing.assert_array_equal((Tensor(a) << 2).numpy(), a << 2)
  np.testing.assert_array_equal(Tensor([True, False]).logical_not().numpy(), [False, True])

def test_autograd_bookkeeping():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x * 3).sum().backward(); (x * x).sum().backward()          # gradients accumulate
  np.testing.assert_allclose(x.grad.numpy(), [3 + 2, 3 + 4])
  y = Tensor([1.0, 2.0], requires_grad=True)
  (y * 2).backward(Tensor([1.0, 10.0]))                         # explicit gradient for a non-scalar
  np.testing.assert_allclose(y.grad.numpy(), [2.0, 20.0])
  z = Tensor([3.0], requires_grad=True)
  assert (z.detach() * 2).requires_grad is False
  with Tensor.test(): assert (z * 2)._ctx is None
  with Tensor.train(): assert Tensor.training
  assert not Tensor.training
  Tensor.manual_seed(0)
  with Tensor.train(): d = Tensor.ones(1000).dropout(0.5).numpy()
  assert set(np.unique(d)) <= {0.0, 2.0} and 400 < (d == 0).sum() < 600
  np.testing.assert_array_equal(Tensor.ones(5).dropout(0.5).numpy(), np.ones(5))

@pytest.mark.parametrize("device", DEVICES)
def test_where_with_a_float_condition_that_requires_grad(device):
  "The condition gets no gradient (it only chooses); x and y get theirs, as in torch with cond.bool()."
  c0, x0, y0 = [1.0, 0.0, -2.0, 0.5], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]
  c, x, y = (Tensor(v, device=device, requires_grad=True) for v in (c0, x0, y0))
  (c.where(x, y) * Tensor([1.0, 2.0, 3.0, 4.0], device=device)).sum().backward()
  tc, tx, ty = (torch.tensor(v, requires_grad=True) for v in (c0, x0, y0))
  (torch.where(tc.bool(), tx, ty) * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
  assert c.grad is None and tc.grad is None
  np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
  np.testing.assert_array_equal(y.grad.numpy(), ty.grad.numpy())

@pytest.mark.parametrize("device", DEVICES)
def test_backward_retain_graph_accumulates_once_per_call(device):
  "Each backward(retain_graph=True) adds exactly one gradient, also through intermediates used twice."
  def run(lib, t):
    h = t.exp()
    loss = (h * h).sum() + (h * t).sum()
    loss.backward(retain_graph=True); loss.backward(retain_graph=True); loss.backward()
    return t.grad
  x0 = np.array([0.5, -1.0, 2.0], dtype=np.float32)
  ours = run(Tensor, Tensor(x0, device=device, requires_grad=True)).numpy()
  ref = run(torch, torch.tensor(x0, requires_grad=True)).numpy()
  np.testing.assert_allclose(ours, ref, rtol=1e-5)

def test_backward_twice_without_retain_graph_raises():
  x = Tensor([1.0, 2.0], requires_grad=True)
  loss = (x * x).sum()
  loss.backward()
  with pytest.raises(RuntimeError, match="second time.*retain_graph"): loss.backward()
  np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])   # the failed call added nothing
  tx = torch.tensor([1.0, 2.0], requires_grad=True); tl = (tx * tx).sum(); tl.backward()
  with pytest.raises(RuntimeError): tl.backward()

def test_casts_to_int_pass_no_gradient():
  "trunc/floor/ceil/round have zero gradient (as torch), and an int cast in the middle of a graph passes none."
  for name in ["trunc", "floor", "ceil", "round"]:
    x = Tensor([1.5, -2.5, 3e10], requires_grad=True)
    getattr(x, name)().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])
  x = Tensor([1.5, 2.5], requires_grad=True)
  (x.int().float() * x).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0])   # only the right factor's path carries a gradient

@pytest.mark.parametrize("fxn, match", [
  (lambda: Tensor.ones(2, 3) + Tensor.ones(4, 3), r"add: shapes \(2, 3\) and \(4, 3\) can't be broadcast"),
  (lambda: Tensor.ones(2, 3).reshape(4, 2), r"reshape: size mismatch, can't reshape \(2, 3\)"),
  (lambda: Tensor.ones(2, 3) @ Tensor.ones(2, 3), r"matmul: inner dimensions differ: \(2, 3\) @ \(2, 3\)"),
  (lambda: Tensor.ones(2, 3).sum(axis=2), r"axis 2 is out of range for a tensor of 2 dims"),
  (lambda: Tensor.ones(2, 3, requires_grad=True).mul(2).backward(), r"needs a scalar, but this tensor has shape \(2, 3\)"),
  (lambda: Tensor.ones(2) & Tensor.ones(2), r"bitwise_and needs integer or bool tensors, got dtypes.float"),
  (lambda: Tensor.ones(2, 3)[2], r"index 2 is out of bounds for dimension 0 with size 2"),
  (lambda: Tensor.ones(2, 3)[0, 0, 0], r"too many indices"),
  (lambda: Tensor.ones(2, 3).permute(0, 0), r"not a permutation"),
  (lambda: Tensor.ones(2, 3).sum(axis=(0, 0)), r"sum: axes \(0, 0\) name the same axis twice"),
  (lambda: Tensor.ones(2, 3).shrink(((0, 1), (0.5, 1.5))), r"shrink: bounds must be ints"),
  (lambda: Tensor(np.array([1j])), r"numpy dtype complex128 has no tinylit dtype"),
  (lambda: Tensor([1.0]).gather(0, Tensor([0.0])), r"gather: index must be an integer tensor, got dtypes.float"),
  (lambda: Tensor([[1, 2], [3]]), r"ragged"),
  (lambda: Tensor.ones(1, 2, 5, 5).conv2d(Tensor.ones(4, 3, 3, 3)), r"conv2d: input \(1, 2, 5, 5\) doesn't match weight \(4, 3, 3, 3\)"),
  (lambda: Tensor.ones(3).item(), r"item\(\) needs a tensor of one element"),
])
def test_clear_errors(fxn, match):
  with pytest.raises((ValueError, TypeError, IndexError, RuntimeError), match=match): fxn()

@pytest.mark.parametrize("device", DEVICES)
def test_more_compositions(device):
  rng = np.random.default_rng(0)
  x0 = rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
  t, x = Tensor(x0, device=device), torch.tensor(x0)
  def close(a, b, atol=1e-5): np.testing.assert_allclose(a.numpy(), b.numpy(), atol=atol, rtol=1e-4)
  for name in ["sinh", "cosh", "asinh", "atanh", "erf"]: close(getattr(t, name)(), getattr(x, name)(), 1e-6 if name == "erf" else 1e-5)
  close((t.abs() + 1.5).acosh(), (x.abs() + 1.5).acosh())
  close(t.celu(), torch.nn.functional.celu(x)); close(t.hardswish(), torch.nn.functional.hardswish(x))
  close(t.softsign(), torch.nn.functional.softsign(x))
  close(t.roll((2, -1), (0, 1)), x.roll((2, -1), (0, 1))); close(t.repeat_interleave(2, 1), x.repeat_interleave(2, 1))
  close(t.triu(1), x.triu(1)); close(t.tril(-1), x.tril(-1)); close(t.logcumsumexp(1), x.logcumsumexp(1))
  for ind in ["ij", "xy"]:
    for p, q in zip(Tensor.meshgrid(Tensor([1, 2, 3], device=device), Tensor([4, 5], device=device), indexing=ind),
                    torch.meshgrid(torch.tensor([1, 2, 3]), torch.tensor([4, 5]), indexing=ind)): close(p, q)
  y = np.array([0, 3, 1])
  close(t.log_softmax().nll_loss(Tensor(y, device=device), weight=Tensor([1., 2., 3., 4.], device=device)),
        torch.nn.functional.nll_loss(x.log_softmax(1), torch.tensor(y), weight=torch.tensor([1., 2., 3., 4.])))
  q, k, v = (rng.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(3))
  close(Tensor(q, device=device).scaled_dot_product_attention(Tensor(k, device=device), Tensor(v, device=device), is_causal=True),
        torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=True))
  np.testing.assert_array_equal(Tensor([1.0, float("inf"), float("-inf"), float("nan")], device=device).isinf().numpy(), [False, True, True, False])
  np.testing.assert_array_equal(Tensor([1.0, float("nan")], device=device).isnan().numpy(), [False, True])
  s = Tensor([1.0, 2.0], device=device).contiguous().realize(); s **= 2
  np.testing.assert_array_equal(s.numpy(), [1.0, 4.0])

def test_shapetracker_partial_read_of_expanded_view():
  "A contiguous top view that reads only part of the view below must not be merged into it."
  np.testing.assert_array_equal(Tensor.arange(5).reshape(1, 5).expand(4, 5).reshape(20).shrink(((0, 18),)).reshape(3, 6).numpy(),
                                np.tile(np.arange(5), 4)[:18].reshape(3, 6))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula, shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ij->ji", [(2, 3)]),
                                             ("ij->", [(2, 3)]), ("bij,jk->bik", [(5, 2, 3), (3, 4)]), ("i,j->ij", [(3,), (4,)]),
                                             ("bij,bij->b", [(5, 2, 3), (5, 2, 3)])])
def test_einsum(device, formula, shapes):
  rng = np.random.default_rng(len(formula))
  xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
  tt = [torch.tensor(x, requires_grad=True) for x in xs]
  lt = [Tensor(x, device=device, requires_grad=True) for x in xs]
  ref, out = torch.einsum(formula, *tt), Tensor.einsum(formula, *lt)
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=1e-5)
  ref.sum().backward(); out.sum().backward()
  for t, l in zip(tt, lt): np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), atol=1e-5)
