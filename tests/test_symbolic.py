"""Symbolic shapes (chapters 3, 3a, 6, 7, 9): a kernel built for a variable size must give, for every value in range,
what the kernel built for that concrete size gives; TinyJit serves every value from one capture; and the ways to
misuse them fail with errors that say what is wrong.

The property test draws (program, size, data) with hypothesis: SYMBOLIC_N examples in all (default 2100), shared
among the devices this machine has. The concrete kernel each is compared with runs on CPU for every device: one kernel
per (program, size) is about 300 kernels, which CPU compiles once for all the devices, and PoCL at about 0.2 s each
(two minutes of an empty-cache run, where the symbolic kernels under test are a few dozen)."""
import os
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from devices import DEVICES
from tinylit import Tensor, TinyJit
from tinylit.jit import JitError
from tinylit.kernel import Kernel, KernelOptError, Opt, OptOps
from tinylit.ops import Variable, sym_infer
from tinylit.realize import method_cache, unbind_views

N = int(os.getenv("SYMBOLIC_N", "2100"))
MAXN = 12

def _concrete(t: Tensor) -> Tensor:
  "A tensor with a symbolic shape, reshaped to the sizes its variables are bound to now."
  return t.reshape(tuple(sym_infer(s) for s in t.shape))

# each program takes (x, n) where x has shape (3, n) (symbolic or concrete) and the helper tensors below
PROGRAMS = {
  "add_const": lambda x, w, big, n: x * 2 + 1,
  "exp_relu": lambda x, w, big, n: (x.exp() - 1.5).relu(),
  "sum_sym_axis": lambda x, w, big, n: x.sum(1),
  "sum_other_axis": lambda x, w, big, n: x.sum(0),
  "sum_all": lambda x, w, big, n: x.sum(),
  "max_sym_axis": lambda x, w, big, n: x.max(1),
  "softmax": lambda x, w, big, n: x.softmax(1),
  "matmul_sym_k": lambda x, w, big, n: x @ w.shrink(((0, n), None)),
  "transpose_mul": lambda x, w, big, n: x.T * x.T,
  "outer": lambda x, w, big, n: x.reshape(3, n, 1) * x.reshape(3, 1, n),
  "broadcast_row": lambda x, w, big, n: x + x.sum(0, keepdim=True),
  "shrink_cache": lambda x, w, big, n: big.shrink((None, (0, n))) + x,
  "attention": lambda x, w, big, n: (Tensor.ones(2, 3, device=x.device) @ x).softmax(1) @ x.T,
  # the size as a value: a symbolic count (mean, var) or the variable itself in arithmetic
  "mean_sym_axis": lambda x, w, big, n: x.mean(1),
  "mean_all": lambda x, w, big, n: x.mean(),
  "var_sym_axis": lambda x, w, big, n: x.var(1),
  "std_other_axis": lambda x, w, big, n: x.std(0, correction=0),
  "scale_by_n": lambda x, w, big, n: x * n - (n * 2 + 1),
  # cat pads each piece with symbolic amounts of zeros
  "cat_sym_axis": lambda x, w, big, n: x.cat(x.exp(), dim=1),
  "cat_const_piece": lambda x, w, big, n: Tensor.ones(3, 2, device=x.device).cat(x, dim=1).sum(1),
  "cat_other_axis": lambda x, w, big, n: x.cat(x * 3, dim=0),
}


def _run(device: str, name: str, n: int, seed: int, symbolic: bool) -> np.ndarray:
  rng = np.random.default_rng(seed)
  x = Tensor(rng.standard_normal((3, n)).astype(np.float32), device=device)
  w = Tensor(rng.standard_normal((MAXN, 4)).astype(np.float32), device=device)
  big = Tensor(rng.standard_normal((3, MAXN)).astype(np.float32), device=device)
  size = Variable("n", 1, MAXN).bind(n) if symbolic else n
  out = PROGRAMS[name](x.reshape(3, size) if symbolic else x, w, big, size)
  return _concrete(out).numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_matches_concrete(device):
  n_dev = max(1, N // 3)
  @settings(max_examples=n_dev, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
  @given(name=st.sampled_from(sorted(PROGRAMS)), n=st.integers(1, MAXN), seed=st.integers(0, 2**16))
  def check(name, n, seed):
    sym, conc = _run(device, name, n, seed, True), _run("CPU", name, n, seed, False)
    assert sym.shape == conc.shape, (name, n)
    np.testing.assert_allclose(sym, conc, rtol=2e-5, atol=2e-6, err_msg=f"{name} n={n} seed={seed} on {device}")
  check()


@pytest.mark.parametrize("device", DEVICES)
def test_one_kernel_for_every_value(device):
  "The kernel of a symbolic AST is compiled once: the AST holds the variable, the value is an argument."
  x = Tensor(np.arange(3 * MAXN, dtype=np.float32).reshape(3, MAXN), device=device).realize()
  compiled = []
  for n in range(1, MAXN + 1):
    before = len(method_cache)
    out = x.shrink((None, (0, Variable("n", 1, MAXN).bind(n)))).sum(1).realize()
    compiled.append(len(method_cache) - before)
    np.testing.assert_allclose(out.numpy(), x.numpy()[:, :n].sum(1))
  assert sum(compiled[1:]) == 0, compiled


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replays_twenty_sizes_from_one_capture(device):
  @TinyJit
  def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return ((q @ k.T) / 2).softmax(-1) @ v
  rng = np.random.default_rng(0)
  q = Tensor(rng.standard_normal((1, 4)).astype(np.float32), device=device).realize()
  compiles = []
  for t in range(1, 21):
    k_np, v_np = rng.standard_normal((t, 4)).astype(np.float32), rng.standard_normal((t, 4)).astype(np.float32)
    vt = Variable("t", 1, 32).bind(t)
    before = len(method_cache)
    out = attend(q, Tensor(k_np, device=device).reshape(vt, 4), Tensor(v_np, device=device).reshape(vt, 4))
    compiles.append(len(method_cache) - before)
    s = (q.numpy() @ k_np.T) / 2
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), (p / p.sum(-1, keepdims=True)) @ v_np, rtol=1e-4, atol=1e-5)
  assert attend.cnt == 20 and len(attend.jit_cache) >= 1
  assert sum(compiles[1:]) == 0, f"kernels compiled per call: {compiles}"


