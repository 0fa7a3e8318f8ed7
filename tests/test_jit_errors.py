"""TinyJit's return values and refusals, BatchNorm without running statistics, and randint's range (items 2, 3 and 9
of the "No silent wrong answers" issue). Each test fails on the code before its fix: a jitted function's dict of
results replayed stale values, a nested or empty capture and a repeated input went through, `Optimizer.step` ran in
test mode, BatchNorm(track_running_stats=False) normalised with 0 and 1 at test time, randint(low >= high) returned
numbers. Every test runs on every device this machine has (tests/devices.py)."""
from collections import namedtuple

import numpy as np
import pytest

from tinylit import Tensor, TinyJit, Variable, nn
from tinylit.jit import JitError
from tinylit.mixin import ArgumentError
from devices import DEVICES

rng = np.random.default_rng(9)


def arrays(n: int, shape=(2, 3)) -> list[np.ndarray]:
  return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


# ---- item 2: what a replay returns

Pair = namedtuple("Pair", "total diff")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", ["dict", "nested", "namedtuple"])
def test_jit_replays_containers_of_unrealized_tensors(device, shape):
  "Tensors returned unrealized inside any container are computed by every replay, with that call's inputs."
  def f(a: Tensor, b: Tensor):
    total, diff = a + b, a - b                 # unrealized: the capture must realize them to record their kernels
    if shape == "dict": return {"total": total, "diff": diff}
    if shape == "nested": return {"outs": [total, (diff,)], "label": "kept"}
    return Pair(total, diff)
  def parts(r):
    if shape == "dict": return r["total"], r["diff"]
    if shape == "nested": return r["outs"][0], r["outs"][1][0]
    return r.total, r.diff
  jf = TinyJit(f)
  for i, (a, b) in enumerate(zip(arrays(5), arrays(5))):
    r = jf(Tensor(a, device=device), Tensor(b, device=device))
    total, diff = parts(r)
    np.testing.assert_allclose(total.numpy(), a + b, rtol=1e-6, err_msg=f"call {i + 1}")
    np.testing.assert_allclose(diff.numpy(), a - b, rtol=1e-6, err_msg=f"call {i + 1}")
    if shape == "namedtuple": assert type(r) is Pair
    if shape == "nested": assert r["label"] == "kept"
  assert jf.cnt == 5 and len(jf.jit_cache) > 0


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replay_returns_new_tensors_on_the_replayed_buffer(device):
  "A replay returns new Tensor objects (in a new container) bound to the output buffer the kernels just wrote."
  jf = TinyJit(lambda x: [(x * 2).realize(), x + 1])
  outs = [jf(Tensor(a, device=device)) for a in arrays(4)]
  assert outs[2] is not outs[3] and outs[2][0] is not outs[3][0]
  assert outs[2][0].lazydata.base.realized is outs[3][0].lazydata.base.realized   # the output memory is the recording's
  assert outs[3][0].requires_grad == outs[1][0].requires_grad


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replay_returns_this_calls_input(device):
  "A returned input (or a view of it) is the replay's input, not the capture's."
  jf = TinyJit(lambda x: ((x * 2).realize(), x, x.reshape(3, 2)))
  for a in arrays(5):
    doubled, same, view = jf(Tensor(a, device=device))
    np.testing.assert_allclose(doubled.numpy(), a * 2, rtol=1e-6)
    np.testing.assert_array_equal(same.numpy(), a)
    np.testing.assert_array_equal(view.numpy(), a.reshape(3, 2))


@pytest.mark.parametrize("device", DEVICES)
def test_jit_replay_keeps_earlier_results_shapes(device):
  "Each replay's returned tensors carry its own variable values; a result kept from an earlier call keeps its shape."
  jf = TinyJit(lambda x: (x + 1, (x * 2).sum(0)))
  kept = []
  for n in range(2, 7):
    a = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    out, col = jf(Tensor(a.ravel(), device=device).reshape(Variable("n", 1, 10).bind(n), 2))
    np.testing.assert_allclose(col.numpy(), (a * 2).sum(0), rtol=1e-6)
    kept.append(out)
  assert [o.shape[0].src[1].arg for o in kept] == [2, 3, 4, 5, 6]


# ---- item 2: what a jit refuses

@pytest.mark.parametrize("device", DEVICES)
def test_jit_inside_jit_is_refused(device):
  "tinygrad v0.10's test_jit_jit_error: the inner jit's capture inside the outer one's raises (a RuntimeError there)."
  @TinyJit
  def inner(t): return t + 1
  @TinyJit
  def outer(t): return inner(t) * 3
  np.testing.assert_allclose(outer(Tensor([1.0], device=device)).numpy(), [6.0])   # call 1 captures nothing: fine
  with pytest.raises(RuntimeError, match="having TinyJit inside another TinyJit is not supported"):
    outer(Tensor([1.0], device=device))
  with pytest.raises(JitError, match=r"inner was called while another TinyJit is capturing.*inner\.fxn"):
    outer(Tensor([1.0], device=device))
  # a replay inside a capture is refused too: its kernels would be missing from the outer recording
  warm = TinyJit(lambda t: t * 2)
  for _ in range(3): warm(Tensor([1.0], device=device))
  outer2 = TinyJit(lambda t: warm(t) + 1)
  outer2(Tensor([1.0], device=device))
  with pytest.raises(JitError, match="not supported"): outer2(Tensor([1.0], device=device))
  # and the suggested fix works
  fixed = TinyJit(lambda t: inner.fxn(t) * 3)
  for v in range(4): np.testing.assert_allclose(fixed(Tensor([float(v)], device=device)).numpy(), [(v + 1) * 3.0])


