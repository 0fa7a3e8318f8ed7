"""The compiler's promises, checked directly: fusion decisions, generated source, DEBUG output, the compile
cache, the JIT, and the PYTHON device's bounds checks."""
import re
import numpy as np
import pytest
from tinylit import Tensor
from devices import DEVICES, unavailable
from tinylit.helpers import Context
from tinylit.device import GlobalCounters
from tinylit.jit import TinyJit, JitError
from tinylit.realize import method_cache

def n_kernels(t: Tensor) -> int: return len([si for si in t.schedule() if si.ast.op.name == "SINK"])

def test_elementwise_chain_is_one_kernel():
  a, b, c = [Tensor.rand(16, 16).realize() for _ in range(3)]   # buffers: rand itself is a kernel
  assert n_kernels(((a * b + c).relu() * 2 - a).exp2()) == 1

def test_elementwise_fuses_into_reduce_and_after_it():
  a, b = Tensor.rand(8, 32).realize(), Tensor.rand(8, 32).realize()
  assert n_kernels((a * b).sum(1)) == 1
  assert n_kernels((a * b).sum(1) + 1) == 1            # reduce read in order: one kernel
  assert n_kernels(((a * b).sum(1) + 1).sum()) == 2     # a second reduce is its own kernel

def test_softmax_kernel_count():
  x = Tensor.rand(4, 10).realize()
  assert n_kernels(x.softmax()) == 3                    # max, sum of exp, the normalised output

def test_padding_reads_zero_through_unsafe_ops():
  x = np.random.default_rng(0).uniform(-1, 1, (3, 3)).astype(np.float32)
  out = Tensor(x).exp().pad(((1, 1), (1, 1))).numpy()
  np.testing.assert_allclose(out, np.pad(np.exp(x), 1), rtol=1e-6)

def test_debug4_prints_the_c_that_ran(capsys):
  a, b = Tensor([1.0, 2.0, 3.0, 4.0]), Tensor([10.0, 20.0, 30.0, 40.0])
  method_cache.clear()            # the C is printed when it compiles: another test on this worker may have run it
  with Context(DEBUG=4): out = (a + b).sum().numpy()
  text = capsys.readouterr().out
  assert out == 110.0
  # the name gets a suffix (r_4n2) when another kernel of this worker already took r_4
  assert re.search(r"void r_4(n\d+)?\(float\* restrict data0, const float\* restrict data1, const float\* restrict data2\)", text)
  assert "acc0 = (acc0+(val0+val1));" in text
  assert "*** CPU" in text and "arg  3" in text

def test_compile_cache_reuses_programs():
  a, b = Tensor.rand(5, 7).realize(), Tensor.rand(5, 7).realize()
  (a * 3 + 1).realize()
  before = len(method_cache)
  (b * 3 + 1).realize()                                 # same AST, other buffers
  assert len(method_cache) == before

@pytest.mark.parametrize("device", DEVICES)
def test_jit_replays_with_new_inputs(device):
  w = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device=device)
  @TinyJit
  def f(x): return (x @ w).relu().sum(1)
  rng = np.random.default_rng(1)
  for i in range(5):
    x = rng.standard_normal((2, 4)).astype(np.float32)
    GlobalCounters.reset()
    out = f(Tensor(x, device=device)).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ w.numpy(), 0).sum(1), rtol=1e-5, atol=1e-5)
    if i >= 2: assert GlobalCounters.kernel_count == len(f.jit_cache) > 0

def test_jit_rejects_new_shapes():
  @TinyJit
  def f(x): return x * 2
  for _ in range(3): f(Tensor.rand(3))
  with pytest.raises(JitError, match="input 0 changed from"): f(Tensor.rand(4))

def test_python_device_catches_out_of_bounds():
  from tinylit.ops import UOp, Ops
  from tinylit.dtype import dtypes
  from tinylit.renderer import PythonRenderer
  from tinylit.runtime.ops_python import PythonProgram
  from tinylit.device import Buffer
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), 0)
  rng = UOp.range(5, 0)
  store = UOp(Ops.STORE, None, (UOp(Ops.INDEX, dtypes.float32, (buf, rng)), UOp.const(dtypes.float32, 1.0)))
  # a loop closes with ENDRANGE (a RANGE is always a loop: thread indices are SPECIALs, issue 18)
  uops = [buf, rng.src[0], rng, UOp(Ops.INDEX, dtypes.float32, (buf, rng)), UOp.const(dtypes.float32, 1.0), store,
          UOp(Ops.ENDRANGE, None, (rng,))]
  prg = PythonProgram("oob", PythonRenderer().render("oob", uops).encode())
  b = Buffer("PYTHON", 4, dtypes.float32).allocate()
  with pytest.raises(IndexError, match="out of bounds"): prg(b._buf)

def test_done_when_of_the_foundation_issue():
  "(a@b + c).relu().sum() and its gradients equal numpy's within 1e-5 on CPU and PYTHON."
  rng = np.random.default_rng(0)
  A, B, C = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((4, 5), dtype=np.float32), rng.standard_normal(5, dtype=np.float32)
  z = A @ B + C
  mask = (z > 0).astype(np.float32)
  for device in [d for d in ("CPU", "PYTHON", "CL", "CUDA") if unavailable(d) is None]:
    a, b, c = [Tensor(x, device=device, requires_grad=True) for x in (A, B, C)]
    out = (a @ b + c).relu().sum()
    out.backward()
    np.testing.assert_allclose(out.numpy(), np.maximum(z, 0).sum(), atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), mask @ B.T, atol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), A.T @ mask, atol=1e-5)
    np.testing.assert_allclose(c.grad.numpy(), mask.sum(0), atol=1e-5)

def test_realized_nodes_leave_the_dedup_cache():
  "A realized node forgets its sources; if it stayed cached under their ids, a new node reusing a freed id would match it."
  from tinylit.lazy import lazycache
  b = Tensor(np.ones(4, np.float32)).realize()
  r = Tensor(np.full(4, 3.0, np.float32)) * b
  key = r.lazydata.base.cache_key
  assert lazycache.get(key) is r.lazydata.base
  r.realize()
  assert lazycache.get(key) is None
  for trial in range(3000):  # and the symptom itself: recycled ids never give a stale result
    a = Tensor(np.full(4, float(trial), np.float32))
    kept = (a * b).realize()
    old_id = id(a.lazydata)
    del a
    a2 = Tensor(np.full(4, -1.0, np.float32))
    np.testing.assert_array_equal((a2 * b).numpy(), -np.ones(4))
    if id(a2.lazydata) == old_id: break
    del kept
