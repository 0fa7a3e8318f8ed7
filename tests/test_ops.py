"""Differential tests: every op, forwards and backwards, against torch (CPU wheel) on every device.

Each case builds the same inputs for torch and tinylit, runs the op, compares the result, then backpropagates
a fixed random weighting of the output and compares the input gradients. Inputs come contiguous and as views
(permuted, flipped, sliced), so movement ops and their index expressions are exercised too."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tinylit import Tensor

from devices import DEVICES, skip_without_half

# how an input reaches the op: (shape of the leaf for a wanted shape, torch view, tinylit view)
VIEWS = {
  "contiguous": (lambda s: s, lambda t: t, lambda t: t),
  "permuted": (lambda s: s[::-1], lambda t: t.permute(*range(t.ndim - 1, -1, -1)), lambda t: t.permute(*range(t.ndim - 1, -1, -1))),
  "flipped": (lambda s: s, lambda t: t.flip(0), lambda t: t.flip(0)),
  "sliced": (lambda s: (s[0] + 3,) + tuple(s[1:]), lambda t: t[1:-2], lambda t: t.shrink(((1, t.shape[0] - 2),) + (None,) * (t.ndim - 1))),
}

def check_op(device, shapes, torch_fxn, tinylit_fxn=None, *, low=-2.0, high=2.0, atol=1e-5, rtol=1e-4, grad=True,
             view="contiguous", dtype=np.float32, grad_atol=None):
  tinylit_fxn = tinylit_fxn or torch_fxn
  rng = np.random.default_rng(sum(map(sum, shapes)) + len(shapes))
  leaf_shape, tview, lview = VIEWS[view]
  if any(len(s) == 0 for s in shapes): leaf_shape, tview, lview = VIEWS["contiguous"]
  leaves = [rng.uniform(low, high, size=leaf_shape(s)).astype(dtype) if np.issubdtype(dtype, np.floating)
            else rng.integers(low, high, size=leaf_shape(s)).astype(dtype) for s in shapes]
  grad = grad and np.issubdtype(dtype, np.floating)
  tt = [torch.tensor(x, requires_grad=grad) for x in leaves]
  tl = [Tensor(x, device=device, requires_grad=grad) for x in leaves]
  t_out, l_out = torch_fxn(*[tview(t) for t in tt]), tinylit_fxn(*[lview(t) for t in tl])
  ref = t_out.detach().numpy()
  got = l_out.numpy()
  assert got.shape == ref.shape, f"shape {got.shape} != torch {ref.shape}"
  np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol, equal_nan=True)
  if not grad or not t_out.requires_grad: return
  w = rng.uniform(-1, 1, size=ref.shape).astype(np.float32)
  (t_out * torch.tensor(w)).sum().backward()
  (l_out * Tensor(w, device=device)).sum().backward()
  for i, (t, l) in enumerate(zip(tt, tl)):
    if t.grad is None: continue
    assert l.grad is not None, f"input {i} got no gradient"
    np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), atol=grad_atol or atol * 10, rtol=rtol * 10,
                               err_msg=f"gradient of input {i}")

def kernels_bind_many_buffers(device: str) -> bool:
  "A kernel of 12 buffers: the renderer must pass them in buffer order (data10 after data9, not after data1)."
  parts = [Tensor([float(i)], device=device).contiguous().realize() for i in range(11)]
  total = parts[0]
  for i, p in enumerate(parts[1:], 1): total = total + p * 2 ** i
  return total.item() == sum(i * 2 ** i for i in range(11))

UNARY = {
  "neg": (lambda x: -x, {}), "exp": (lambda x: x.exp(), {}), "exp2": (lambda x: x.exp2(), {}),
  "log": (lambda x: x.log(), {"low": 0.1}), "log2": (lambda x: x.log2(), {"low": 0.1}),
  "sqrt": (lambda x: x.sqrt(), {"low": 0.1}), "rsqrt": (lambda x: x.rsqrt(), {"low": 0.2}),
  "sin": (lambda x: x.sin(), {}), "cos": (lambda x: x.cos(), {}), "tan": (lambda x: x.tan(), {"low": -1.2, "high": 1.2}),
  "relu": (lambda x: x.relu(), {}), "sigmoid": (lambda x: x.sigmoid(), {}), "tanh": (lambda x: x.tanh(), {}),
  "abs": (lambda x: x.abs(), {}), "reciprocal": (lambda x: x.reciprocal(), {"low": 0.5}),
  "square": (lambda x: x.square(), {}), "sign": (lambda x: x.sign(), {}),
  "silu": (lambda x: torch.nn.functional.silu(x), {"tl": lambda x: x.silu()}),
  "gelu": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), {"tl": lambda x: x.gelu()}),
  "leaky_relu": (lambda x: torch.nn.functional.leaky_relu(x, 0.01), {"tl": lambda x: x.leaky_relu(0.01)}),
  "elu": (lambda x: torch.nn.functional.elu(x), {"tl": lambda x: x.elu()}),
  "softplus": (lambda x: torch.nn.functional.softplus(x), {"tl": lambda x: x.softplus()}),
  "hardtanh": (lambda x: torch.nn.functional.hardtanh(x), {"tl": lambda x: x.hardtanh()}),
  "clip": (lambda x: x.clip(-0.5, 0.7), {}),
  "relu6": (lambda x: torch.nn.functional.relu6(x * 4), {"tl": lambda x: (x * 4).relu6()}),
  "hardsigmoid": (lambda x: torch.nn.functional.hardsigmoid(x * 4), {"tl": lambda x: (x * 4).hardsigmoid()}),
  "hardswish": (lambda x: torch.nn.functional.hardswish(x * 4), {"tl": lambda x: (x * 4).hardswish()}),
  "cos_large": (lambda x: (x * 5000).cos(), {"tl": lambda x: (x * 5000).cos(), "atol": 1e-5, "grad_atol": 2e-2}),
  "sin_large": (lambda x: (x * 5000).sin(), {"tl": lambda x: (x * 5000).sin(), "atol": 1e-5, "grad_atol": 2e-2}),
  "asinh": (lambda x: (x * 50).asinh(), {"tl": lambda x: (x * 50).asinh()}),
  "acosh": (lambda x: (x.abs() * 50 + 1.01).acosh(), {"tl": lambda x: (x.abs() * 50 + 1.01).acosh()}),
  "floor": (lambda x: x.floor(), {}), "ceil": (lambda x: x.ceil(), {}), "round": (lambda x: (x * 2).round(), {}),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("view", ["contiguous", "permuted"])
def test_unary(device, name, view):
  fxn, kw = UNARY[name]
  kw = dict(kw)
  check_op(device, [(3, 5)], fxn, kw.pop("tl", None), view=view, **kw)

BINARY = {
  "add": (lambda a, b: a + b, {}), "sub": (lambda a, b: a - b, {}), "mul": (lambda a, b: a * b, {}),
  "div": (lambda a, b: a / b, {"low": 0.5}), "pow": (lambda a, b: a ** b, {"low": 0.5}),
  "maximum": (lambda a, b: torch.maximum(a, b), {"tl": lambda a, b: a.maximum(b)}),
  "minimum": (lambda a, b: torch.minimum(a, b), {"tl": lambda a, b: a.minimum(b)}),
  "lt": (lambda a, b: a < b, {}), "gt": (lambda a, b: a > b, {}), "le": (lambda a, b: a <= b, {}),
  "ge": (lambda a, b: a >= b, {}), "eq": (lambda a, b: a.floor() == b.floor(), {}),
  "ne": (lambda a, b: a != b, {}),
  "where": (lambda a, b: torch.where(a > b, a, b), {"tl": lambda a, b: (a > b).where(a, b)}),
  "matmul": (lambda a, b: a @ b.T, {}),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("view", ["contiguous", "flipped", "sliced"])
def test_binary(device, name, view):
  fxn, kw = BINARY[name]
  kw = dict(kw)
  check_op(device, [(4, 3), (4, 3)], fxn, kw.pop("tl", None), view=view, **kw)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [[(4, 3), (3,)], [(4, 1), (1, 3)], [(2, 1, 3), (4, 1)], [(3,), ()]])
@pytest.mark.parametrize("op", ["add", "mul", "div", "sub"])
def test_broadcast(device, shapes, op):
  fxn = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b, "sub": lambda a, b: a - b}[op]
  check_op(device, shapes, fxn, low=0.5)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scalar", [2, 0.5, -3])
def test_scalar_both_sides(device, scalar):
  for fxn in [lambda x: x + scalar, lambda x: scalar + x, lambda x: x * scalar, lambda x: scalar * x,
              lambda x: x - scalar, lambda x: scalar - x, lambda x: x / scalar, lambda x: scalar / x]:
    check_op(device, [(2, 3)], fxn, low=0.5)

REDUCE = {
  "sum": (lambda x: x.sum(), None), "sum0": (lambda x: x.sum(0), None), "sum_neg": (lambda x: x.sum(-1), None),
  "sum_keep": (lambda x: x.sum(1, keepdim=True), None), "sum_tuple": (lambda x: x.sum((0, 2)), None),
  "max": (lambda x: x.max(), lambda x: x.max()), "max1": (lambda x: x.amax(1), lambda x: x.max(1)),
  "min0": (lambda x: x.amin(0), lambda x: x.min(0)), "mean": (lambda x: x.mean(), None),
  "mean1": (lambda x: x.mean(1, keepdim=True), lambda x: x.mean(1, keepdim=True)),
  "var": (lambda x: x.var(1), lambda x: x.var(1)), "std": (lambda x: x.std(), lambda x: x.std()),
  "prod": (lambda x: x.prod(1), lambda x: x.prod(1)),
  "softmax": (lambda x: x.softmax(-1), lambda x: x.softmax(-1)),
  "log_softmax": (lambda x: x.log_softmax(1), lambda x: x.log_softmax(1)),
  "logsumexp": (lambda x: x.logsumexp(2), lambda x: x.logsumexp(2)),
  "cumsum": (lambda x: x.cumsum(1), lambda x: x.cumsum(1)),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(REDUCE))
@pytest.mark.parametrize("view", ["contiguous", "permuted", "flipped"])
def test_reduce(device, name, view):
  tfxn, lfxn = REDUCE[name]
  check_op(device, [(3, 4, 5)], tfxn, lfxn, view=view)

@pytest.mark.parametrize("device", DEVICES)
def test_argmax_argmin(device):
  check_op(device, [(4, 6)], lambda x: x.argmax(1), lambda x: x.argmax(1), grad=False)
  check_op(device, [(4, 6)], lambda x: x.argmin(0), lambda x: x.argmin(0), grad=False)
  check_op(device, [(4, 6)], lambda x: x.argmax(), lambda x: x.argmax(), grad=False)

MOVEMENT = {
  "reshape": (lambda x: x.reshape(6, 4), None), "reshape_neg": (lambda x: x.reshape(-1, 2), None),
  "permute": (lambda x: x.permute(2, 0, 1), None), "transpose": (lambda x: x.transpose(0, 2), None),
  "expand": (lambda x: x[:, :1].expand(2, 5, 4), lambda x: x.shrink((None, (0, 1), None)).expand(2, 5, 4)),
  "pad": (lambda x: torch.nn.functional.pad(x, (1, 2, 0, 1)), lambda x: x.pad(((0, 0), (0, 1), (1, 2)))),
  "pad_value": (lambda x: torch.nn.functional.pad(x, (1, 1), value=3.0), lambda x: x.pad((1, 1), value=3.0)),
  "shrink": (lambda x: x[:, 1:3, 2:], lambda x: x.shrink((None, (1, 3), (2, 4)))),
  "flip": (lambda x: x.flip(1), lambda x: x.flip(1)), "flip2": (lambda x: x.flip((0, 2)), lambda x: x.flip((0, 2))),
  "flatten": (lambda x: x.flatten(1), lambda x: x.flatten(1)),
  "squeeze": (lambda x: x[:1].squeeze(0), lambda x: x.shrink(((0, 1), None, None)).squeeze(0)),
  "unsqueeze": (lambda x: x.unsqueeze(1), None), "T_sum": (lambda x: x.sum(0).T, lambda x: x.sum(0).T),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement(device, name):
  tfxn, lfxn = MOVEMENT[name]
  check_op(device, [(2, 3, 4)], tfxn, lfxn)

@pytest.mark.parametrize("device", DEVICES)
def test_movement_chain_then_math(device):
  "Views of views through elementwise ops and a reduce: padding must stay zero even after exp."
  check_op(device, [(3, 4)], lambda x: torch.nn.functional.pad(x.flip(0).T, (1, 0, 0, 2)).exp().sum(0),
           lambda x: x.flip(0).T.pad(((0, 2), (1, 0))).exp().sum(0))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [[(3, 4), (4, 5)], [(2, 3, 4), (4, 2)], [(4,), (4, 3)], [(3, 4), (4,)], [(2, 1, 3, 4), (5, 4, 2)]])
def test_matmul_shapes(device, shapes):
  check_op(device, shapes, lambda a, b: a @ b)

@pytest.mark.parametrize("device", DEVICES)
def test_integer_division_and_mod(device):
  a = np.array([-7, 7, -7, 7, 0, 9], dtype=np.int32)
  b = np.array([2, 2, -2, -2, 3, -4], dtype=np.int32)
  ta, tb = torch.tensor(a), torch.tensor(b)
  la, lb = Tensor(a, device=device), Tensor(b, device=device)
  np.testing.assert_array_equal((la // lb).numpy(), (ta // tb).numpy())
  np.testing.assert_array_equal((la % lb).numpy(), (ta % tb).numpy())
  np.testing.assert_array_equal(la.div(lb, rounding_mode="trunc").numpy(), torch.div(ta, tb, rounding_mode="trunc").numpy())

@pytest.mark.parametrize("device", DEVICES)
def test_exp_log_extremes(device):
  x = np.array([-100.0, -20.0, 0.0, 20.0, 80.0], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x, device=device).exp().numpy(), np.exp(x), rtol=1e-5)
  y = np.array([1e-30, 1e-5, 1.0, 1e10, 3e38], dtype=np.float32)
  np.testing.assert_allclose(Tensor(y, device=device).log().numpy(), np.log(y), rtol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
def test_casts_and_dtypes(device):
  x = np.array([-2.7, -0.5, 0.0, 1.5, 3.9], dtype=np.float32)
  t = Tensor(x, device=device)
  np.testing.assert_array_equal(t.cast("int32").numpy(), x.astype(np.int32))
  np.testing.assert_array_equal(t.cast("bool").numpy(), x.astype(bool))
  np.testing.assert_array_equal((t > 0).numpy(), x > 0)
  assert (Tensor([1.0], device=device).half() + 3).dtype.name == "half"
  assert (Tensor([1, 2], device=device) + 1.5).dtype.name == "float"
  assert (Tensor([1, 2], device=device) * True).dtype.name == "int"

MORE = {
  "swish": (lambda x: torch.nn.functional.silu(x), lambda x: x.swish()),
  "unflatten": (lambda x: x.unflatten(1, (2, 2)), lambda x: x.unflatten(1, (2, 2))),
  "dot": (lambda x: x @ x.T, lambda x: x.dot(x.T)),
  "size1_sum": (lambda x: x[:, :1].sum(1), lambda x: x.shrink((None, (0, 1))).sum(1)),
  "size1_max": (lambda x: x[:1].amax(0), lambda x: x.shrink(((0, 1), None)).max(0)),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(MORE))
def test_more(device, name):
  check_op(device, [(3, 4)], *MORE[name])

@pytest.mark.parametrize("device", DEVICES)
def test_linear_any_all_logical(device):
  check_op(device, [(2, 3), (4, 3), (4,)], lambda x, w, b: torch.nn.functional.linear(x, w, b), lambda x, w, b: x.linear(w.T, b))
  x = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
  t = Tensor(x, device=device)
  np.testing.assert_array_equal(t.any(1).numpy(), x.any(1)); np.testing.assert_array_equal(t.all().numpy(), x.all())
  np.testing.assert_array_equal((t > 0).logical_not().numpy(), ~(x > 0))

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", DTYPES)
def test_every_dtype(device, dt):
  "Arithmetic, comparison, reduction and casts in every dtype, compared with numpy (C wrap-around for ints)."
  if dt == "float16": skip_without_half(device)
  from tinylit.dtype import to_dtype
  npdt = to_dtype(dt).np
  rng = np.random.default_rng(DTYPES.index(dt))
  a = rng.integers(0, 2, 6).astype(npdt) if dt == "bool" else \
    (rng.uniform(-50, 50, 6) if "int" not in dt or dt.startswith("int") else rng.uniform(0, 100, 6)).astype(npdt)
  b = rng.integers(0, 2, 6).astype(npdt) if dt == "bool" else (rng.uniform(1, 20, 6)).astype(npdt)
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  assert ta.dtype.name == to_dtype(dt).name
  if dt != "bool":
    np.testing.assert_allclose((ta + tb).numpy(), a + b, rtol=1e-3)
    np.testing.assert_allclose((ta * tb).numpy(), a * b, rtol=1e-3)
    np.testing.assert_allclose(ta.max().numpy(), a.max())
  np.testing.assert_array_equal((ta < tb).numpy(), a < b)
  np.testing.assert_allclose(ta.cast("float32").numpy(), a.astype(np.float32), rtol=1e-3)
  np.testing.assert_array_equal(tb.cast("int32").numpy(), b.astype(np.int32))
