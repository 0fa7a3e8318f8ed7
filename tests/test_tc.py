"""Tensor cores (chapter 6d): the TC opt and its WMMA, run on the PYTHON device, which emulates CUDA's tensor cores
with EMULATE_CUDA=1 (a warp's fragments gathered by the layout, as the GPU would), so the whole path is tested on any
machine; CUDA's mma.sync rendering is compiled by NVRTC in tests/test_cuda.py."""
import numpy as np
import pytest
from tinylit import Tensor, dtypes
from tinylit.device import Device
from tinylit.helpers import getenv
from tinylit.heuristic import hand_coded_optimizations
from tinylit.kernel import Kernel, KernelOptError, Opt, OptOps
from tinylit.realize import CompiledRunner, get_program
from tinylit.renderer import CUDARenderer, PythonRenderer
from tinylit.runtime.ops_python import PythonProgram
from tinylit.search import actions
from tinylit.tc import cuda_tensor_cores, tc_axes


@pytest.fixture
def emulated(monkeypatch) -> PythonRenderer:
  "The PYTHON device's renderer as EMULATE_CUDA=1 makes it: it offers CUDA's tensor cores."
  Device["PYTHON"]   # opened first, without: the device's own renderer must not keep tensor cores for later tests
  monkeypatch.setenv("EMULATE_CUDA", "1")
  getenv.cache_clear()   # getenv remembers what it read
  yield PythonRenderer()
  getenv.cache_clear()

def _matmul(M: int, N: int, K: int, dtype=dtypes.float16, acc=dtypes.float32, seed=0):
  rng = np.random.default_rng(seed)
  a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  ta, tb = Tensor(a, device="PYTHON").cast(dtype).realize(), Tensor(b, device="PYTHON").cast(dtype).realize()
  # the inputs as the device holds them (rounded to half or bfloat16), multiplied exactly in float64
  ref = ta.float().numpy().astype(np.float64) @ tb.float().numpy().astype(np.float64)
  return ta.matmul(tb, acc_dtype=acc).schedule()[-1], ref

def _run(si, renderer, opts: list[Opt] | None = None, k: Kernel | None = None) -> tuple[np.ndarray, list]:
  p = get_program(si.ast, renderer, opts) if k is None else get_program(si.ast, renderer, k.applied_opts)
  bufs = [si.bufs[i] for i in p.globals]
  for b in bufs: b.allocate()
  CompiledRunner(p)(bufs)
  return si.bufs[0].numpy(), p.uops

@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16])
@pytest.mark.parametrize("shape,opts", [
  ((16, 8, 16), [Opt(OptOps.TC, 0, 0)]),                                            # one WMMA, one warp
  ((64, 32, 48), [Opt(OptOps.TC, 0, 0)]),                                           # a grid of warps, a loop over K
  ((64, 32, 64), [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UNROLL, 0, 2)]),   # 2 x 2 WMMAs a thread
  ((30, 10, 20), [Opt(OptOps.TC, 0, 2)]),                                           # every axis padded
  ((48, 24, 40), [Opt(OptOps.TC, 0, 2), Opt(OptOps.UPCAST, 1, 3)]),                 # K padded from 40 to 48
])
def test_wmma_matches_numpy(emulated, dtype, shape, opts):
  si, ref = _matmul(*shape, dtype=dtype)
  out, uops = _run(si, emulated, opts)
  assert sum(u.op.name == "WMMA" for u in uops) >= 1
  np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=1e-5, atol=1e-4)

def test_half_output(emulated):
  "A half matmul (float accumulation, cast back to half after the reduce) through TC."
  si, ref = _matmul(32, 16, 32, acc=None)
  out, _ = _run(si, emulated, [Opt(OptOps.TC, 0, 0)])
  np.testing.assert_allclose(out.reshape(ref.shape).astype(np.float64), ref, rtol=2e-3, atol=2e-3)

