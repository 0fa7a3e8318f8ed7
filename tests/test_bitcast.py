"""Tensor.bitcast between dtypes of one item size is a lazy elementwise op (Ops.BITCAST) that a kernel computes, on
every device: its bits against numpy's `.view`, fused with other ops, special float bit patterns, and under TinyJit
(where the old host-side bitcast silently replayed the capture call's bytes). A bitcast that changes the item size
still runs on the host and refuses inside a TinyJit capture."""
import numpy as np
import pytest

from tinylit import Tensor, TinyJit, dtypes
from tinylit.jit import JitError
from tinylit.mixin import ArgumentError
from tinylit.ops import Ops
from tinylit.dtype import bf16_to_float
from devices import DEVICES, skip_without_half

# (from, to), each way: the same item size
PAIRS = [(dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.float16, dtypes.int16),
         (dtypes.float16, dtypes.uint16), (dtypes.bfloat16, dtypes.uint16), (dtypes.float64, dtypes.int64),
         (dtypes.float16, dtypes.bfloat16)]
PAIRS += [(b, a) for a, b in PAIRS]
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _special_bits(dt) -> np.ndarray:
  "Bit patterns of `dt`'s size: 0, -0.0, ±1, ±inf, quiet NaNs of both signs, the smallest denormal, the largest finite, and random words."
  n = dt.itemsize * 8
  exp_bits = {2: 5 if dt != dtypes.bfloat16 else 8, 4: 8, 8: 11}[dt.itemsize]
  sign, mant = 1 << (n - 1), n - 1 - exp_bits
  inf, one = ((1 << exp_bits) - 1) << mant, ((1 << (exp_bits - 1)) - 1) << mant
  quiet = inf | (1 << (mant - 1))
  special = [0, sign, one, sign | one, inf, sign | inf, quiet, sign | quiet, quiet | 1, 1, inf - 1, sign | (inf - 1)]
  rng = np.random.default_rng(dt.itemsize)
  words = rng.integers(0, 2 ** min(n, 63), size=20, dtype=np.uint64) * (2 if n == 64 else 1)
  return np.concatenate([np.array(special, np.uint64), words]).astype(BITS[dt.itemsize])


def _tensor_of_bits(bits: np.ndarray, dt, device: str) -> Tensor:
  "A tensor of `dt` holding exactly these bits (a bfloat16 tensor is built from the float32 values its bits are)."
  if dt == dtypes.bfloat16: return Tensor(bf16_to_float(bits), device=device, dtype=dt)
  return Tensor(bits.view(dt.np_storage), device=device)


def _bits_of(t: Tensor) -> np.ndarray:
  "The bits a realized tensor holds, as unsigned ints."
  if t.dtype == dtypes.bfloat16: return (np.ascontiguousarray(t.numpy(), np.float32).view(np.uint32) >> 16).astype(np.uint16)
  return np.ascontiguousarray(t.numpy()).view(BITS[t.dtype.itemsize])


def _skip_half(device, *dts):
  if dtypes.float16 in dts: skip_without_half(device)


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{a.name}-{b.name}" for a, b in PAIRS])
@pytest.mark.parametrize("device", DEVICES)
def test_bits_match_numpy_view(device, src, dst):
  _skip_half(device, src, dst)
  bits = _special_bits(src if dtypes.is_float(src) else dst)
  if dtypes.bfloat16 in (src, dst):
    # a bfloat16 NaN with its quiet bit clear (signaling) is quieted wherever a bfloat16 is rounded from a float32 (the
    # constructor, the PYTHON device's store): keep to quiet ones
    snan = ((bits & 0x7f80) == 0x7f80) & ((bits & 0x7f) != 0) & ((bits & 0x40) == 0)
    bits = np.where(snan, bits | 0x40, bits).astype(np.uint16)
  out = _tensor_of_bits(bits, src, device).bitcast(dst)
  assert out.dtype == dst and out.shape == bits.shape
  np.testing.assert_array_equal(_bits_of(out), bits)
  if dst != dtypes.bfloat16 and not dtypes.is_float(dst):   # ints: the values numpy's view gives
    np.testing.assert_array_equal(out.numpy(), bits.view(dst.np))


@pytest.mark.parametrize("device", DEVICES)
def test_is_a_kernel_op(device):
  "The bitcast is part of the kernel that computes its input: one kernel, holding a BITCAST, nothing read on the host."
  x = Tensor(np.linspace(-3, 3, 64, dtype=np.float32), device=device)
  kernels = [si.ast for si in ((x * 2).bitcast(dtypes.int32) + 1).schedule() if si.ast.op is Ops.SINK]
  assert len(kernels) == 1 and any(u.op is Ops.BITCAST for u in kernels[0].toposort)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_with_other_ops(device):
  x = np.random.default_rng(0).standard_normal((16, 33)).astype(np.float32)
  t = Tensor(x, device=device)
  with np.errstate(over="ignore"):
    np.testing.assert_array_equal(((t * 2).bitcast(dtypes.int32) + 1).numpy(), (x * 2).view(np.int32) + 1)
    # int bits back to float, math on them, and back again: flipping the sign bit is negation
    flipped = (t.bitcast(dtypes.uint32) ^ 0x80000000).bitcast(dtypes.float32)
    np.testing.assert_array_equal(flipped.numpy(), -x)
    np.testing.assert_array_equal(((t.bitcast(dtypes.int32) >> 23) & 0xff).sum(axis=1).numpy(),
                                  ((x.view(np.int32) >> 23) & 0xff).sum(axis=1))
    # through movement ops: a transposed and a padded view (the border's 0 bits are 0)
    np.testing.assert_array_equal(t.T.bitcast(dtypes.int32).numpy(), np.ascontiguousarray(x.T).view(np.int32))
    np.testing.assert_array_equal(t.pad(((1, 1), (0, 2))).bitcast(dtypes.int32).numpy(),
                                  np.pad(x, ((1, 1), (0, 2))).view(np.int32))


