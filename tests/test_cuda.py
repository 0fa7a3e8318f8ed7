"""The op suite once more, and CUDA without a GPU.

tests/test_ops.py runs again in a child process on CPU and PYTHON with NOOPT=1: the op suite must pass without opts
as with them. The kernels it compiles are captured (tests/cuda_capture.py), rendered for CUDA (with the hand-coded
GPU opts, with none, and with the GPU rules forced onto small kernels too) and compiled by NVRTC for sm_80 (A100) and
sm_90 (H100). NVRTC needs no GPU, so a renderer change that writes CUDA C the compiler refuses fails here, in CI.
On a machine with a GPU, the device-parametrized tests (tests/devices.py) run the whole suite on CUDA besides."""
import json, os, re, subprocess, sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _nvrtc_missing() -> str | None:
  try: from cuda.bindings import nvrtc  # noqa: F401
  except ImportError as e: return f"NVRTC (cuda-bindings) is not installed: {e}"
  from tinylit.runtime.ops_cuda import CUDACompiler
  try: CUDACompiler("sm_80").compile('extern "C" __global__ void probe(float* x) { x[0] = 1.0f; }')
  except Exception as e: return f"NVRTC can't compile here: {e}"
  return None


@pytest.fixture(scope="module")
def noopt_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
  "tests/test_ops.py on CPU and PYTHON with NOOPT=1, capturing its kernels' CUDA sources."
  out = tmp_path_factory.mktemp("cuda") / "sources.json"
  env = dict(os.environ, NOOPT="1", CUDA_CAPTURE=str(out), TEST_DEVICES="CPU,PYTHON",
             PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
  proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "cuda_capture", "-p", "no:cacheprovider", "-p", "no:xdist",
                         "-k", "CPU or PYTHON", str(TESTS / "test_ops.py")], env=env, cwd=TESTS, capture_output=True, text=True,
                        timeout=1200)
  return proc, out


def test_op_suite_passes_with_noopt(noopt_run):
  proc, _ = noopt_run
  assert proc.returncode == 0, f"the op suite failed with NOOPT=1:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
  assert " passed" in proc.stdout


