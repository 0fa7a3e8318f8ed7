"""A fixed regression corpus for the issue "No silent wrong answers": one or more explicit programs for each
failure class found so far (the class numbers follow the issue). Each test fails while its class is open and must
pass once it is fixed. Cases that can crash or corrupt the process (out-of-bounds reads and writes, integer
division traps, a damaged compile cache) run in a child Python process, so a crash is one failed test."""
import math, os, subprocess, sys, tempfile, time
from pathlib import Path

import numpy as np
import pytest

from tinylit import Tensor, TinyJit, dtypes, nn
from tinylit.device import Device
from devices import DEVICES, devices, skip_without_half, unavailable

TESTS = str(Path(__file__).resolve().parent)


def _available(dev: str) -> bool: return unavailable(dev) is None


def _has_half(dev: str) -> bool:
  try: return (Tensor(np.array([1.5], np.float16), device=dev) + 1).numpy()[0] == 2.5
  except Exception: return False


ALL = DEVICES
COMPILED = devices(*[d for d in Device._devices if d != "PYTHON"])   # the devices that run generated code


def in_child(case: str, *args, timeout: float = 120, env: dict | None = None) -> str:
  "Run `case(*args)` of this module in a new Python process; a crash or a failed assert there fails the test."
  code = f"import sys; sys.path.insert(0, {TESTS!r}); import test_regressions as m; m.{case}(*{args!r})"
  try:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
  except subprocess.TimeoutExpired:
    pytest.fail(f"{case}{args}: no result within {timeout} s", pytrace=False)
  if proc.returncode != 0:
    import signal
    how = (f"the process was killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
           else f"exit code {proc.returncode}")
    pytest.fail(f"{case}{args}: {how}\n{proc.stderr[-3000:]}", pytrace=False)
  return proc.stdout


def close(got, want, rtol=1e-6, atol=0.0, what=""):
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def equal(got, want, what=""):
  np.testing.assert_array_equal(got, want, err_msg=what)


# ---- 1. kernel arguments in the wrong order for kernels with >= 11 buffers ("data10" sorts before "data2")

def case_many_buffers(device):
  rng = np.random.default_rng(1)
  xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(12)]
  ts = [Tensor(x, device=device) for x in xs]
  got, want = ts[0], xs[0]
  for k in range(1, 12):
    got, want = got * (k + 1) + ts[k], want * np.float32(k + 1) + xs[k]
  close(got.numpy(), want, rtol=1e-5, what="12 inputs fused into one kernel")
  # the same through a reduce kernel
  close((ts[0] * ts[1] + ts[2] - ts[3] + ts[4] * ts[5] + ts[6] + ts[7] + ts[8] + ts[9] + ts[10] + ts[11]).sum(1).numpy(),
        (xs[0] * xs[1] + xs[2] - xs[3] + xs[4] * xs[5] + xs[6] + xs[7] + xs[8] + xs[9] + xs[10] + xs[11]).sum(1),
        rtol=1e-5, what="12 inputs into one reduce kernel")


@pytest.mark.parametrize("device", ALL)
def test_many_buffers(device): in_child("case_many_buffers", device)


# ---- 2. a buffer whose loads all simplify away is dropped from the signature, shifting the others

def case_dropped_where(device):
  a, b, c = (Tensor(np.array(v, np.float32), device=device) for v in ([1., -1., 2.], [10., 20., 30.], [1., 2., 3.]))
  equal(((a > 0).where(b, b) + c).numpy(), [11., 22., 33.], "(a > 0).where(b, b) + c")


def case_dropped_padding(device):
  x = Tensor(np.array([1., 2., 3.], np.float32), device=device)
  b = Tensor(np.array([5., 6., 7.], np.float32), device=device)
  only_padding = x.pad(((0, 3),)).shrink(((3, 6),))  # sees nothing of x
  equal((only_padding + b).numpy(), [5., 6., 7.], "a padded view that only sees padding, plus b")


def case_dropped_pow_of_reduce(device):
  x = Tensor(np.array([[1., 3.], [2., 2.]], np.float32), device=device)
  # pow's sign/nan logic reads the exponent in places that simplify away, dropping the reduce's buffer
  close((0.5 ** x.sum(1)).numpy(), np.float32(0.5) ** np.array([4., 4.], np.float32), what="0.5 ** x.sum(1)")
  w = Tensor(np.array([1., 3.], np.float32), device=device)
  close((0.5 ** (x @ w)).numpy(), np.float32(0.5) ** np.array([10., 8.], np.float32), what="0.5 ** (x @ w)")