def test_heuristic_tries_tc_first(emulated):
  si, ref = _matmul(40, 24, 40, seed=1)
  k = hand_coded_optimizations(Kernel(si.ast, emulated))
  assert k.applied_opts == [Opt(OptOps.TC, 0, 2)] and k.tensor_core is cuda_tensor_cores[0]
  out, _ = _run(si, emulated, k=k)
  np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=1e-5, atol=1e-4)

def test_beam_can_choose_tc(emulated):
  si, _ = _matmul(32, 16, 32)
  tcs = [a for a in actions if a.op is OptOps.TC]
  assert tcs and any(_applies(si.ast, emulated, [a]) for a in tcs)

def _applies(ast, renderer, opts) -> bool:
  k = Kernel(ast, renderer)
  try:
    for o in opts: k.apply_opt(o)
  except KernelOptError: return False
  return True

def test_no_tensor_cores_without_emulate_cuda(monkeypatch):
  monkeypatch.delenv("EMULATE_CUDA", raising=False)
  getenv.cache_clear()
  assert not _applies(_matmul(32, 16, 32)[0].ast, PythonRenderer(), [Opt(OptOps.TC, 0, 0)])

def test_where_tc_does_not_apply(emulated):
  si, _ = _matmul(32, 16, 32)
  f32, _ = _matmul(32, 16, 32, dtype=dtypes.float32)
  odd, _ = _matmul(30, 16, 32)
  assert not _applies(f32.ast, emulated, [Opt(OptOps.TC, 0, 0)])                    # float32 inputs: none fits
  assert not _applies(odd.ast, emulated, [Opt(OptOps.TC, 0, 0)])                    # 30 rows need padding, amt 0 forbids it
  assert _applies(odd.ast, emulated, [Opt(OptOps.TC, 0, 2)])
  assert not _applies(si.ast, emulated, [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.TC, 0, 0)])   # TC comes first
  assert not _applies(si.ast, emulated, [Opt(OptOps.TC, 1, 0)])                     # one choice of axes only
  for after in (Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.GROUP, 0, 2)):   # would break the warp's layout
    assert not _applies(si.ast, emulated, [Opt(OptOps.TC, 0, 0), after])

def test_tc_axes_in_a_batched_matmul(emulated):
  "A batch axis moves along both inputs: it is no n or m; the choices are (n, m, k) products."
  a, b = Tensor.empty(4, 32, 16, dtype=dtypes.float16, device="PYTHON"), Tensor.empty(4, 16, 8, dtype=dtypes.float16, device="PYTHON")
  k = Kernel(a.matmul(b, acc_dtype=dtypes.float32).schedule()[-1].ast, emulated)
  assert len(tc_axes(k, cuda_tensor_cores[0])) == 1

def test_cuda_layout_is_ptxs():
  """The CUDA tensor core's layout against the PTX ISA's formulas for mma.m16n8k16 (groupID = lane >> 2,
  threadID_in_group = lane % 4), written here independently of `TensorCore.position`."""
  tc = cuda_tensor_cores[0]
  for lane in range(32):
    g, t = lane >> 2, lane % 4
    for i in range(8): assert tc.position(0, lane, i) == {"m": g + 8 * ((i >> 1) & 1), "k": 2 * t + (i & 1) + 8 * (i >> 2)}
    for i in range(4): assert tc.position(1, lane, i) == {"k": 2 * t + (i & 1) + 8 * (i >> 1), "n": g}
    for i in range(4): assert tc.position(2, lane, i) == {"m": g + 8 * (i >> 1), "n": 2 * t + (i & 1)}

def test_wmma_needs_whole_warps():
  "The emulator refuses a WMMA in workgroups that aren't whole warps: on a GPU the warp would hold other threads."
  with pytest.raises(RuntimeError, match="multiple of 32"):
    PythonProgram("k", b"")._wmma(cuda_tensor_cores[0], [np.zeros((16, 8)), np.zeros((16, 4)), np.zeros(4)], np.arange(16), 16)

def test_cuda_renderer_offers_tensor_cores_from_sm_80():
  assert CUDARenderer("sm_80").tensor_cores and CUDARenderer("sm_90").tensor_cores and not CUDARenderer("sm_75").tensor_cores

