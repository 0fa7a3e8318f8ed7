"""Writes that land (torch's semantics of memory): a write through a view goes into the memory every view shares, at
once; a value computed before a write keeps its value; every op but a movement makes new memory. Every test runs on
every device; the stateful fuzzer (tests/fuzz_state.py, tests/test_fuzz_state.py) explores the same ground at random."""
import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor, TinyJit
from tinylit.ops import Ops, Variable


@pytest.mark.parametrize("device", DEVICES)
def test_iadd_through_a_reshape_writes_the_base(device):
  x = Tensor([1.0, 2, 3, 4], device=device).realize()
  y = x.reshape(2, 2)
  y += 1
  np.testing.assert_array_equal(x.numpy(), [2, 3, 4, 5])
  np.testing.assert_array_equal(y.numpy(), [[2, 3], [4, 5]])


@pytest.mark.parametrize("device", DEVICES)
def test_shrink_assign_writes_into_the_tensor(device):
  t = Tensor.zeros(3, 2, device=device).contiguous().realize()
  t.shrink(((1, 2), None)).assign(Tensor.ones(1, 2, device=device)).realize()
  np.testing.assert_array_equal(t.numpy(), [[0, 0], [1, 1], [0, 0]])


@pytest.mark.parametrize("device", DEVICES)
def test_every_view_sees_a_write_realized_or_not(device):
  x = Tensor.arange(6, device=device, dtype="float32").reshape(2, 3)   # lazy: not realized yet
  col, flat, flipped = x[:, 1], x.reshape(6), x.flip(0)
  col.assign(Tensor([10.0, 20.0], device=device))
  np.testing.assert_array_equal(x.numpy(), [[0, 10, 2], [3, 20, 5]])
  np.testing.assert_array_equal(flat.numpy(), [0, 10, 2, 3, 20, 5])
  np.testing.assert_array_equal(flipped.numpy(), [[3, 20, 5], [0, 10, 2]])


@pytest.mark.parametrize("device", DEVICES)
def test_a_value_computed_before_a_write_keeps_its_value(device):
  v = Tensor([1.0, 2, 3], device=device).realize()
  before = v * 1.5                  # lazy, made before the writes
  v.assign(v * 4)
  v += 100
  np.testing.assert_array_equal(before.numpy(), [1.5, 3, 4.5])
  np.testing.assert_array_equal(v.numpy(), [104, 108, 112])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fold", ["x + 0", "x - 0", "x * 1"])