@pytest.mark.parametrize("device", DEVICES)
def test_wide_kernel(device):
  "A long elementwise kernel gets vectorized (upcast) where the device allows: the bitcast works lane by lane."
  x = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
  t = Tensor(x, device=device)
  np.testing.assert_array_equal((t.bitcast(dtypes.uint32) + 3).numpy(), x.view(np.uint32) + np.uint32(3))
  np.testing.assert_array_equal(Tensor(x.view(np.int32), device=device).bitcast(dtypes.float32).numpy() * 1, x)


@pytest.mark.parametrize("device", DEVICES)
def test_of_constants(device):
  "A constant's bits: a kernel computes them (the lazy graph doesn't fold a bitcast)."
  np.testing.assert_array_equal(Tensor.full((3,), -0.0, device=device).bitcast(dtypes.uint32).numpy(), [0x80000000] * 3)
  np.testing.assert_array_equal(Tensor.full((2,), 0x7f800000, dtype=dtypes.int32, device=device).bitcast(dtypes.float32).numpy(),
                                [np.inf, np.inf])


@pytest.mark.parametrize("device", DEVICES)
def test_tinyjit_reads_fresh_inputs(device):
  "Each of 5 calls bitcasts its own input; the old host-side bitcast replayed the capture call's bytes."
  @TinyJit
  def f(a: Tensor) -> Tensor: return (a.bitcast(dtypes.int32) + 1).realize()
  rng = np.random.default_rng(2)
  for _ in range(5):
    x = rng.standard_normal(16).astype(np.float32)
    np.testing.assert_array_equal(f(Tensor(x, device=device)).numpy(), x.view(np.int32) + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_tinyjit_refuses_an_item_size_change(device):
  "A bitcast that changes the item size runs on the host: under capture it would freeze its bytes, so it refuses."
  @TinyJit
  def f(a: Tensor) -> Tensor: return a.bitcast(dtypes.uint8).realize()
  x = np.arange(4, dtype=np.float32)
  np.testing.assert_array_equal(f(Tensor(x, device=device)).numpy(), x.view(np.uint8))   # the first call only runs
  with pytest.raises(JitError, match="item size"): f(Tensor(x + 1, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_item_size_change_outside_jit(device):
  x = np.array([[1.0, -2.0], [0.5, np.inf]], np.float32)
  np.testing.assert_array_equal(Tensor(x, device=device).bitcast(dtypes.uint16).numpy(), x.view(np.uint16))
  with pytest.raises(ArgumentError, match="last axis"): Tensor(np.ones(3, np.uint8), device=device).bitcast(dtypes.int16)


def test_not_differentiable():
  with pytest.raises(ArgumentError, match="backprop"): Tensor([1.0, 2.0], requires_grad=True).bitcast(dtypes.int32)


def _bitcast_sources(renderer) -> list[str]:
  "Each same-size bitcast, rendered by `renderer` as a kernel that loads, bitcasts and stores."
  from tinylit.realize import get_program
  srcs = []
  for src, dst in PAIRS:
    x = Tensor.empty(8, dtype=src, device="CPU").bitcast(dst)
    ast = next(si.ast for si in x.schedule() if si.ast.op is Ops.SINK)
    srcs.append(get_program(ast, renderer, []).src)
  return srcs


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_source_compiles(arch):
  """NVRTC (no GPU needed) compiles the CUDA renderer's bitcasts: its intrinsics, with half and bfloat16 too, and a
  fused bitcast with the GPU opts (float4 loads split into lanes)."""
  from test_cuda import _nvrtc_missing
  if (why := _nvrtc_missing()) is not None: pytest.skip(why)
  from tinylit.heuristic import _gpu_optimizations
  from tinylit.kernel import Kernel
  from tinylit.renderer import CUDARenderer, ProgramSpec
  from tinylit.runtime.ops_cuda import CUDACompiler
  srcs = _bitcast_sources(CUDARenderer())
  x = Tensor.empty(64, 64, device="CPU")
  ast = next(si.ast for si in ((x * 2).bitcast(dtypes.int32) + 1).schedule() if si.ast.op is Ops.SINK)
  k = _gpu_optimizations(Kernel(ast, CUDARenderer()))
  srcs.append(ProgramSpec.from_uops(k.name, k.linearize(), k.opts, k.applied_opts).src)
  assert "float4" in srcs[-1] and "__float_as_int" in srcs[-1]
  for src in srcs: CUDACompiler(arch).compile(src)


def test_metal_source():
  "Metal can't compile here; its bitcast is `as_type<T>`, and between ints of one size a cast."
  from tinylit.renderer import MetalRenderer
  for (a, b), src in zip(PAIRS, _bitcast_sources(MetalRenderer())):
    floats = {a, b} & {dtypes.float16, dtypes.float32, dtypes.float64}   # a bfloat16 is held as its bits, a ushort
    assert ("as_type<" in src) == bool(floats), (a, b, src)
