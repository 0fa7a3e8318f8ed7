"""exp2 and log2 built from ALU ops (chapter 6a's `transcendental` rewrite), on every device (issue 17: a libm call per
value kept the GELU tail of a matmul scalar). The CPU's C renderer asks for them in float16 and float32; the other
devices keep their math functions unless TRANSCENDENTAL=2 forces the rewrite, so every test runs both ways where the
two differ. Errors are in ulps of the float32 (float16) result, against numpy in float64 rounded once."""
import warnings

import numpy as np
import pytest

from tinylit import Tensor, TinyJit, dtypes
from tinylit.helpers import Context
from tinylit.ops import Ops
from tinylit.realize import method_cache
from devices import DEVICES, skip_without_half

# "device": the device's own choice (the rewrite on CPU, its math functions elsewhere); "alu": forced everywhere
MODES = ["device", "alu"]


@pytest.fixture
def mode(request):
  "Run the test with the mode's TRANSCENDENTAL; compiled kernels are cached by AST, so none is kept across modes."
  method_cache.clear()
  with Context(TRANSCENDENTAL=2 if request.param == "alu" else 1): yield request.param
  method_cache.clear()


def rewritten(device: str, mode: str) -> bool: return mode == "alu" or device == "CPU"


def op(x: np.ndarray, o: Ops, device: str) -> np.ndarray:
  "The bare EXP2 / LOG2 op on `x` (Tensor.exp2 goes through exp, x*ln2 then *1/ln2, which rounds twice)."
  return Tensor(Tensor(x, device=device).lazydata.alu(o)).numpy()


def ulps(got: np.ndarray, x: np.ndarray, fn, dt=np.float32) -> np.ndarray:
  "|got - fn(x)| in units of the last place of the exact result rounded to `dt`; a NaN or inf must match exactly."
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    exact = fn(x.astype(np.float64))
    rounded = exact.astype(dt)
    err = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(rounded)).astype(np.float64)
  special = ~np.isfinite(rounded) | ~np.isfinite(got)
  same = (got.astype(np.float64) == rounded.astype(np.float64)) | (np.isnan(got) & np.isnan(rounded))
  return np.where(special, np.where(same, 0.0, np.inf), err)


def exp2_inputs() -> np.ndarray:
  rng = np.random.default_rng(0)
  return np.concatenate([rng.uniform(-155, 130, 50_001), np.linspace(-1, 1, 4_001), rng.uniform(-150, -126, 2_000),
                         np.arange(-150, 129)]).astype(np.float32)


def log2_inputs() -> np.ndarray:
  rng = np.random.default_rng(1)
  return np.concatenate([np.exp(rng.uniform(-103, 88.7, 50_001)), np.linspace(0.5, 2, 4_001),
                         rng.uniform(0, 1.2e-38, 2_000), 2.0 ** np.arange(-149, 128)]).astype(np.float32)


