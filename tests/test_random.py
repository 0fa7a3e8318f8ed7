"""Random numbers (chapter 1e): Threefry-2x32 on the device, bit for bit as tinygrad v0.10.0, on every device.

The expected values of TINYGRAD_V0_10 were printed by tinygrad 0.10.0 itself (`pip install tinygrad==0.10.0 numpy`
in a scratch venv outside the repo; clang 14 on x86-64; `CLANG=1 python script.py`, each entry one
`Tensor.manual_seed(seed)` followed by the calls its key names, then `.numpy().ravel().tolist()`; the dropout input is
`Tensor([[float(i - 7) for i in range(5*r, 5*r + 5)] for r in range(3)])` under `Tensor.train()`). The first three
are also printed in tinygrad's own docstrings (`manual_seed`, `rand`, `randint`). tinygrad is not needed to run this.
"""
import inspect, math

import numpy as np
import pytest

import tinylit.mixin.creation as creation
from tinylit import Tensor, TinyJit, dtypes
from tinylit.mixin import ArgumentError
from tinylit.mixin.creation import RandomMixin, threefry2x32
from tinylit.ops import Ops

from devices import DEVICES, skip_without_half

# Drawn exactly: the bits, the float made from them, and +, *, truncation to int on top (rounded once each, as here)
TINYGRAD_V0_10 = {
  (42, "rand(2, 3)"): [0.9970332384109497, 0.5899163484573364, 0.2225480079650879, 0.7550519704818726, 0.9056503772735596,
                       0.8648829460144043],
  (42, "rand(5); rand(5)"): [0.9970332384109497, 0.5899163484573364, 0.2225480079650879, 0.7550519704818726,
                             0.9056503772735596, 0.616178035736084, 0.6213366985321045, 0.9790825843811035,
                             0.7851190567016602, 0.4177769422531128],
  (42, "randint(2, 3, low=5, high=10)"): [9, 7, 6, 8, 9, 9],
  (0, "rand(1)"): [0.9085565805435181],
  (1337, "rand(7)"): [0.06963145732879639, 0.35799849033355713, 0.9115798473358154, 0.6800745725631714,
                      0.23428213596343994, 0.9835294485092163, 0.012266755104064941],
  (1337, "rand(3, 3); rand(1)"): [0.09915649890899658, 0.0906752347946167, 0.09611320495605469, 0.42800474166870117,
                                  0.7763850688934326, 0.06093311309814453, 0.9809964895248413, 0.38802289962768555,
                                  0.24520719051361084, 0.7115392684936523],
  (7, "randint(9, low=-4, high=3)"): [1, -4, -2, -1, -1, -2, -1, -4, -2],
  (42, "uniform(2, 3, low=2, high=10)"): [9.976265907287598, 6.719330787658691, 3.780384063720703, 8.04041576385498,
                                          9.245203018188477, 8.919063568115234],
  (42, "scaled_uniform(3, 5)"): [0.028375564143061638, -0.22174739837646484, -0.0034137156326323748, -0.17168471217155457,
                                 -0.1807708740234375, 0.20678089559078217, 0.13125266134738922, -0.10883741080760956,
                                 0.16493459045886993, 0.1529494673013687, 0.04588109254837036, 0.1776118278503418,
                                 -0.049183446913957596, -0.05123811587691307, 0.11665231734514236],
  (42, "glorot_uniform(2, 3)"): [1.0889452695846558, 0.19699685275554657, -0.6078668832778931, 0.5587908625602722,
                                 0.8887354731559753, 0.7994185090065002],
  (3, "rand(7, dtype=dtypes.float16)"): [0.3486328125, 0.5322265625, 0.8779296875, 0.0390625, 0.447265625, 0.6181640625,
                                         0.537109375],
  (3, "rand(5, dtype=dtypes.float64)"): [0.09435430207146678, 0.6681451850462532, 0.08196980940032095,
                                         0.02578055066003415, 0.5433082073464774],
  (42, "dropout(0.3)"): [-10.0, 0.0, -7.142857551574707, 0.0, 0.0, -2.857142925262451, -1.4285714626312256, 0.0,
                         1.4285714626312256, 2.857142925262451, 4.285714149475098, 5.714285850524902, 7.142857551574707,
                         8.571428298950195, 10.0],
}
# Close, not equal: cos, log and sqrt are approximations that differ by an ulp or two between libraries (tinylit's
# CPU, PYTHON and CL devices disagree among themselves just as much), and tinygrad's clang contracts a*b+c into one
# fused multiply-add, rounded once, where tinylit rounds the product and the sum (kaiming_uniform: a*r + low).
TINYGRAD_V0_10_CLOSE = {
  (42, "randn(2, 3)"): [0.9778565764427185, 0.4677884876728058, 0.5526346564292908, -0.32882535457611084,
                        -0.8555141687393188, 0.27526432275772095],
  (42, "normal(2, 3, mean=10, std=2)"): [11.955713272094727, 10.935577392578125, 11.105269432067871, 9.3423490524292,
                                         8.288971900939941, 10.550528526306152],
  (42, "kaiming_uniform(2, 3)"): [1.4057519435882568, 0.25430911779403687, -0.7847135066986084, 0.7213598489761353,
                                  1.1472951173782349, 1.0319932699203491],
}

