"""The optimizer must never change a result: random valid sequences of opts on a corpus of kernels (elementwise,
reduces over each axis, matmuls whose sizes aren't multiples of the vector width, padded and masked views, int, bool
and half dtypes), each checked against the same kernel with no opts (NOOPT), on every device this machine has.

CI runs OPT_FUZZ_N cases per machine (default 2000: 700 on CPU, whose every case runs the C compiler, 1000 on
PYTHON, 40 on CL, whose PoCL compiles take seconds; a GPU gets 700), split into chunks for xdist; more at the desk with
`OPT_FUZZ_N=20000 OPT_FUZZ_SEED=7 pytest tests/test_opts.py`.
A failure names the kernel, the opts and the seed."""
import os, random
import numpy as np
import pytest
from tinylit import Tensor, dtypes
from devices import DEVICES, has_half
from tinylit.helpers import prod
from tinylit.device import Device
from tinylit.kernel import Kernel, KernelOptError, Opt, OptOps
from tinylit.realize import CompiledRunner, get_program, run_schedule

N = int(os.getenv("OPT_FUZZ_N", "2000"))
SHARE = {"CPU": 0.35, "PYTHON": 0.5, "CL": 0.02}   # of N, per device; CUDA: as CPU
SEED = int(os.getenv("OPT_FUZZ_SEED", "0"))
CHUNKS = 4

def _data(rng: np.random.Generator, shape, dtype=np.float32):
  if np.issubdtype(dtype, np.floating): return rng.standard_normal(shape).astype(dtype)
  if dtype == np.bool_: return rng.integers(0, 2, shape).astype(np.bool_)
  return rng.integers(-50, 50, shape).astype(dtype)

# each builder takes (device, rng) and returns the tensor whose last kernel is fuzzed
CORPUS = {
  "add_2d": lambda d, r: Tensor(_data(r, (48, 64)), device=d) + Tensor(_data(r, (48, 64)), device=d),
  "chain_broadcast": lambda d, r: ((Tensor(_data(r, (24, 1, 40)), device=d) * Tensor(_data(r, (1, 12, 40)), device=d)).exp() - 1).relu(),
  "permuted": lambda d, r: Tensor(_data(r, (32, 48)), device=d).T * 2 + Tensor(_data(r, (48, 32)), device=d),
  "sum_axis0": lambda d, r: Tensor(_data(r, (64, 48)), device=d).sum(0),
  "sum_axis1": lambda d, r: Tensor(_data(r, (48, 64)), device=d).sum(1),
  "sum_all": lambda d, r: Tensor(_data(r, (32, 64)), device=d).sum(),
  "max_axis1": lambda d, r: Tensor(_data(r, (40, 64)), device=d).max(1),
  "max_3d_mid": lambda d, r: Tensor(_data(r, (8, 32, 16)), device=d).max(1),
  "prod_small": lambda d, r: (Tensor(_data(r, (32, 16)), device=d) * 0.1 + 1).prod(1),
  "sum_then_ew": lambda d, r: (Tensor(_data(r, (48, 64)), device=d).exp().sum(1) + 1).log(),
  "matmul": lambda d, r: Tensor(_data(r, (32, 48)), device=d) @ Tensor(_data(r, (48, 64)), device=d),
  "matmul_odd": lambda d, r: Tensor(_data(r, (36, 20)), device=d) @ Tensor(_data(r, (20, 44)), device=d),
  "matmul_T": lambda d, r: Tensor(_data(r, (32, 48)), device=d) @ Tensor(_data(r, (64, 48)), device=d).T,
  "batched_matmul": lambda d, r: Tensor(_data(r, (4, 16, 24)), device=d) @ Tensor(_data(r, (4, 24, 32)), device=d),
  "padded": lambda d, r: Tensor(_data(r, (30, 60)), device=d).pad(((1, 1), (2, 2))).exp() * 2,
  "padded_sum": lambda d, r: Tensor(_data(r, (30, 62)), device=d).pad(((1, 1), (1, 1))).sum(1),
  "shrunk_flipped": lambda d, r: Tensor(_data(r, (40, 80)), device=d)[4:36, ::-1][:, 8:72] + 1,
  "masked_where": lambda d, r: (Tensor(_data(r, (32, 64)), device=d) > 0).where(Tensor(_data(r, (32, 64)), device=d), -1.0),
  "conv_like": lambda d, r: Tensor(_data(r, (1, 4, 12, 12)), device=d).conv2d(Tensor(_data(r, (8, 4, 3, 3)), device=d), padding=1),
  "int_add_mul": lambda d, r: Tensor(_data(r, (32, 64), np.int32), device=d) * 3 + Tensor(_data(r, (32, 64), np.int32), device=d),
  "int_sum": lambda d, r: Tensor(_data(r, (48, 64), np.int32), device=d).sum(1),
  "uint8_wrap": lambda d, r: Tensor(_data(r, (32, 64), np.int32).astype(np.uint8), device=d) * 7 - 3,
  "bool_any": lambda d, r: Tensor(_data(r, (32, 64), np.bool_), device=d).cast(dtypes.int32).sum(0),
  "half_ew": lambda d, r: Tensor(_data(r, (32, 64), np.float16), device=d) * 1.5 + 0.25,
  "half_sum": lambda d, r: Tensor(_data(r, (32, 64), np.float16), device=d).sum(1),
  "cast_mix": lambda d, r: Tensor(_data(r, (32, 64)), device=d).cast(dtypes.int32) + Tensor(_data(r, (32, 64), np.int32), device=d),
}