def test_unrolling_the_last_reduce_axis_keeps_the_locals():
  "A whole last reduce axis unrolled after a LOCAL: the local axis stays local (it once turned into a global one)."
  k = Kernel((Tensor.empty(8, 4) @ Tensor.empty(4, 8)).schedule()[-1].ast, PythonRenderer())
  for o in (Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.UNROLL, 0, 0)): k.apply_opt(o)
  assert k.axis_kinds() == ["global", "global", "local", "unroll"] and k.local_dims == 1

def test_op_estimate_counts_the_wmmas(emulated):
  "DEBUG=2's GFLOPS: each WMMA is 2*M*N*K operations, shared by the warp's threads (padding counts: it is computed)."
  for (M, N, K), padded in (((64, 32, 48), (64, 32, 48)), ((30, 10, 20), (32, 16, 32))):
    si, _ = _matmul(M, N, K)
    assert get_program(si.ast, emulated, [Opt(OptOps.TC, 0, 2)]).op_estimate == 2 * np.prod(padded)

@pytest.mark.parametrize("seed", range(12))
def test_random_opts_after_tc(emulated, seed):
  "TC, then random UPCASTs, LOCALs and UNROLLs that apply (more tiles per thread, more warps, along K too), on several shapes."
  import random
  rng = random.Random(seed)
  shape = rng.choice([(32, 16, 48), (48, 24, 64), (30, 10, 20), (64, 40, 32)])
  si, ref = _matmul(*shape, dtype=rng.choice([dtypes.float16, dtypes.bfloat16]), seed=seed)
  k = Kernel(si.ast, emulated)
  k.apply_opt(Opt(OptOps.TC, 0, 2))
  for _ in range(rng.randint(1, 3)):
    opt = rng.choice([Opt(OptOps.UPCAST, rng.randrange(k.first_reduce), rng.choice([2, 3, 4])), Opt(OptOps.UNROLL, 0, rng.choice([0, 2, 3])),
                      Opt(OptOps.LOCAL, rng.randrange(k.first_reduce), rng.choice([2, 4]))])
    try: k.apply_opt(opt)
    except KernelOptError: pass
  out, _ = _run(si, emulated, k=k)
  np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=1e-5, atol=1e-4, err_msg=str(k.applied_opts))

def test_more_warps_per_workgroup(emulated):
  "A LOCAL after TC adds warps: its thread axis goes outside the lanes, which the emulator then finds in every warp."
  si, ref = _matmul(64, 32, 32)
  out, uops = _run(si, emulated, [Opt(OptOps.TC, 0, 0), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.LOCAL, 1, 2)])
  assert np.prod([u.arg[1] for u in uops if u.op.name == "SPECIAL" and u.arg[0][0] == "l"]) == 128   # 4 warps
  np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=1e-5, atol=1e-4)

def test_bounds_checks_cover_the_fragments(emulated):
  "The fragments' loads are ordinary loads: on a B too small for the kernel, the emulator names the bad read."
  from tinylit.device import Buffer
  si, _ = _matmul(32, 16, 32)
  p = get_program(si.ast, emulated, [Opt(OptOps.TC, 0, 0)])
  sizes = {0: (32 * 16, dtypes.float32), 1: (32 * 32, dtypes.float16), 2: (32 * 16 - 8, dtypes.float16)}   # B 8 short
  bufs = [Buffer("PYTHON", *sizes[i]).allocate() for i in p.globals]
  with pytest.raises(IndexError, match="read out of bounds"): CompiledRunner(p)(bufs)

def test_beam_cache_key_knows_the_tensor_cores(emulated, monkeypatch):
  "BEAM's winner for a device with tensor cores (it may hold TC) is not replayed where there are none."
  from tinylit.search import _cache_path
  si, _ = _matmul(32, 16, 32)
  monkeypatch.delenv("EMULATE_CUDA")
  getenv.cache_clear()
  assert _cache_path(Kernel(si.ast, emulated), 2) != _cache_path(Kernel(si.ast, PythonRenderer()), 2)