@pytest.fixture(scope="module")
def op_suite_sources(noopt_run) -> list[dict]:
  if (why := _nvrtc_missing()) is not None: pytest.skip(why)
  proc, out = noopt_run
  if not out.exists(): pytest.fail(f"the op suite run captured nothing:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
  return json.loads(out.read_text())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_op_suite_compiles_for_cuda(op_suite_sources, arch):
  from tinylit.runtime.ops_cuda import CUDACompiler
  compiler = CUDACompiler(arch)
  srcs = {k["src"] for k in op_suite_sources}
  assert len(srcs) > 300, f"only {len(srcs)} kernels captured from the op suite"
  # one translation unit for all (NVRTC's start-up cost is paid once): each kernel renamed to a unique name
  unit = "\n".join(re.sub(r"\bvoid (\w+)\(", lambda m, i=i: f"void {m.group(1)}_k{i}(", src, count=1) for i, src in enumerate(sorted(srcs)))
  try: compiler.compile(unit)
  except RuntimeError:
    failed = []
    for src in sorted(srcs):
      try: compiler.compile(src)
      except RuntimeError as e: failed.append(str(e))
    pytest.fail(f"{len(failed)} of {len(srcs)} CUDA kernels don't compile for {arch}; the first:\n\n" + "\n\n".join(failed[:3]))


def test_compile_error_shows_log_and_source():
  if (why := _nvrtc_missing()) is not None: pytest.skip(why)
  from tinylit.runtime.ops_cuda import CUDACompiler
  with pytest.raises(RuntimeError) as e: CUDACompiler("sm_90").compile('extern "C" __global__ void k(float* x) { x[0] = y; }')
  assert 'identifier "y" is undefined' in str(e.value) and "--- source ---" in str(e.value)


def test_exp_keeps_denormals_in_ptx():
  "exp renders as exp2f, which NVRTC compiles to ex2.approx.f32 (denormals kept), never the flushing .ftz form."
  if (why := _nvrtc_missing()) is not None: pytest.skip(why)
  from tinylit import Tensor
  from tinylit.realize import get_program
  from tinylit.renderer import CUDARenderer
  from tinylit.runtime.ops_cuda import CUDACompiler
  ptx = CUDACompiler("sm_90").ptx(get_program(Tensor.empty(64).exp().schedule()[-1].ast, CUDARenderer()).src)
  assert "ex2.approx.f32" in ptx and ".ftz" not in ptx and "fma." not in ptx


def test_no_gpu_gives_a_clear_error():
  "Where CUDA can't open (no driver, no GPU, no package), the error says what is missing."
  from devices import unavailable
  why = unavailable("CUDA")
  if why is None: pytest.skip("this machine has a CUDA GPU")
  assert any(w in why for w in ("needs an NVIDIA GPU", "needs the cuda-bindings", "finds no GPU")), why
  assert "Traceback" not in why


# matmuls of the op suite's kinds (plain, odd sizes that need padding, batched, x @ x.T), big enough for a tensor core
TC_MATMULS = [((16, 16), (16, 8)), ((64, 48), (48, 32)), ((30, 20), (20, 10)), ((2, 32, 16), (16, 24)), ((3, 40, 24), (3, 24, 16))]

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_matmuls_compile_with_tensor_cores(arch):
  """Half and bfloat16 matmuls (float accumulation; stored as float, or cast back), with the opts a GPU gets: TC
  first (chapter 6d), padded where the sizes need it, a bigger tile of WMMAs per thread, more warps per workgroup. Each compiles to
  mma.sync, which runs only on a GPU; the same kernels run on the PYTHON device's emulation in tests/test_tc.py."""
  if (why := _nvrtc_missing()) is not None: pytest.skip(why)
  from tinylit import Tensor, dtypes
  from tinylit.heuristic import hand_coded_optimizations
  from tinylit.kernel import Kernel, Opt, OptOps
  from tinylit.realize import get_program
  from tinylit.renderer import CUDARenderer, ProgramSpec
  from tinylit.runtime.ops_cuda import CUDACompiler
  srcs = []
  for dt in (dtypes.float16, dtypes.bfloat16):
    asts = []
    for (sa, sb), acc in [(shapes, acc) for shapes in TC_MATMULS for acc in (dtypes.float32, None)]:
      asts.append(ast := Tensor.empty(*sa, dtype=dt).matmul(Tensor.empty(*sb, dtype=dt), acc_dtype=acc).schedule()[-1].ast)
      k = hand_coded_optimizations(Kernel(ast, CUDARenderer(arch)))
      assert k.applied_opts == [Opt(OptOps.TC, 0, 2)], (dt, sa, sb, k.applied_opts)
      srcs.append(ProgramSpec.from_uops(k.name, k.linearize(), k.opts, k.applied_opts).src)
    # three WMMAs a thread: a chain of them along K (64 x 48 x 32), and side by side for three batches
    srcs.append(get_program(asts[2], CUDARenderer(arch), [Opt(OptOps.TC, 0, 2), Opt(OptOps.UNROLL, 0, 3)]).src)
    srcs.append(get_program(asts[-1], CUDARenderer(arch), [Opt(OptOps.TC, 0, 2), Opt(OptOps.UPCAST, 0, 3)]).src)
    # four warps a workgroup (a LOCAL after TC)
    srcs.append(get_program(asts[2], CUDARenderer(arch), [Opt(OptOps.TC, 0, 2), Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.LOCAL, 1, 2)]).src)
  compiler = CUDACompiler(arch)
  for src in srcs: assert "mma.sync.aligned.m16n8k16.row.col.f32" in compiler.ptx(src), src