# the opts a search tries (tinygrad's engine/search.py has a list like it)
ACTIONS = [Opt(OptOps.UPCAST, axis, amt) for amt in (0, 2, 3, 4, 8, 16) for axis in range(4)]
ACTIONS += [Opt(OptOps.UNROLL, axis, amt) for amt in (0, 2, 4, 16) for axis in range(3)]
ACTIONS += [Opt(OptOps.LOCAL, axis, amt) for amt in (2, 4, 8, 16) for axis in range(3)]
ACTIONS += [Opt(OptOps.GROUP, axis, amt) for amt in (2, 4, 8) for axis in range(2)]
ACTIONS += [Opt(OptOps.GROUPTOP, axis, amt) for amt in (4, 16) for axis in range(2)]
ACTIONS += [Opt(OptOps.THREAD, axis, amt) for amt in (2, 3, 4) for axis in range(3)]
ACTIONS += [Opt(OptOps.SWAP, 0, 1), Opt(OptOps.SWAP, 0, 2), Opt(OptOps.SWAP, 1, 2)]

def run_kernel(si, device: str, opts: list[Opt]) -> np.ndarray:
  "Run one schedule item's kernel with exactly these opts; return its output."
  prg = CompiledRunner(get_program(si.ast, Device[device].renderer, opts))
  bufs = [si.bufs[i] for i in prg.p.globals]
  for b in bufs: b.allocate()
  prg(bufs)
  return si.bufs[0].numpy()

def random_opts(ast, device: str, rng: random.Random) -> list[Opt]:
  "A random sequence of 1-6 opts that all apply (an invalid pick is skipped and another one drawn, up to 20 times)."
  k = Kernel(ast, Device[device].renderer)
  for _ in range(rng.randint(1, 6)):
    if prod(k.full_shape[k.first_upcast:]) >= 64: break  # past that, the C compiler's time dominates CI's run
    for _ in range(20):
      try: k.apply_opt(rng.choice(ACTIONS))
      except KernelOptError: continue
      break
  return k.applied_opts

def close(got: np.ndarray, ref: np.ndarray) -> bool:
  if ref.dtype.kind in "iub": return np.array_equal(got, ref)
  # opts may sum in another order (partial sums): compare to the size of the values, NaNs where NaNs are
  tol = 1e-2 if ref.dtype == np.float16 else 1e-4
  return bool(np.allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol,
                          atol=tol * (1 + np.nanmax(np.abs(ref), initial=0)), equal_nan=True))

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_opts_match_noopt(device, chunk):
  rng = random.Random(f"{SEED}-{device}-{chunk}")
  tried, cases = 0, int(N * SHARE.get(device, 0.35)) // CHUNKS
  names = sorted(n for n in CORPUS if "half" not in n or has_half(device))
  for case in range(cases):
    name = rng.choice(names)
    data_rng = np.random.default_rng(rng.randrange(2**32))
    sched = CORPUS[name](device, data_rng).schedule()
    *before, si = sched
    run_schedule(before)
    ref = run_kernel(si, device, [])
    opts = random_opts(si.ast, device, rng)
    got = run_kernel(si, device, opts)
    tried += bool(opts)
    assert close(got, ref), f"{device} {name} with {opts} (OPT_FUZZ_SEED={SEED}, chunk {chunk}, case {case}): " \
                            f"max difference {np.nanmax(np.abs(got.astype(np.float64) - ref)):.3g}"
  assert tried > cases * 9 // 10, f"only {tried} cases got any opt: the action list doesn't fit the corpus"

def test_apply_opt_explains_what_is_wrong():
  a = Tensor(np.ones((16, 24), np.float32)) @ Tensor(np.ones((24, 8), np.float32))
  k = Kernel(a.schedule()[-1].ast, Device["CPU"].renderer)
  with pytest.raises(KernelOptError, match=r"UPCAST.*5 doesn't divide axis 1 of size 8"): k.apply_opt(Opt(OptOps.UPCAST, 1, 5))
  with pytest.raises(KernelOptError, match="no local"): k.apply_opt(Opt(OptOps.LOCAL, 0, 2))
  with pytest.raises(KernelOptError, match="upcast is for global or local axes, axis 2 is reduce"): k.apply_opt(Opt(OptOps.UPCAST, 2, 2))
  with pytest.raises(KernelOptError, match="no such axis"): k.apply_opt(Opt(OptOps.UPCAST, 7, 2))
  assert k.applied_opts == []