def draw(expr: str, device: str) -> np.ndarray:
  "Evaluate `expr` (calls of Tensor's random methods, `;` between draws) on `device`, all values in one flat array."
  if expr.startswith("dropout"):
    x = Tensor([[float(i - 7) for i in range(5 * r, 5 * r + 5)] for r in range(3)], device=device)
    with Tensor.train(): return x.dropout(float(expr[8:-1])).numpy().ravel()
  outs = [eval(f"Tensor.{e.strip()[:-1]}, device=device)", {"Tensor": Tensor, "dtypes": dtypes, "device": device})
          for e in expr.split(";")]
  return np.concatenate([o.numpy().ravel() for o in outs])

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed,expr", list(TINYGRAD_V0_10))
def test_same_numbers_as_tinygrad(device, seed, expr):
  if "float16" in expr: skip_without_half(device)
  Tensor.manual_seed(seed)
  got = draw(expr, device)
  np.testing.assert_array_equal(got, np.array(TINYGRAD_V0_10[(seed, expr)], dtype=got.dtype))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed,expr", list(TINYGRAD_V0_10_CLOSE))
def test_close_to_tinygrad(device, seed, expr):
  Tensor.manual_seed(seed)
  np.testing.assert_allclose(draw(expr, device), TINYGRAD_V0_10_CLOSE[(seed, expr)], rtol=1e-5, atol=1e-6)

# Random123's known-answer vectors (tests/kat_vectors of the Threefry paper's library): threefry2x32, 20 rounds,
# counter (x0, x1), key (k0, k1) -> output
KAT = [((0, 0), (0, 0), (0x6b200159, 0x99ba4efe)),
       ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
       ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]

@pytest.mark.parametrize("device", DEVICES)
def test_threefry_known_answers(device):
  ctr, key, want = (np.array(v, dtype=np.uint32).T for v in zip(*KAT))
  host = threefry2x32(*ctr, *key)   # the same function on numpy uint32 arrays
  dev = threefry2x32(*[Tensor(a, device=device) for a in (*ctr, *key)])
  for got in (host, [t.numpy() for t in dev]): np.testing.assert_array_equal(np.stack(got), want)

@pytest.mark.parametrize("device", DEVICES)
def test_seed_reproduces(device):
  Tensor.manual_seed(5)
  first = [Tensor.rand(4, 3, device=device).numpy(), Tensor.randn(9, device=device).numpy(),
           Tensor.randint(6, low=-3, high=3, device=device).numpy()]
  Tensor.manual_seed(5)
  again = [Tensor.rand(4, 3, device=device).numpy(), Tensor.randn(9, device=device).numpy(),
           Tensor.randint(6, low=-3, high=3, device=device).numpy()]
  for a, b in zip(first, again): np.testing.assert_array_equal(a, b)
  Tensor.manual_seed(6)
  assert not np.array_equal(Tensor.rand(4, 3, device=device).numpy(), first[0])
  # the draw after the first moves the counter on: new numbers, not the first ones again
  Tensor.manual_seed(5)
  a, b = Tensor.rand(12, device=device).numpy(), Tensor.rand(12, device=device).numpy()
  assert not np.array_equal(a, b)