@pytest.mark.parametrize("device", DEVICES)
def test_jit_output_shape_follows_the_replay(device):
  double = TinyJit(lambda x: (x * 2).realize())
  for n in range(1, 6):
    x = Tensor(np.arange(2 * n, dtype=np.float32).reshape(2, n), device=device)
    y = double(x.reshape(2, Variable("m", 1, 8).bind(n)))
    assert sym_infer(y.shape[1]) == n
    np.testing.assert_allclose(_concrete(y).numpy(), x.numpy() * 2)


def test_kernel_holds_the_variable_and_takes_its_value():
  x = Tensor(np.ones((3, 5), np.float32)).reshape(3, Variable("n", 1, 9).bind(5)) + 1
  (si,) = [s for s in x.schedule() if s.ast.op.name == "SINK"]
  ast, var_vals = unbind_views(si.ast)
  assert [(v.arg, val) for v, val in var_vals.items()] == [(("n", 1, 9), 5)]
  k = Kernel(ast)
  assert "n" in k.name and not all(isinstance(s, int) for s in k.full_shape)
  axis = next(i for i, s in enumerate(k.full_shape) if not isinstance(s, int))
  with pytest.raises(KernelOptError, match="symbolic size"): k.apply_opt(Opt(OptOps.UPCAST, axis, 4))


def test_symbolic_value_is_a_kernel_argument():
  "A mean over a symbolic axis divides by the variable's value: the CONST holds the variable, the kernel takes it."
  n = Variable("n", 1, 9)
  x = Tensor(np.ones((3, 9), np.float32)).shrink((None, (0, n.bind(4)))).mean(1)
  (si,) = [s for s in x.schedule() if s.ast.op.name == "SINK"]
  ast, var_vals = unbind_views(si.ast)
  assert [(v.arg, val) for v, val in var_vals.items()] == [(("n", 1, 9), 4)]
  assert any(u.op.name == "CONST" and u.arg is n for u in ast.toposort), "the count should be the variable n"
  assert (Tensor.from_uop(n.bind(4) * 2 + 3) + 0).item() == 11

def test_bad_symbolic_input():
  x = Tensor(np.ones((3, 4), np.float32))
  with pytest.raises(ValueError, match=r"\[1, 10\]"): Variable("n", 1, 10).bind(11)
  with pytest.raises(TypeError, match="bound"): x.reshape(3, Variable("n", 1, 10))
  with pytest.raises(Exception, match="size mismatch"): x.reshape(3, Variable("n", 1, 10).bind(5))
  with pytest.raises(Exception, match="out of range"): x.shrink((None, (0, Variable("n", 1, 10).bind(6))))
  with pytest.raises(TypeError, match="bound Variable"): x + Tensor(Variable("n", 1, 10))
  with pytest.raises(NotImplementedError, match="symbolic padding"):  # reflect reads a symbolic axis backwards
    x.reshape(3, Variable("n", 1, 10).bind(4)).pad((None, (1, 1)), mode="reflect")
  with pytest.raises(TypeError, match="from_uop"): Tensor.from_uop(Variable("n", 1, 10).bind(3) // 2)


@pytest.mark.parametrize("device", DEVICES)
def test_jit_footguns(device):
  f = TinyJit(lambda x, scale: (x * scale).realize())
  x = lambda shape=(2, 3), dt=np.float32: Tensor(np.ones(shape, dt), device=device)
  for _ in range(3): f(x(), 2.0)
  with pytest.raises(JitError, match=r"input 0 changed.*\(2, 4\)"): f(x((2, 4)), 2.0)
  with pytest.raises(JitError, match="input 0 changed.*int32"): f(x(dt=np.int32), 2.0)
  with pytest.raises(JitError, match="argument 1 changed from 2.0 to 3.0"): f(x(), 3.0)
  g = TinyJit(lambda a, b: (a + b).realize())
  t = x()
  with pytest.raises(JitError, match="same tensor passed twice"): g(t, t)   # from call 1 on: a capture would mix them up
  other = next((d for d in ("PYTHON", "CPU") if d != device), None)
  h = TinyJit(lambda a: (a + 1).realize())
  for _ in range(3): h(x())
  with pytest.raises(JitError, match=f"input 0 changed.*{other}"): h(Tensor(np.ones((2, 3), np.float32), device=other))