@pytest.mark.parametrize("device", DEVICES)
def test_jit_that_captures_nothing_is_refused(device):
  "tinygrad v0.10's test_nothing_jitted: a capture that launched no kernel is an AssertionError."
  @TinyJit
  def nothing(a, b): return None
  a, b = Tensor([1.0], device=device), Tensor([2.0], device=device)
  nothing(a, b)
  with pytest.raises(AssertionError, match=r"nothing launched no kernel.*didn't JIT anything"): nothing(a, b)
  with pytest.raises(JitError, match="nothing to replay"): nothing(a, b)   # still refused: it is never replayed


@pytest.mark.parametrize("device", DEVICES)
def test_jit_duplicate_input_is_refused_from_the_first_call(device):
  "tinygrad v0.10's test_jit_duplicate_fail: a capture of f(t, t) would replay f(a, b) as f(b, b)."
  add = TinyJit(lambda a, b: (a + b).realize())
  a0 = arrays(1)[0]
  t = Tensor(a0, device=device)
  for _ in range(3):
    with pytest.raises(JitError, match=r"same tensor passed twice as input \(tensor inputs 0 and 1.*clone"): add(t, t)
  assert add.cnt == 0
  with pytest.raises(AssertionError): add(t, t.detach())   # another Tensor on the same buffer
  for _ in range(4):
    a, b = arrays(2)
    np.testing.assert_allclose(add(Tensor(a, device=device), Tensor(b, device=device)).numpy(), a + b, rtol=1e-6)
  np.testing.assert_allclose(add(t, t.clone()).numpy(), a0 * 2, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_optimizer_step_needs_training_mode(device):
  "tinygrad v0.10's Optimizer asserts Tensor.training; nothing is written when it refuses."
  w = Tensor([1.0, -2.0], device=device, requires_grad=True)
  for opt in (nn.optim.SGD([w], lr=0.1), nn.optim.Adam([w]), nn.optim.LAMB([w]), nn.optim.LARS([w])):
    opt.zero_grad(); (w * w).sum().backward()
    assert not Tensor.training
    with pytest.raises(AssertionError, match=r"\.step: Tensor.training is False.*Tensor.train\(\)"): opt.step()
    np.testing.assert_array_equal(w.numpy(), [1.0, -2.0])
  with Tensor.train(): nn.optim.SGD([w], lr=0.1).step()
  np.testing.assert_allclose(w.numpy(), [0.8, -1.6], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_jit_three_random_draws_differ_on_every_call(device):
  "A jitted function drawing three rand tensors: every call's values differ from every other call's."
  @TinyJit
  def draw(): return Tensor.rand(4, device=device), Tensor.rand(4, device=device), Tensor.rand(4, device=device)
  calls = [np.concatenate([t.numpy() for t in draw()]) for _ in range(5)]
  for i in range(5):
    for j in range(i):
      assert not np.isin(calls[i], calls[j]).any(), f"calls {j + 1} and {i + 1} share values"
    assert len(set(calls[i].tolist())) == 12, f"call {i + 1} repeats values within itself"


# ---- item 3: BatchNorm without running statistics

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5, 5)])
def test_batchnorm_without_running_stats_uses_batch_stats(device, shape):
  torch = pytest.importorskip("torch")
  x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
  bn = nn.BatchNorm(3, track_running_stats=False)
  bn.weight.assign(Tensor([0.5, 2.0, -1.0])); bn.bias.assign(Tensor([0.1, 0.0, 3.0]))
  tbn = torch.nn.BatchNorm1d(3, track_running_stats=False) if len(shape) == 2 else torch.nn.BatchNorm2d(3, track_running_stats=False)
  with torch.no_grad(): tbn.weight[:], tbn.bias[:] = torch.tensor([0.5, 2.0, -1.0]), torch.tensor([0.1, 0.0, 3.0])
  for t in (bn.weight, bn.bias): t.to_(device)
  with Tensor.train(): trained = bn(Tensor(x, device=device)).numpy()
  evaluated = bn(Tensor(x, device=device)).numpy()          # test mode
  want = tbn.eval()(torch.tensor(x)).detach().numpy()
  np.testing.assert_allclose(evaluated, want, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(trained, tbn.train()(torch.tensor(x)).detach().numpy(), atol=1e-5, rtol=1e-5)
  # as tinygrad v0.10, it has no running statistics at all (torch's are None), so a checkpoint has none either
  assert not hasattr(bn, "running_mean") and not hasattr(bn, "running_var") and tbn.running_mean is None
  assert set(nn.state.get_state_dict(bn)) == {"weight", "bias", "num_batches_tracked"}


# ---- item 9: randint's range

@pytest.mark.parametrize("device", DEVICES)
def test_randint_refuses_an_empty_range(device):
  for low, high in [(5, 5), (5, 3), (0, 0), (-1, -4)]:
    with pytest.raises(ArgumentError, match=rf"randint: low={low} must be less than high={high}"):
      Tensor.randint(4, low=low, high=high, device=device)
  with pytest.raises(ValueError): Tensor.randint(3, low=2, high=2, device=device)   # torch raises a RuntimeError, numpy a ValueError
  r = Tensor.randint(200, low=-2, high=-1, device=device).numpy()
  assert r.tolist() == [-2] * 200