@pytest.mark.parametrize("device", DEVICES)
def test_every_device_draws_the_same(device):
  Tensor.manual_seed(11)
  ref = Tensor.rand(3, 7, device="CPU").numpy(), Tensor.randn(33, device="CPU").numpy()
  Tensor.manual_seed(11)
  got = Tensor.rand(3, 7, device=device).numpy(), Tensor.randn(33, device=device).numpy()
  np.testing.assert_array_equal(got[0], ref[0])
  np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)   # transcendentals: see TINYGRAD_V0_10_CLOSE

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1,), (2,), (3,), (1, 1), (5, 3), (2, 3, 5), (0,), (4, 0)])
def test_shapes(device, shape):
  Tensor.manual_seed(0)
  r = Tensor.rand(*shape, device=device)
  assert r.shape == shape and r.dtype == dtypes.float32 and r.device == device
  v = r.numpy()
  assert v.shape == shape and ((0 <= v) & (v < 1)).all()
  assert Tensor.randn(*shape, device=device).numpy().shape == shape

# ---- statistics, seeded (so each check passes or fails the same way every run; bounds at 1 in 1000)
def ks_statistic(samples: np.ndarray, cdf) -> float:
  "Kolmogorov-Smirnov: the largest gap between the samples' empirical CDF and `cdf`."
  x = np.sort(samples.astype(np.float64))
  f, n = cdf(x), len(x)
  return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))

def ks_bound(n: int, alpha: float = 1e-3) -> float: return math.sqrt(-math.log(alpha / 2) / 2) / math.sqrt(n)

def chi2_bound(df: int, z: float = 3.09) -> float:
  "The chi-square quantile at 1 - 1/1000 (z = 3.09), by Wilson and Hilferty's cube-root approximation."
  return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3

N = 100_000

@pytest.mark.parametrize("device", DEVICES)
def test_rand_is_uniform(device):
  Tensor.manual_seed(2024)
  u = Tensor.rand(N, device=device).numpy()
  assert ((0 <= u) & (u < 1)).all()
  assert ks_statistic(u, lambda x: x) < ks_bound(N)
  counts = np.bincount((u * 100).astype(int), minlength=100)
  assert ((counts - N / 100) ** 2 / (N / 100)).sum() < chi2_bound(99)
  assert abs(u.mean() - 0.5) < 4 * math.sqrt(1 / 12 / N) and abs(u.var() - 1 / 12) < 0.002
  # 23 random mantissa bits: every value a multiple of 2**-23, the lowest bit set half the time
  m = (u.astype(np.float64) * 2 ** 23)
  np.testing.assert_array_equal(m, np.round(m))
  assert abs((m.astype(np.int64) & 1).mean() - 0.5) < 0.01

@pytest.mark.parametrize("device", DEVICES)
def test_randn_is_normal(device):
  Tensor.manual_seed(2025)
  z = Tensor.randn(N, device=device).numpy().astype(np.float64)
  assert np.isfinite(z).all()
  normal_cdf = np.vectorize(lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2))))
  assert ks_statistic(z, normal_cdf) < ks_bound(N)
  assert abs(z.mean()) < 4 / math.sqrt(N) and abs(z.std() - 1) < 0.01
  assert abs(((z - z.mean()) ** 3).mean()) < 0.05 and abs(((z - z.mean()) ** 4).mean() / z.var() ** 2 - 3) < 0.1