def case_dropped_cat_backward(device):
  x = Tensor(np.array([1., 2.], np.float32), device=device, requires_grad=True)
  empty = Tensor(np.zeros(0, np.float32), device=device, requires_grad=True)
  z = Tensor(np.array([3.], np.float32), device=device, requires_grad=True)
  (x.cat(empty, z) * Tensor(np.array([1., 2., 3.], np.float32), device=device)).sum().backward()
  equal(x.grad.numpy(), [1., 2.], "x.grad through cat with an empty piece")
  equal(z.grad.numpy(), [3.], "z.grad through cat with an empty piece")
  assert empty.grad is None or empty.grad.shape == (0,)


@pytest.mark.parametrize("device", ALL)
@pytest.mark.parametrize("case", ["case_dropped_where", "case_dropped_pow_of_reduce", "case_dropped_padding",
                                  "case_dropped_cat_backward"])
def test_dropped_buffer(case, device): in_child(case, device)


# ---- 3. narrow integers don't wrap inside a bigger expression

@pytest.mark.parametrize("device", ALL)
def test_narrow_ints_wrap(device):
  a = Tensor(np.array([4, 100], np.uint8), device=device)
  want = np.array([4, 100], np.uint8) - np.uint8(60)  # [200, 40]
  equal((a - 60).numpy(), want, "uint8 a - 60")
  equal((a - 60).cast(dtypes.float32).numpy(), want.astype(np.float32), "(a - 60).cast(float32)")
  equal((a - 60).cast(dtypes.int32).numpy(), want.astype(np.int32), "(a - 60).cast(int32)")
  equal(((a - 60) // 2).numpy(), want // 2, "(a - 60) // 2")
  equal(((a - 60) < 100).numpy(), want < 100, "(a - 60) < 100")
  b = Tensor(np.array([100, -100], np.int8), device=device)
  equal((b + b).cast(dtypes.int32).numpy(), (np.array([100, -100], np.int8) * np.int8(2)).astype(np.int32),
        "int8 b + b cast to int32")


# ---- 4. signed overflow is undefined behaviour in the generated C (gcc folds INT_MAX + 1 > 0 to true)

@pytest.mark.parametrize("device", ALL)
def test_signed_overflow_wraps(device):
  big = Tensor(np.array([2**31 - 1, 5], np.int32), device=device)
  equal((big + 1 > 0).numpy(), [False, True], "INT_MAX + 1 > 0")
  equal((big + 1).numpy(), np.array([-2**31, 6], np.int32), "INT_MAX + 1")
  equal((big * 2 < big).numpy(), [True, False], "INT_MAX * 2 < INT_MAX")


# ---- 5. integer division by zero (literal divisors included) and INT_MIN // -1 must not kill the process

def case_int_division(device):
  a = Tensor(np.array([7, -7, 0, -2**31], np.int32), device=device)
  want_div0 = np.zeros(4, np.int32)  # numpy's answer (with a warning), and tinygrad's
  equal((a // 0).numpy(), want_div0, "a // 0 (literal zero)")
  equal((a % 0).numpy(), want_div0, "a % 0 (literal zero)")
  equal(a.idiv(0).numpy(), want_div0, "a.idiv(0)")
  zero = Tensor(np.zeros(4, np.int32), device=device)
  equal((a // zero).numpy(), want_div0, "a // zeros")
  minus1 = Tensor(np.full(4, -1, np.int32), device=device)
  with np.errstate(all="ignore"): want = np.array([7, -7, 0, -2**31], np.int32) // np.int32(-1)
  equal((a // -1).numpy(), want, "a // -1 (INT_MIN // -1 wraps)")
  equal((a // minus1).numpy(), want, "a // tensor of -1")
  equal((a % -1).numpy(), np.zeros(4, np.int32), "a % -1")


@pytest.mark.parametrize("device", ALL)
def test_int_division_no_crash(device): in_child("case_int_division", device)


# ---- 6. NaN is lost by max/min reductions, maximum/minimum, clip, the relu family; sign(nan) must be nan

@pytest.mark.parametrize("device", ALL)
def test_nan_propagates(device):
  nan = float("nan")
  x = Tensor(np.array([1., nan, 3.], np.float32), device=device)
  one = Tensor(np.array([1., 1., 1.], np.float32), device=device)
  assert math.isnan(x.max().item()), "max() of [1, nan, 3]"
  assert math.isnan(x.min().item()), "min() of [1, nan, 3]"
  assert math.isnan(Tensor(np.array([nan, 1.], np.float32), device=device).max().item()), "max() of [nan, 1]"
  equal(x.maximum(one).numpy(), [1., nan, 3.], "x.maximum(1)")
  equal(one.maximum(x).numpy(), [1., nan, 3.], "ones.maximum(x)")
  equal(x.minimum(one).numpy(), [1., nan, 1.], "x.minimum(1)")
  equal(one.minimum(x).numpy(), [1., nan, 1.], "ones.minimum(x)")
  equal(x.clip(0, 2).numpy(), [1., nan, 2.], "clip(0, 2)")
  equal(x.relu().numpy(), [1., nan, 3.], "relu")
  equal(x.relu6().numpy(), [1., nan, 3.], "relu6")
  equal(x.hardtanh().numpy(), [1., nan, 1.], "hardtanh")
  equal(x.leaky_relu().numpy(), [1., nan, 3.], "leaky_relu")
  equal(x.sign().numpy(), [1., nan, 1.], "sign")



@pytest.mark.parametrize("device", ALL)
def test_nan_propagates_in_vectors(device):
  "The same on shapes a CPU kernel computes in whole vectors (a float32 max is a select there, chapter 7)."
  rng = np.random.default_rng(7)
  x, y = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
  x[3, 5] = x[10, 40] = y[20, 7] = y[3, 5] = np.nan
  tx, ty = Tensor(x, device=device), Tensor(y, device=device)
  equal(tx.max(axis=1).numpy(), x.max(axis=1), "max(axis=1)")
  equal(tx.max(axis=0).numpy(), x.max(axis=0), "max(axis=0)")
  equal(tx.maximum(ty).numpy(), np.maximum(x, y), "x.maximum(y)")
  equal(ty.maximum(tx).numpy(), np.maximum(y, x), "y.maximum(x)")
  equal(tx.relu().numpy(), np.maximum(x, 0), "relu")
  equal(tx.min(axis=1).numpy(), x.min(axis=1), "min(axis=1)")

# ---- 7. division as a * (1/b) is inexact: x / x must be exactly 1, exact quotients must floor exactly

@pytest.mark.parametrize("device", ALL)
def test_exact_division(device):
  x = np.arange(1, 2000, dtype=np.float32) * np.float32(0.37)
  got = (Tensor(x, device=device) / Tensor(x, device=device)).numpy()
  equal(got, np.ones_like(x), "x / x")
  q = np.arange(1, 200, dtype=np.float32)
  for y in (3.0, 7.0, 10.0, 49.0, 0.1):
    num = (q * np.float32(y)).astype(np.float32)
    want = np.floor(num / np.float32(y))
    equal((Tensor(num, device=device) / y).floor().numpy(), want, f"(q * {y} / {y}).floor()")
    equal((Tensor(num, device=device) / Tensor(np.full_like(num, y), device=device)).numpy(), num / np.float32(y),
          f"(q * {y}) / {y} correctly rounded")


# ---- 8. a 0-d reshape drops the padding mask: one element of a view that is all padding reads real data

def case_padding_mask(device):
  x = Tensor(np.array([1., 2., 3.], np.float32), device=device)
  equal(x.pad(((2, 0),))[0].numpy(), np.float32(0), "x.pad(((2, 0),))[0]")
  equal(x.pad(((2, 0),))[1].numpy(), np.float32(0), "x.pad(((2, 0),))[1]")
  equal(x.pad(((0, 2),))[-1].numpy(), np.float32(0), "x.pad(((0, 2),))[-1]")
  equal(x.pad(((2, 0),), value=5.0)[0].numpy(), np.float32(5), "x.pad(((2, 0),), value=5)[0]")
  equal(Tensor(np.array([-8.], np.float32), device=device).pad(((1, 1),)).shrink(((0, 1),)).numpy(), [0.],
        "a size-1 view that is only padding")
  one = Tensor(np.array([7.], np.float32), device=device)
  equal(one.pad(((1, 0),))[0].numpy(), np.float32(0), "a size-1 kernel over padding")
  equal((one.pad(((1, 0),))[0] + 1).numpy(), np.float32(1), "a size-1 kernel over padding, plus 1")


@pytest.mark.parametrize("device", ALL)
def test_padding_mask(device): in_child("case_padding_mask", device)


# ---- 9. indexing with a tensor keeps the dtype

@pytest.mark.parametrize("device", ALL)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "float16", "int64"])
def test_tensor_index_keeps_dtype(device, dtype):
  if dtype == "float16" and not _has_half(device): pytest.skip(f"{device} has no float16")
  data = np.array([1, 0, 1, 1], dtype=dtype)
  idx = Tensor(np.array([3, 0, -1], np.int32), device=device)
  got = Tensor(data, device=device)[idx]
  assert got.dtype == dtypes.from_np(data.dtype), f"{dtype} tensor indexed by a tensor became {got.dtype}"
  equal(got.numpy(), data[[3, 0, -1]])


# ---- 10. gradients: a float condition in where, backward twice

@pytest.mark.parametrize("device", DEVICES)
def test_where_float_condition_grad(device):
  cond = Tensor(np.array([1., 0., 2.], np.float32), device=device, requires_grad=True)
  x = Tensor(np.array([1., 2., 3.], np.float32), device=device, requires_grad=True)
  y = Tensor(np.array([4., 5., 6.], np.float32), device=device, requires_grad=True)
  cond.where(x, y).sum().backward()
  equal(x.grad.numpy(), [1., 0., 1.], "x.grad")
  equal(y.grad.numpy(), [0., 1., 0.], "y.grad")
  assert cond.grad is None or not cond.grad.numpy().any(), "where has no gradient for its condition"


@pytest.mark.parametrize("device", DEVICES)
def test_backward_twice(device):
  x = Tensor(np.array([1., 2.], np.float32), device=device, requires_grad=True)
  loss = (x * x).sum()
  loss.backward(retain_graph=True)
  loss.backward(retain_graph=True)
  equal(x.grad.numpy(), [4., 8.], "two backward(retain_graph=True) passes accumulate 2 * 2x")
  x2 = Tensor(np.array([1., 2.], np.float32), device=device, requires_grad=True)
  loss2 = (x2 * x2).sum()
  loss2.backward()
  with pytest.raises(RuntimeError, match="(?i)backward|graph"):  # as torch: the graph is gone
    loss2.backward()
  equal(x2.grad.numpy(), [2., 4.], "a refused second backward leaves the gradient alone")


# ---- 11. a lazy value keeps the value it had when it was made, even if its input is updated in place

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", ["assign", "iadd", "sgd"])
@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def test_read_after_inplace_update(device, how):
  a = Tensor(np.array([1., 2.], np.float32), device=device, requires_grad=how == "sgd").realize()
  b = a * 2 + 1
  if how == "assign": a.assign(Tensor(np.array([10., 20.], np.float32), device=device))
  elif how == "iadd": a += 1
  else:
    (a * a).sum().backward()
    nn.optim.SGD([a], lr=0.5).step()
  want_a = {"assign": [10., 20.], "iadd": [2., 3.], "sgd": [0., 0.]}[how]
  # b and the new a in one kernel: b must still read the old contents of a's buffer
  equal((b + a.detach()).numpy(), np.array([3., 5.]) + want_a, f"b + a, with b = a * 2 + 1 made before a {how}")
  equal(b.numpy(), [3., 5.], f"b = a * 2 + 1 after a was updated ({how})")
  equal(a.numpy(), want_a, f"a after {how}")


# ---- 12. sizes past int32: the right answer or a clear error, never a wrong number or a crash

def case_past_int32(kind):
  n = 2**31 + 2
  if kind == "flat": t, want = Tensor(np.array([1], np.int32)).expand(n), n
  else: t, want = Tensor(np.array([[1]], np.int32)).expand(65536, 32769), 65536 * 32769
  try: got = t.sum(acc_dtype=dtypes.int64).item()
  except (ValueError, RuntimeError, NotImplementedError, OverflowError) as e:
    assert str(t.shape[-1]) in str(e) or str(t.shape) in str(e), f"the error should name the shape {t.shape}: {e}"
    return
  assert got == want, f"sum of {t.shape} ones: got {got}, want {want}"


@pytest.mark.parametrize("kind", ["flat", "2d"])
def test_sizes_past_int32(kind): in_child("case_past_int32", kind, timeout=300)


# ---- 13. scheduling time: y = y.maximum(x * c) k times used to take 4**k

def case_schedule_time(k):
  x = Tensor(np.array([1.5, -2.0], np.float32))
  y, want = x, np.array([1.5, -2.0], np.float32)
  start = time.perf_counter()
  for i in range(k):
    y, want = y.maximum(x * (i + 2)), np.maximum(want, np.array([1.5, -2.0], np.float32) * np.float32(i + 2))
  sched = y.schedule()
  elapsed = time.perf_counter() - start
  assert elapsed < 3.0, f"scheduling {k} nested maximum() took {elapsed:.1f} s ({len(sched)} kernels)"
  equal(y.numpy(), want)


def test_schedule_time_linear(): in_child("case_schedule_time", 12, timeout=30)  # 4**k: k=8 took 2.3 s


# ---- 14. CL without cl_khr_fp16: any half in the kernel, a cast included, gets the clear error

def test_cl_half_cast_error():
  if not _available("CL"): pytest.skip("CL device unavailable")
  if _has_half("CL"): pytest.skip("this OpenCL device has half precision")
  t = Tensor(np.array([1.5, 2.25], np.float32), device="CL")
  with pytest.raises(RuntimeError, match="no half precision"):
    t.cast(dtypes.float16).cast(dtypes.float32).numpy()
  with pytest.raises(RuntimeError, match="no half precision"):
    (t.cast(dtypes.float16) * 2).numpy()


# ---- 15. a damaged compile cache must be rebuilt (or refused clearly), never crash the process

def case_cached_program(device, seed):
  x = np.arange(6, dtype=np.float32) * np.float32(seed)
  got = (Tensor(x, device=device) * 3 + 1).numpy()
  equal(got, x * 3 + 1)


@pytest.mark.parametrize("device", COMPILED)
@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
def test_damaged_compile_cache(device, damage):
  with tempfile.TemporaryDirectory() as cache:
    env = {"TINYLIT_CACHE": cache}
    in_child("case_cached_program", device, 1.0, env=env)
    files = [p for p in Path(cache).iterdir() if p.suffix == ".bin"]
    assert files, "the first run should have filled the cache"
    for p in files:
      data = p.read_bytes()
      p.write_bytes({"truncated": data[:len(data) // 2], "empty": b"", "garbage": os.urandom(64)}[damage])
    in_child("case_cached_program", device, 1.0, env=env)


# ---- 16. out-of-bounds writes: a reduce stored into a smaller output

def case_oob_write(device):
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  for _ in range(3):
    close(((ta @ tb)[:2] + 1).numpy(), (a @ b)[:2] + 1, rtol=1e-5, atol=1e-6, what="(a @ b)[:2] + 1")
  x = Tensor(a, device=device, requires_grad=True)
  y = Tensor(a, device=device, requires_grad=True)
  w = Tensor(b, device=device, requires_grad=True)
  (Tensor.stack(x, y) @ w).sum().backward()
  close(x.grad.numpy(), np.broadcast_to(b.sum(1), (4, 3)), rtol=1e-5, what="x.grad through stack @ w")
  close(w.grad.numpy(), 2 * np.broadcast_to(a.sum(0)[:, None], (3, 5)), rtol=1e-5, what="w.grad through stack @ w")
  x2 = Tensor(a, device=device, requires_grad=True)
  (x2.cat(x2, dim=0) @ w).sum().backward()
  close(x2.grad.numpy(), 2 * np.broadcast_to(b.sum(1), (4, 3)), rtol=1e-5, what="x.grad through cat @ w")


@pytest.mark.parametrize("device", ALL)
def test_oob_write(device): in_child("case_oob_write", device)


# ---- 17. half precision: each op rounds to half (gcc's _Float16 arithmetic keeps float precision)

@pytest.mark.parametrize("device", ALL)
def test_half_rounds_each_op(device):
  if not _has_half(device): pytest.skip(f"{device} has no float16")
  a = np.array([0.7, 1.5, 1.7], np.float16)
  b = np.array([-3.0, 1.5, 0.0], np.float16)
  c = np.array([-1.6, -1.9, 0.2], np.float16)
  ta, tb, tc = (Tensor(v, device=device) for v in (a, b, c))
  equal(((ta + tb) - tc).numpy(), (a + b) - c, "(a + b) - c in half")
  x = Tensor(np.array([1., 2., 3.], np.float16), device=device, requires_grad=True)
  x.max().backward()
  equal(x.grad.numpy(), np.array([0., 0., 1.], np.float16), "max's backward with half inputs")


# ---- the MLP training step: 784-256-10, batch 128, SGD, with and without TinyJit

@pytest.mark.parametrize("jit", [False, True], ids=["eager", "TinyJit"])
@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def test_mlp_trains(jit):
  rng = np.random.default_rng(0)
  Tensor.manual_seed(0)
  X = Tensor(rng.standard_normal((128, 784)).astype(np.float32))
  Y = Tensor(rng.integers(0, 10, 128).astype(np.int32))
  l1, l2 = nn.Linear(784, 256), nn.Linear(256, 10)
  opt = nn.optim.SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.1)

  def step(x, y):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.realize()

  train = TinyJit(step) if jit else step
  losses = []
  with Tensor.train():
    for _ in range(6): losses.append(float(train(X, Y).item()))
  assert all(math.isfinite(v) for v in losses), f"losses {losses}"
  assert losses[-1] < losses[0] * 0.9, f"the loss should decrease on a fixed batch: {losses}"
  assert all(b <= a + 1e-4 for a, b in zip(losses, losses[1:])), f"losses {losses}"


# ==== classes the fuzzer found beyond the list (tests/fuzz.py; each was checked against numpy and torch)

# ---- float constant folding reassociates: (x + 1) + 1 becomes x + 2, (x + 0.5) - y becomes (x - y) + 0.5

@pytest.mark.parametrize("device", ALL)
def test_no_float_reassociation(device):
  x = Tensor(np.array([16777216.0, 0.7], np.float32), device=device)
  equal((x + 1 + 1).numpy(), np.array([16777216.0, 0.7], np.float32) + np.float32(1) + np.float32(1), "x + 1 + 1")
  a = np.array([0.7, -3.2], np.float32)
  b = np.array([-1.9, 1.9], np.float32)
  equal(((Tensor(a, device=device) + 0.5) - Tensor(b, device=device)).numpy(), (a + np.float32(0.5)) - b,
        "(a + 0.5) - b")
  equal(((Tensor(a, device=device) + 0.5) + -1.5).numpy(), (a + np.float32(0.5)) + np.float32(-1.5), "(a + 0.5) + -1.5")


# ---- a float32 constant cast to float64 is folded without rounding to float32 first

@pytest.mark.parametrize("device", ALL)
def test_constant_cast_rounds(device):
  got = Tensor.full((2,), 0.1, device=device).cast(dtypes.float64).numpy()
  equal(got, np.full(2, np.float32(0.1)).astype(np.float64), "Tensor.full((2,), 0.1).cast(float64)")


# ---- comparisons with NaN: nan >= x and nan <= x must be False (IEEE, numpy, torch); tinygrad v0.10 computes
#      them as not(x > nan) and gets True

@pytest.mark.parametrize("device", ALL)
def test_nan_comparisons(device):
  x = Tensor(np.array([float("nan"), 1.0], np.float32), device=device)
  equal((x >= 0.5).numpy(), [False, True], "x >= 0.5 with a nan")
  equal((x <= 0.5).numpy(), [False, False], "x <= 0.5 with a nan")
  equal((x == x).numpy(), [False, True], "x == x")
  equal((x != x).numpy(), [True, False], "x != x")


# ---- pad(value=...) keeps the dtype and the exact value (it went through a float32/int32 tensor)

@pytest.mark.parametrize("device", ALL)
@pytest.mark.parametrize("dtype,value", [("float16", -1.5), ("uint8", 3), ("int8", -2), ("int16", 7), ("float64", 0.1)])
def test_pad_value_dtype(device, dtype, value):
  if dtype == "float16" and not _has_half(device): pytest.skip(f"{device} has no float16")
  data = np.array([1, 2, 3], dtype=dtype)
  got = Tensor(data, device=device).pad(((1, 1),), value=value)
  assert got.dtype == dtypes.from_np(data.dtype), f"pad of {dtype} with value={value} gave {got.dtype}"
  equal(got.numpy(), np.pad(data, (1, 1), constant_values=np.array(value, dtype=dtype)))


# ---- pow keeps float16 (its sign/zero handling promoted through float32 constants)

@pytest.mark.parametrize("device", ALL)
def test_pow_half_dtype(device):
  if not _has_half(device): pytest.skip(f"{device} has no float16")
  x = Tensor(np.array([1.0, 3.0, 0.5], np.float16), device=device)
  for name, t in [("2.0 ** x", 2.0 ** x), ("x ** 1.5", x ** 1.5), ("x ** x", x ** x)]:
    assert t.dtype == dtypes.float16, f"{name} of a float16 tensor gave {t.dtype}"


# ---- round() of large floats: x + 0.5 rounds before floor, so odd integers in [2**23, 2**24] move by one

@pytest.mark.parametrize("device", ALL)
def test_round_large(device):
  x = np.array([8388609.0, 16777215.0, -8388611.0, 2.5, 3.5, -0.5], np.float32)
  equal(Tensor(x, device=device).round().numpy(), np.round(x), "round")


# ---- OpenCL contracts a * b + c into fma (FP_CONTRACT defaults to on): x * y - x * y is not 0

def test_cl_no_fma_contraction():
  if not _available("CL"): pytest.skip("CL device unavailable")
  rng = np.random.default_rng(0)
  x, y, z = (rng.standard_normal(256).astype(np.float32) for _ in range(3))
  tx, ty, tz = (Tensor(v, device="CL") for v in (x, y, z))
  equal((tx * ty - tx * ty).numpy(), np.zeros(256, np.float32), "x * y - x * y on CL")
  equal((tx * ty + tz).numpy(), x * y + z, "x * y + z on CL, rounded twice as in C")


# ---- bool + bool is OR: C adds two trues up to 2, and a cast to float kept it (fuzzer, CPU seed 21)

@pytest.mark.parametrize("device", ALL)
def test_bool_add_mul(device):
  a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  equal((ta + tb).cast(dtypes.float32).numpy(), (a + b).astype(np.float32), "(a + b).float() on bools")
  equal(((ta * tb) * 3.0).numpy(), (a * b) * np.float32(3.0), "(a * b) * 3.0 on bools")


# ---- a / b under a pad: the lowerer's exact division needs the * and the 1/b side by side (fuzzer, seed 0)

@pytest.mark.parametrize("device", ALL)
def test_padded_division_exact(device):
  x, y = np.array([5.0, 7.0, 10.0], np.float32), np.array([3.0, 3.0, 3.0], np.float32)
  got = Tensor(x, device=device) / Tensor(y, device=device)
  equal(got.pad(((1, 1),)).numpy(), np.pad(x / y, 1), "(x / y).pad(1)")
  equal(Tensor.stack(got, Tensor(y, device=device), dim=1).numpy(), np.stack([x / y, y], 1), "stack(x / y, y)")


# ---- int16 floor division at INT16_MIN: |a| overflows, the emulator's C division must not use it

@pytest.mark.parametrize("device", ALL)
def test_int_min_division(device):
  a, b = np.array([-32768, -32768, -32768, 32767], np.int16), np.array([-4, 4, 3, -2], np.int16)
  equal((Tensor(a, device=device) // Tensor(b, device=device)).numpy(), a // b, "int16 // at INT16_MIN")


# ---- maximum of the smallest subnormal with itself: the tie branch's x*0.5 + y*0.5 rounded it to 0 (CPU seed 51)

@pytest.mark.parametrize("device", ALL)
@pytest.mark.parametrize("dt", [np.float16, np.float32])
def test_maximum_subnormal_tie(device, dt):
  if dt == np.float16: skip_without_half(device)
  tiny = np.array([np.finfo(dt).smallest_subnormal, -np.finfo(dt).smallest_subnormal, 3], dt)
  t = Tensor(tiny, device=device)
  equal(t.maximum(t).numpy(), tiny, "maximum(x, x) at the smallest subnormal")
  equal(t.minimum(t).numpy(), tiny, "minimum(x, x) at the smallest subnormal")


# ---- int minimum at the ends of the range: -x overflows at INT_MIN and for unsigned ints, ~x doesn't

@pytest.mark.parametrize("device", ALL)
@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.uint32])
def test_int_minimum_extremes(device, dt):
  lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
  a, b = np.array([lo, hi, 0, 5], dt), np.array([hi, lo, 1, 5], dt)
  equal(Tensor(a, device=device).minimum(Tensor(b, device=device)).numpy(), np.minimum(a, b), f"{dt.__name__} minimum")


# ---- float64 floor past 2**31: trunc cast through int32 and kept the fraction (PYTHON seed 52)

@pytest.mark.parametrize("device", ALL)
def test_float64_floor_large(device):
  x = np.array([-2247581227.142857, 7158278826.666667, -0.5, 2.5, 1e300, -2.0**52 - 1.0], np.float64)
  t = Tensor(x, device=device)
  for name in ("floor", "ceil", "trunc", "round"):
    equal(getattr(t, name)().numpy(), getattr(np, name)(x), f"float64 {name}")


# ---- a loop nest with more than 2**31 iterations in all, each loop small: a 2048 matmul was refused (bench.py)

@pytest.mark.parametrize("device", ALL)
def test_matmul_nest_past_int32(device):
  from tinylit.ops import Ops
  from tinylit.realize import get_program
  a, b = Tensor.empty(2048, 2048, device=device), Tensor.empty(2048, 2048, device=device)
  # compiled, not run: the PYTHON emulator would take hours over 2**33 iterations
  kernels = [si.ast for si in (a @ b).schedule() if si.ast.op is Ops.SINK]
  assert kernels and all("2048" in get_program(ast, Device[device].renderer).src for ast in kernels)


@pytest.mark.parametrize("device", ALL)
def test_signed_zero_constants_stay_apart(device):
  # -0.0 == 0.0 in Python, so a lazy graph deduplicated by value gave full(-0.0) the +0.0 buffer: 1/x came out +inf
  pos, neg = Tensor.full((2,), 0.0, device=device), Tensor.full((2,), -0.0, device=device)
  np.testing.assert_array_equal((1 / pos).numpy(), [np.inf, np.inf])
  np.testing.assert_array_equal((1 / neg).numpy(), [-np.inf, -np.inf])
  x = Tensor([1.0, 2.0], device=device)
  np.testing.assert_array_equal((1 / (x * -0.0)).numpy(), [-np.inf, -np.inf])


@pytest.mark.parametrize("device", ALL)
def test_constant_scalar_index_beside_tensor_indices(device):
  # a constant 0-d tensor index was turned into an int even beside other tensor indices, which moved the advanced
  # dims: x[t0, 0, None, t] came out (1, 2, 2) where numpy and torch give (2, 2, 1) (pure fuzzer, CPU seed 101)
  x = np.array([-1.5, 1.1, -1.9, 2.0], dtype=np.float32).reshape(4, 1, 1)
  i0, i = np.array(0, dtype=np.int32), np.array([[0, 0], [0, 0]], dtype=np.int32)
  got = Tensor(x, device=device)[Tensor(i0, device=device), 0, None, Tensor(i, device=device)]
  np.testing.assert_array_equal(got.numpy(), x[i0, 0, None, i])
  np.testing.assert_array_equal(Tensor(x, device=device)[Tensor(i0, device=device)].numpy(), x[i0])


def test_only_sums_fuse_their_multiply_adds():
  """Chapter 7's ClangRenderer lets `cc` fuse a product into an add (one FMA, rounded once) in a float sum's kernel,
  where every product meets the sum's adds (a matmul) or comes after the sum's loop, in an epilogue whose stored values
  all start from the sum (`(a @ b) * c + c`), and nowhere else: an elementwise `a*b + c`, alone, as the term a sum adds
  up, or after a maximum (which rounds nothing), keeps numpy's bits (at vector widths 8 and 16 alike: the term's add
  once counted as the sum's). The fused matmul and epilogue are numpy's within float32 rounding."""
  from tinylit.realize import get_program
  rng = np.random.default_rng(0)
  a, b, c = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
  A, B, C = (Tensor(x).realize() for x in (a, b, c))
  def fuses(t: Tensor) -> bool:
    return "fp-contract=fast" in get_program(t.schedule()[-1].ast, Device["CPU"].renderer).src
  assert fuses(A @ B) and not fuses(A * B + C) and not fuses((A * B + C).sum(axis=1))
  assert fuses((A @ B) * C + C) and not fuses(A.max(axis=1) * B[0] + C[0])
  np.testing.assert_allclose(((A @ B) * C + C).numpy(), (a @ b) * c + c, rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal((A.max(axis=1) * B[0] + C[0]).numpy(), a.max(axis=1) * b[0] + c[0])
  # a sum of squared differences, long enough to keep a loop: the subtraction is no product, and each square meets
  # the sum's add
  d, e = (rng.standard_normal((64, 1024)).astype(np.float32) for _ in range(2))
  D, E = Tensor(d).realize(), Tensor(e).realize()
  assert fuses(((D - E) * (D - E)).sum(axis=1))
  np.testing.assert_allclose(((D - E) * (D - E)).sum(axis=1).numpy(), ((d - e) * (d - e)).sum(axis=1), rtol=1e-5)
  np.testing.assert_array_equal((A * B + C).numpy(), a * b + c)
  np.testing.assert_allclose((A @ B).numpy(), a @ b, rtol=1e-5, atol=1e-5)
