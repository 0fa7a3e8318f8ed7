"""PADTO (chapter 6): an axis padded up to a multiple so that other opts can split it. A padded output is never
stored; a padded reduce position must add nothing. Checked on every device against the same kernel with no opts:
prime-sized matmuls, sums and elementwise ops after a reduce, with PADTO where the padding is harmless and refused
where it would leak into the result (a max, an exp, a constant) or trap (an integer division by the padding's 0).

A random part draws opt sequences that start with PADTO on kernels of odd sizes (OPT_FUZZ_SEED changes the draw)."""
import os, random
import numpy as np
import pytest
from devices import DEVICES
from test_opts import ACTIONS, close, run_kernel
from tinylit import Tensor
from tinylit.device import Device
from tinylit.heuristic import hand_coded_optimizations
from tinylit.kernel import Kernel, KernelOptError, Opt, OptOps
from tinylit.realize import run_schedule

SEED = int(os.getenv("OPT_FUZZ_SEED", "0"))

def _data(seed: int, *shape) -> np.ndarray:
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def _last(t: Tensor, device: str):
  "The last schedule item of `t`, the ones before it run."
  *before, si = t.schedule()
  run_schedule(before)
  return si

def _check(t: Tensor, device: str, opts: list[Opt]) -> None:
  si = _last(t, device)
  ref, got = run_kernel(si, device, []), run_kernel(si, device, opts)
  assert close(got, ref), f"{device} with {opts}: max difference {np.nanmax(np.abs(got - ref)):.3g}"

PRIME_MATMUL = lambda d: Tensor(_data(0, 67, 53), device=d) @ Tensor(_data(1, 53, 71), device=d)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opts", [
  [Opt(OptOps.PADTO, 1, 16), Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 0, 4)],
  [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.PADTO, 1, 8), Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 8)],
  [Opt(OptOps.PADTO, 2, 8), Opt(OptOps.UNROLL, 0, 8)],                   # the reduce axis: a sum of products
  [Opt(OptOps.PADTO, 2, 16), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.PADTO, 1, 4)],
  [Opt(OptOps.PADTO, 1, 32), Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.PADTO, 0, 2), Opt(OptOps.UPCAST, 0, 2)],
], ids=["vec16-tile4", "tile8x8", "reduce-unroll", "reduce-twice", "pad32"])
def test_prime_matmul(device, opts):
  _check(PRIME_MATMUL(device), device, opts)

@pytest.mark.parametrize("device", DEVICES)
def test_prime_matmul_heuristic_pads_and_is_right(device):
  a, b = _data(0, 67, 53), _data(1, 53, 71)
  si = _last(Tensor(a, device=device) @ Tensor(b, device=device), device)
  k = hand_coded_optimizations(Kernel(si.ast, Device[device].renderer))
  if device == "CPU": assert any(o.op is OptOps.PADTO for o in k.applied_opts), k.applied_opts
  np.testing.assert_allclose(run_kernel(si, device, k.applied_opts).reshape(67, 71), a @ b, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("build, opts", [
  (lambda d: Tensor(_data(2, 37, 61), device=d).sum(1), [Opt(OptOps.PADTO, 1, 8), Opt(OptOps.UNROLL, 0, 8)]),
  (lambda d: Tensor(_data(2, 37, 61), device=d).sum(1), [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 8)]),
  (lambda d: Tensor(_data(3, 61, 37), device=d).sum(0), [Opt(OptOps.PADTO, 0, 16), Opt(OptOps.PADTO, 1, 4),
                                                          Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UNROLL, 0, 4)]),
  # a padded reduce of a product with a constant and a cast still adds zeros
  (lambda d: (Tensor(_data(4, 29, 43), device=d) * 3).cast("int32").cast("float32").sum(1),
   [Opt(OptOps.PADTO, 1, 16), Opt(OptOps.UNROLL, 0, 16)]),
  # elementwise after the reduce: an exp and a log of the sum, padded along the output (never stored)
  (lambda d: (Tensor(_data(5, 43, 59), device=d).sum(1).exp() + 1).log(), [Opt(OptOps.PADTO, 0, 16), Opt(OptOps.UPCAST, 0, 16)]),
  (lambda d: Tensor(_data(6, 43, 59), device=d).max(1).exp(), [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 8)]),
  # a softmax's exp-sum padded along its rows, and a padded tensor's sum (its own mask and PADTO's)
  (lambda d: Tensor(_data(7, 31, 47), device=d).exp().sum(1), [Opt(OptOps.PADTO, 0, 8), Opt(OptOps.UPCAST, 0, 8)]),
  (lambda d: Tensor(_data(8, 31, 45), device=d).pad(((0, 0), (1, 1))).sum(1), [Opt(OptOps.PADTO, 1, 16), Opt(OptOps.UNROLL, 0, 16)]),
  # a constant through a view is masked too: (x + 1) reads 0 + 0 in the padding
  (lambda d: (Tensor(_data(7, 31, 47), device=d) + 1).sum(1), [Opt(OptOps.PADTO, 1, 16), Opt(OptOps.UNROLL, 0, 16)]),
  (lambda d: Tensor(_data(9, 31, 45), device=d).relu() * Tensor(_data(10, 31, 45), device=d) + 1,
   [Opt(OptOps.PADTO, 0, 16), Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 0, 2)]),
], ids=["sum-rows-reduce", "sum-rows-out", "sum-cols", "sum-const-cast", "log-exp-after", "exp-after-max", "exp-sum-out",
        "padded-sum", "plus-one-sum", "elementwise"])