@pytest.mark.parametrize("device", DEVICES)
def test_randint_range(device):
  Tensor.manual_seed(3)
  r = Tensor.randint(20000, low=-3, high=4, device=device)
  assert r.dtype == dtypes.int32
  counts = np.bincount(r.numpy() + 3, minlength=7)
  assert len(counts) == 7 and (counts > 0).all()                      # every value of [-3, 4), nothing outside
  assert ((counts - 20000 / 7) ** 2 / (20000 / 7)).sum() < chi2_bound(6)
  assert Tensor.randint(5, low=2, high=3, device=device).numpy().tolist() == [2] * 5
  with pytest.raises(TypeError): Tensor.randint(3, low=0.5, high=2)
  with pytest.raises(TypeError): Tensor.randint(3, dtype=dtypes.float32)
  with pytest.raises(ArgumentError): Tensor.rand(3, dtype=dtypes.int32)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout(device, p):
  Tensor.manual_seed(9)
  x = Tensor.arange(1, 20001, device=device).float()
  with Tensor.train(): y = x.dropout(p).numpy()
  kept = y != 0
  assert abs(kept.mean() - (1 - p)) < 4 * math.sqrt(p * (1 - p) / 20000)
  xs = x.numpy()
  np.testing.assert_allclose(y[kept], xs[kept] / np.float32(1 - p), rtol=1e-6)   # the kept ones, scaled up
  np.testing.assert_array_equal(x.dropout(p).numpy(), xs)                       # not training: untouched

@pytest.mark.parametrize("device", DEVICES)
def test_float_dtypes(device):
  Tensor.manual_seed(4)
  d = Tensor.rand(10001, dtype=dtypes.float64, device=device).numpy()
  assert d.dtype == np.float64 and ((0 <= d) & (d < 1)).all() and abs(d.mean() - 0.5) < 0.02
  assert len(np.unique(d)) == len(d)                                  # 52 random bits: no repeats
  skip_without_half(device)
  h = Tensor.rand(1001, dtype=dtypes.float16, device=device).numpy()
  assert h.dtype == np.float16 and ((0 <= h) & (h < 1)).all() and abs(h.mean() - 0.5) < 0.05

# ---- on the device, lazily, and fresh under TinyJit
def test_lazy_and_on_the_device():
  Tensor.manual_seed(0)
  r = Tensor.rand(64)
  assert r.lazydata.base.realized is None                             # nothing computed yet
  kernels = [si.ast for si in r.schedule() if si.ast.op is Ops.SINK]
  assert len(kernels) == 1
  ops = [u.op for u in kernels[0].toposort]
  assert ops.count(Ops.XOR) >= 20 and Ops.SHL in ops and Ops.SHR in ops   # twenty rounds of Threefry in the kernel

def test_no_host_rng(monkeypatch):
  "No numpy generator anywhere: every draw works with numpy.random taken away."
  assert not hasattr(RandomMixin, "_rng") and "np.random" not in inspect.getsource(creation)
  class NoRandom:
    def __getattr__(self, name): raise AssertionError(f"numpy.random.{name} used")
  monkeypatch.setattr(np, "random", NoRandom())
  Tensor.manual_seed(1)
  with Tensor.train():
    for t in (Tensor.rand(5), Tensor.randn(5), Tensor.randint(5), Tensor.uniform(5), Tensor.normal(5),
              Tensor.kaiming_uniform(3, 2), Tensor.glorot_uniform(3, 2), Tensor.ones(5).dropout(),
              Tensor([1.0, 2.0]).multinomial(4, replacement=True)):
      t.numpy()

@pytest.mark.parametrize("device", DEVICES)
def test_jit_replays_draw_new_numbers(device):
  @TinyJit
  def noisy(x: Tensor) -> Tensor: return (x + Tensor.rand(2, 3, device=device)).realize()
  x = Tensor.zeros(2, 3, device=device).contiguous().realize()
  Tensor.manual_seed(0)
  jitted = [noisy(x).numpy().copy() for _ in range(5)]                 # calls 3-5 replay the captured kernels
  assert noisy.cnt == 5 and len(noisy.jit_cache) > 0
  assert len({a.tobytes() for a in jitted}) == 5
  Tensor.manual_seed(0)
  plain = [Tensor.rand(2, 3, device=device).numpy() for _ in range(5)]
  for a, b in zip(jitted, plain): np.testing.assert_array_equal(a, b)   # the counter moved on in the replays too