def check_edges(x: np.ndarray, got: np.ndarray, fn, device: str, mode: str, bound: float) -> None:
  "inf, NaN and 0 exactly as numpy (in float64, rounded to float32) gives them; the rest within `bound` ulps (3 for libm)."
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    want = fn(x.astype(np.float64)).astype(np.float32)
  if device == "CL" and not rewritten(device, mode):   # PoCL may flush denormals (in or out) to zero
    denormal = lambda v: (np.abs(v) < np.finfo(np.float32).tiny) & (v != 0)
    keep = ~(denormal(x) | denormal(want))
    x, got, want = x[keep], got[keep], want[keep]
  special = ~np.isfinite(want) | (want == 0)
  np.testing.assert_array_equal(got[special], want[special], err_msg=f"{fn.__name__} on {device} at {x[special]}")
  err = ulps(got, x, fn)
  assert err.max() <= (bound if rewritten(device, mode) else 3.0), f"{fn.__name__} on {device}: {err.max():.2f} ulps at x={x[err.argmax()]!r}"


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
def test_exp2_accuracy(device, mode):
  x = exp2_inputs()
  err = ulps(op(x, Ops.EXP2, device), x, np.exp2)
  bound = 1.5 if rewritten(device, mode) else 3.0   # OpenCL allows its exp2 3 ulps
  assert err.max() <= bound, f"exp2 on {device}: {err.max():.2f} ulps at x={x[err.argmax()]!r}"


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
def test_log2_accuracy(device, mode):
  x = log2_inputs()
  err = ulps(op(x, Ops.LOG2, device), x, np.log2)
  bound = 2.0 if rewritten(device, mode) else 3.0
  assert err.max() <= bound, f"log2 on {device}: {err.max():.2f} ulps at x={x[err.argmax()]!r}"


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
def test_exp2_edges(device, mode):
  x = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 128, 127.99999, 200, 1e30, -1e30, -149, -149.5, -150, -151,
                -126, -126.5, -140.25, 1e-30, -1e-30], np.float32)
  check_edges(x, op(x, Ops.EXP2, device), np.exp2, device, mode, 1.5)


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
def test_log2_edges(device, mode):
  x = np.array([0.0, -0.0, -1.0, -1e-45, -np.inf, np.inf, np.nan, 1.0, 2.0, 0.5, 1e-45, 3e-45, 1.1754942e-38,
                1.1754944e-38, 3.4028235e38, 1.0000001, 0.99999994], np.float32)
  check_edges(x, op(x, Ops.LOG2, device), np.log2, device, mode, 2.0)


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
def test_half(device, mode):
  "float16 computes in float32 and rounds once: within one float16 ulp, edges included."
  skip_without_half(device)
  x = np.concatenate([np.linspace(-26, 16.5, 3_001), [np.inf, -np.inf, np.nan, 0]]).astype(np.float16)
  assert ulps(op(x, Ops.EXP2, device), x, np.exp2, np.float16).max() <= 1.0
  y = np.concatenate([np.geomspace(6e-8, 65504, 3_001), [0, -1, np.inf, np.nan]]).astype(np.float16)
  assert ulps(op(y, Ops.LOG2, device), y, np.log2, np.float16).max() <= 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_float64_keeps_libm(device):
  "float64 is not rewritten (its polynomials would be longer): the CPU kernel calls exp2(), accurate to an ulp."
  if device == "CL": pytest.skip("PoCL's CPU device has no float64 here")
  x = np.linspace(-1000, 1000, 4_001)
  got = op(x, Ops.EXP2, device)
  np.testing.assert_allclose(got, np.exp2(x), rtol=3e-16)


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 3, 17, 1023, 4096, 65_536, 65_537])
def test_long_and_odd_lengths(device, mode, n):
  "Vector kernels (the heuristic upcasts long arrays) and their odd tails give what the scalar rewrite gives."
  x = np.random.default_rng(n).uniform(-140, 120, n).astype(np.float32)
  assert ulps(op(x, Ops.EXP2, device), x, np.exp2).max() <= 3.0
  y = np.abs(x) + np.float32(1e-30)
  assert ulps(op(y, Ops.LOG2, device), y, np.log2).max() <= 3.0
  # through the Tensor API, fused with the ops around it
  t = Tensor(x / 100, device=device)
  np.testing.assert_allclose(t.sigmoid().numpy(), 1 / (1 + np.exp(-x.astype(np.float64) / 100)), rtol=2e-6, atol=1e-7)
  np.testing.assert_allclose(t.exp().log().numpy(), x / 100, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("mode", MODES, indirect=True)
@pytest.mark.parametrize("device", DEVICES)
def test_gelu_matmul(device, mode):
  "The GPT's MLP shape, (x @ W.T).gelu(), under TinyJit: the GELU tail fused into the matmul kernel."
  rng = np.random.default_rng(0)
  xs, ws = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((96, 128)).astype(np.float32) / 8
  step = TinyJit(lambda x, w: (x @ w.T).gelu().realize())
  x, w = Tensor(xs, device=device).realize(), Tensor(ws, device=device).realize()
  for _ in range(3): out = step(x, w).numpy()
  h = xs.astype(np.float64) @ ws.T.astype(np.float64)
  want = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
  np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_cpu_vectors_call_no_libm():
  """The reason for the rewrite: the CPU's vectorized float32 kernels of exp, log and sigmoid call no exp2f/log2f.
  A value computed one at a time (the GELU after a matmul whose vector axis is the reduce) keeps exp2f, unless
  TRANSCENDENTAL=2; float64 keeps exp2()."""
  from tinylit.schedule import create_schedule
  from tinylit.realize import get_program
  from tinylit.device import Device
  def src(t: Tensor) -> str:
    (si,) = create_schedule([t.lazydata])
    return get_program(si.ast, Device["CPU"].renderer).src
  x = Tensor(np.linspace(0.1, 4, 4096, dtype=np.float32)).realize()
  for t in (x.exp(), x.log(), x.sigmoid()):
    s = src(t)
    assert "float16" in s and "exp2f(" not in s and "log2f(" not in s, s
  a, w = Tensor(np.ones((64, 128), np.float32)).realize(), Tensor(np.ones((96, 128), np.float32)).realize()
  assert "exp2f(" in src((a @ w.T).gelu())
  with Context(TRANSCENDENTAL=2): assert "exp2f(" not in src((a @ w.T).gelu())
  x64 = Tensor(np.linspace(0.1, 4, 64)).realize()
  assert "exp2(" in src(x64.exp())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [16, 4096, 4099, 65_536])   # 4096 and 65536 become 16-wide vectors on the CPU
def test_vector_masks(device, n):
  """The C renderer's vector compares give masks of -1 (chapter 7): a compare that is cast, stored as bool, selected
  on or combined must still mean 1/True, and int32 vector arithmetic still wraps like numpy's."""
  rng = np.random.default_rng(n)
  a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  np.testing.assert_array_equal((ta < tb).cast(dtypes.float32).numpy(), (a < b).astype(np.float32))
  np.testing.assert_array_equal((ta < tb).numpy(), a < b)
  np.testing.assert_array_equal((ta != tb * 0 + ta).numpy(), np.zeros(n, bool))
  np.testing.assert_array_equal((ta < tb).where(ta, tb).numpy(), np.where(a < b, a, b))
  np.testing.assert_array_equal(((ta < 0) & (tb < 0)).numpy(), (a < 0) & (b < 0))
  np.testing.assert_array_equal((ta < 0).where(1.0, 0.0).sum().numpy(), np.float32((a < 0).sum()))
  big = rng.integers(2**30, 2**31 - 1, n, dtype=np.int32)
  ti = Tensor(big, device=device)
  with np.errstate(over="ignore"):
    np.testing.assert_array_equal((ti + ti).numpy(), big + big)
    np.testing.assert_array_equal((ti * 3).numpy(), big * np.int32(3))
  np.testing.assert_array_equal((ti < 2**30 + 2**29).where(ti, -ti).numpy(), np.where(big < 2**30 + 2**29, big, -big))
  np.testing.assert_array_equal(ti.cast(dtypes.float32).numpy(), big.astype(np.float32))
  np.testing.assert_array_equal(ta.bitcast(dtypes.int32).numpy(), a.view(np.int32))