def test_padded_kernels_match_noopt(device, build, opts):
  _check(build(device), device, opts)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("build, axis, why", [
  (lambda d: Tensor(_data(6, 43, 59), device=d).max(1), 1, "MAX reduce would take in the padding"),
  (lambda d: Tensor(_data(7, 31, 47), device=d).exp().sum(1), 1, "not 0 where every read is padding"),
  (lambda d: Tensor(_data(7, 31, 47), device=d).relu().reciprocal().sum(1), 1, "not 0 where every read is padding"),
  (lambda d: Tensor(np.arange(1, 71, dtype=np.int32), device=d) // Tensor(np.arange(1, 71, dtype=np.int32), device=d), 0,
   "IDIV would divide by the padding"),
], ids=["max", "exp-sum", "recip-sum", "int-div"])
def test_unsafe_padding_is_refused(device, build, axis, why):
  k = Kernel(_last(build(device), device).ast, Device[device].renderer)
  with pytest.raises(KernelOptError, match=why): k.apply_opt(Opt(OptOps.PADTO, axis, 16))
  assert k.applied_opts == []

def test_padto_explains_what_is_wrong():
  k = Kernel(_last(PRIME_MATMUL("CPU"), "CPU").ast, Device["CPU"].renderer)
  with pytest.raises(KernelOptError, match="nothing to pad"): Kernel(_last(Tensor.ones(16, 16).contiguous() @ Tensor.ones(16, 16),
                                                                            "CPU").ast, None).apply_opt(Opt(OptOps.PADTO, 0, 8))
  with pytest.raises(KernelOptError, match="more than quadruple"): k.apply_opt(Opt(OptOps.PADTO, 0, 512))
  with pytest.raises(KernelOptError, match="an int > 1"): k.apply_opt(Opt(OptOps.PADTO, 0, 1))
  k.apply_opt(Opt(OptOps.PADTO, 1, 16))
  k.apply_opt(Opt(OptOps.UPCAST, 1, 16))   # the 16 lanes are no loop any more: not paddable
  with pytest.raises(KernelOptError, match="padto is for global or reduce axes, axis 3 is upcast"): k.apply_opt(Opt(OptOps.PADTO, 3, 32))
  assert [o.op for o in k.applied_opts] == [OptOps.PADTO, OptOps.UPCAST] and k.full_shape == (67, 5, 53, 16)

# the random part: kernels of odd sizes, a PADTO or two first, then the usual opts
def _rand(d, r, shape, ints=False):
  a = r.integers(-9, 9, shape).astype(np.int32) if ints else r.standard_normal(shape).astype(np.float32)
  return Tensor(a, device=d)

ODD = {
  "matmul": lambda d, r: _rand(d, r, (23, 19)) @ _rand(d, r, (19, 29)),
  "matmul_T": lambda d, r: _rand(d, r, (13, 37)) @ _rand(d, r, (11, 37)).T,
  "sum_then_ew": lambda d, r: (_rand(d, r, (19, 33)).sum(1) * 2).exp(),
  "gelu_tail": lambda d, r: (_rand(d, r, (17, 13)) @ _rand(d, r, (13, 35))).gelu(),
  "int_sum": lambda d, r: _rand(d, r, (21, 37), ints=True).sum(0),
}
PADS = [Opt(OptOps.PADTO, axis, amt) for amt in (2, 4, 8, 16) for axis in range(3)]

@pytest.mark.parametrize("device", DEVICES)
def test_random_opts_after_padto_match_noopt(device):
  rng = random.Random(f"padto-{SEED}-{device}")
  for case in range(40 if device in ("CPU", "PYTHON") else 8):
    name = rng.choice(sorted(ODD))
    si = _last(ODD[name](device, np.random.default_rng(rng.randrange(2**32))), device)
    k = Kernel(si.ast, Device[device].renderer)
    for pool in (PADS, PADS, ACTIONS, ACTIONS, ACTIONS):
      for _ in range(10):
        try: k.apply_opt(rng.choice(pool))
        except KernelOptError: continue
        break
    ref, got = run_kernel(si, device, []), run_kernel(si, device, k.applied_opts)
    assert close(got, ref), f"{device} {name} with {k.applied_opts} (OPT_FUZZ_SEED={SEED}, case {case})"

# the rules' other new plans (chapter 6b): a matmul block two vectors wide, 8 rows of partial sums for x @ W.T, and
# padding of an odd vocabulary; each checked against numpy on every device
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes, transposed", [(((64, 48), (48, 96)), False), (((64, 96), (80, 96)), True),
                                                (((96, 128), (65, 128)), True), (((65, 96), (96, 128)), False)],
                         ids=["block", "x@W.T", "vocab-65-out", "vocab-65-rows"])
def test_rules_plans_compute_right(device, shapes, transposed):
  a, b = _data(11, *shapes[0]), _data(12, *shapes[1])
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  got = (ta @ tb.T if transposed else ta @ tb).numpy()
  np.testing.assert_allclose(got, a @ b.T if transposed else a @ b, rtol=1e-4, atol=1e-4)