def test_a_folded_op_is_still_a_new_tensor(device, fold):
  x = Tensor([1.0, 2, 3], device=device).realize()
  y = eval(fold)
  x += 10
  np.testing.assert_array_equal(y.numpy(), [1, 2, 3])
  y -= 1
  np.testing.assert_array_equal(x.numpy(), [11, 12, 13])
  np.testing.assert_array_equal(y.numpy(), [0, 1, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_a_held_value_that_reads_the_old_contents_through_its_sources(device):
  """v3 reads v0's memory through an op it doesn't hold (a NEG of a view), and v1's write reads v3: v3 is computed from
  the old contents before the write, as torch's v3 was (found by tests/fuzz_state.py, seed 12, on the three-phase
  scheduler's first version, which stored only the held values that read a target directly)."""
  v0 = Tensor(np.arange(6, dtype=np.float32).reshape(1, 2, 3), device=device).realize()
  v1 = v0.permute((2, 0, 1))
  v2 = v1 * 2
  v2.assign(v2.flip(0))
  v3 = v2 - v1
  v1 += v3
  old = np.arange(6, dtype=np.float32).reshape(1, 2, 3).transpose(2, 0, 1)
  want_v3 = (old * 2)[::-1] - old
  np.testing.assert_equal(v3.numpy(), want_v3)
  np.testing.assert_equal(v1.numpy(), old + want_v3)


@pytest.mark.parametrize("device", DEVICES)
def test_a_graph_held_by_autograd_reads_a_copy_of_the_weights_written_after_it(device):
  """Issue 31's 2.6 GB: a loss whose autograd graph is alive holds the matmul's broadcast product `x[:, :, None] * W`,
  never stored (fused into the matmul). An optimizer's write to W must not compute that product first (it is 48x W
  here): the scheduler copies W's old contents instead, and the product reads the copy. What the graph computes after
  the write, the activations and W's gradient, is still that of the old W, as torch's would be."""
  rng = np.random.default_rng(0)
  xn, wn = rng.standard_normal((48, 64), dtype=np.float32), rng.standard_normal((64, 32), dtype=np.float32)
  x, W = Tensor(xn, device=device).realize(), Tensor(wn, device=device, requires_grad=True).realize()
  h = (x @ W).relu()
  loss = h.sum()
  loss.realize()
  product = W.lazydata.base.readers
  assert [r.shape for r in product] == [(48, 32, 64)]   # (the test's premise: the product reads W and is held)
  W.assign(W.detach() - 1).realize()
  assert product[0].realized is None and W.lazydata.base not in [s.base for s in product[0].srcs]
  np.testing.assert_allclose(h.numpy(), np.maximum(xn @ wn, 0), rtol=1e-5, atol=1e-5)
  loss.backward()
  np.testing.assert_allclose(W.grad.numpy(), xn.T @ ((xn @ wn) > 0).astype(np.float32), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(W.numpy(), wn - 1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_step_on_the_batch_a_held_graph_saw_stores_no_broadcast_product(device):
  """The same, when the training step's graph is the held one (the same batch, so the same nodes): the product is in
  the step's graph and wanted outside it. It reads a copy of W too, and stays fused into the step's matmuls."""
  rng = np.random.default_rng(1)
  xn, wn = rng.standard_normal((48, 64), dtype=np.float32), rng.standard_normal((64, 32), dtype=np.float32)
  x, W = Tensor(xn, device=device).realize(), Tensor(wn, device=device, requires_grad=True).realize()
  held = (x @ W).relu()
  held.sum().realize()
  loss = (x @ W).relu().sum()
  loss.backward()
  sched = W.assign(W.detach() - 0.5 * W.grad).schedule()
  assert all(si.ast.op is not Ops.SINK or si.bufs[0].size < 48 * 32 * 64 for si in sched)   # no product stored
  Tensor.realize(W)
  mask = ((xn @ wn) > 0).astype(np.float32)
  np.testing.assert_allclose(W.numpy(), wn - 0.5 * xn.T @ mask, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(held.numpy(), np.maximum(xn @ wn, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_pending_write_does_not_see_a_later_one(device):
  a = Tensor([1.0, 2, 3], device=device).realize()
  b = Tensor.zeros(3, device=device).contiguous().realize()
  b.assign(a.flip(0))
  a.assign(a + 10).realize()
  np.testing.assert_array_equal(b.numpy(), [3, 2, 1])
  np.testing.assert_array_equal(a.numpy(), [11, 12, 13])


@pytest.mark.parametrize("device", DEVICES)
def test_writes_that_read_their_own_memory_read_the_old_values(device):
  x = Tensor([[1.0, 2], [3, 4]], device=device).realize()
  x.assign(x.T)
  np.testing.assert_array_equal(x.numpy(), [[1, 3], [2, 4]])
  y = Tensor([1.0, 2, 3, 4], device=device).realize()
  y[1:] = y[:-1]
  np.testing.assert_array_equal(y.numpy(), [1, 1, 2, 3])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make", ["ones", "zeros", "full", "arange"])
def test_realized_creations_own_their_memory(device, make):
  t = {"ones": lambda: Tensor.ones(2, 3, device=device), "zeros": lambda: Tensor.zeros(2, 3, device=device),
       "full": lambda: Tensor.full((2, 3), 2.5, device=device),
       "arange": lambda: Tensor.arange(6, device=device, dtype="float32").reshape(2, 3)}[make]().realize()
  want = t.numpy().copy()
  other = {"ones": Tensor.ones, "zeros": Tensor.zeros}.get(make, lambda *s, **k: Tensor.full(s, 2.5, **k))(2, 3, device=device)
  t[0:1, 2:3][0, 0] = 7          # a view of a view of it: one element
  want[0, 2] = 7
  np.testing.assert_array_equal(t.numpy(), want)
  assert (other.numpy() != 7).all()   # another constant of the same value is not the same memory


@pytest.mark.parametrize("device", DEVICES)
def test_writing_through_an_expand_is_an_error(device):
  x = Tensor([1.0, 2, 3], device=device).realize()
  e = x.reshape(1, 3).expand(2, 3)
  with pytest.raises(RuntimeError, match="expanded view"): e.assign(Tensor.ones(2, 3, device=device))
  np.testing.assert_array_equal(x.numpy(), [1, 2, 3])


@pytest.mark.parametrize("device", DEVICES)
def test_a_realized_constant_is_written_under_jit(device):
  w = Tensor.ones(3, device=device).realize()
  @TinyJit
  def step(x: Tensor) -> Tensor:
    w.assign(w + x)
    return (w * 1).realize()
  got = [step(Tensor([1.0, 2, 3], device=device)).numpy().tolist() for _ in range(5)]
  assert got == [[1 + k, 1 + 2 * k, 1 + 3 * k] for k in range(1, 6)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("symbolic", [False, True])
def test_kv_cache_decoding_matches_the_whole_sequence(device, symbolic):
  """tinygrad's gpt2/llama pattern: a cache written one row at a time with shrink(...).assign(...), attention over the
  rows so far; with a bound Variable start_pos one TinyJit capture serves every position."""
  rng = np.random.default_rng(0)
  steps, dim = 8, 4
  q_all, k_all = (rng.standard_normal((steps, dim)).astype(np.float32) for _ in range(2))
  cache = Tensor.zeros(steps, dim, device=device).contiguous().realize()
  def attend(q: Tensor, k: Tensor, start_pos) -> Tensor:
    cache.shrink(((start_pos, start_pos + 1), None)).assign(k).realize()
    keys = cache.shrink(((0, start_pos + 1), None))
    return ((q @ keys.T).softmax(-1) @ keys).realize()   # keys as values too: a (1, dim) result at every position
  jitted = TinyJit(attend)
  for pos in range(steps):
    q, k = Tensor(q_all[pos:pos + 1], device=device), Tensor(k_all[pos:pos + 1], device=device)
    start = Variable("start_pos", 0, steps - 1).bind(pos) if symbolic else pos
    got = (jitted if symbolic else attend)(q, k, start).numpy()
    logits = q_all[pos:pos + 1] @ k_all[:pos + 1].T
    weights = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    want = weights @ k_all[:pos + 1]
    np.testing.assert_allclose(got.reshape(-1), want.reshape(-1), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(cache.numpy(), k_all)


@pytest.mark.parametrize("device", DEVICES)
def test_one_graph_binding_a_variable_to_two_values(device):
  p = Variable("p", 0, 5)
  got = (Tensor(p.bind(1), device=device) + Tensor(p.bind(3), device=device) * 10).numpy()
  assert got == 31


@pytest.mark.parametrize("device", DEVICES)
def test_writes_into_empty_tensors_do_nothing(device):
  a = Tensor(np.zeros((5, 0), np.float32), device=device)
  a += 2
  a.assign(Tensor(np.zeros((5, 0), np.float32), device=device))
  assert a.numpy().shape == (5, 0)


# ---- stepped slices: `b[::2]` is a view of b's memory, as in torch (and tinygrad v0.10, where it is movement ops only)
STEPPED = ["::2", ":, ::2", "::-2", "1::2, ::-3", "::5", "-1:0:-2, 1", "None, ::2, ..., 1:5:3", "..., ::4"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("idx", STEPPED)
def test_writes_through_a_stepped_slice_land(device, idx):
  b = Tensor.zeros(3, 6, device=device).contiguous().realize()
  ref = np.zeros((3, 6), np.float32)
  v, rv = eval(f"b[{idx}]"), eval(f"ref[{idx}]")
  v += 1; rv += 1
  np.testing.assert_array_equal(b.numpy(), ref)
  v.assign(v * 3); rv *= 3                                        # through assign, reading the view itself
  np.testing.assert_array_equal(b.numpy(), ref)
  v[...] = 7; rv[...] = 7                                         # and __setitem__ on the view
  np.testing.assert_array_equal(b.numpy(), ref)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("idx", STEPPED)
def test_a_stepped_slice_sees_later_writes_to_its_base(device, idx):
  b = Tensor.arange(18, device=device, dtype="float32").reshape(3, 6).contiguous().realize()
  ref = np.arange(18, dtype=np.float32).reshape(3, 6)
  v, rv = eval(f"b[{idx}]"), eval(f"ref[{idx}]")
  b += 1; ref += 1
  np.testing.assert_array_equal(v.numpy(), rv)
  b[1] = -1; ref[1] = -1
  np.testing.assert_array_equal(v.numpy(), rv)


@pytest.mark.parametrize("device", DEVICES)
def test_the_three_lines_of_the_report(device):
  "Issue 28's repro, as torch runs it."
  b = Tensor.zeros(3, 6, device=device).contiguous().realize()
  v = b[::2]; v += 1
  np.testing.assert_array_equal(b.numpy(), [[1] * 6, [0] * 6, [1] * 6])
  v = b[:, ::2]; v += 1
  np.testing.assert_array_equal(b.numpy(), [[2, 1] * 3, [1, 0] * 3, [2, 1] * 3])
  v = b[::2]; b += 1
  np.testing.assert_array_equal(v.numpy(), [[3, 2] * 3, [3, 2] * 3])


@pytest.mark.parametrize("device", DEVICES)
def test_a_stepped_view_written_under_jit(device):
  "The fuzzer's shape of it: state updated through a stepped view inside TinyJit, read through another after each call."
  s = Tensor.arange(12, device=device, dtype="float32").reshape(4, 3).contiguous().realize()
  ref = np.arange(12, dtype=np.float32).reshape(4, 3)
  sv, rsv = s[::-2, 1::2], ref[::-2, 1::2]
  step = TinyJit(lambda x: (sv.__iadd__(x), (s[0, -1:2:3] * 2).realize())[1])
  for i in range(4):
    x = np.full(rsv.shape, i + 1, np.float32)
    out = step(Tensor(x, device=device))
    rsv += x
    np.testing.assert_array_equal(s.numpy(), ref)
    np.testing.assert_array_equal(out.numpy(), ref[0, -1:2:3] * 2)


@pytest.mark.parametrize("device", DEVICES)
def test_stepped_slices_keep_their_gradient(device):
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device, requires_grad=True)
  (x[::2, ::-3] * Tensor([[1.0, 2.0]], device=device)).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [[2, 0, 0, 1], [0, 0, 0, 0], [2, 0, 0, 1]])
