"""The CPU's vector width comes from the machine (issue 17, chapter 8a), and any width the heuristic is given computes
the same as numpy (chapter 6b).

`cpu_vector_width` reads what the compiler predefines for `-march=native` (AVX-512: 16 floats, also on AMD Zen 4,
which runs 512-bit ops in two halves; AVX: 8; SSE2 or NEON: 4); the CPU device offers the heuristic no wider vector. The
device tests run the heuristic's kernels with the device's own width on lengths that no width divides, or only some
do, and with a forced width of 8 and of 16 (where the device's renderer writes vectors that wide). Last, the FMA
kernel that measures the CPU's peak (chapter 8a, benchmarks/bench.py) is written in the CPU's own vector type.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor
from tinylit.device import Device
from tinylit.heuristic import hand_coded_optimizations
from tinylit.kernel import Kernel
from tinylit.realize import CompiledRunner, get_program, run_schedule
from tinylit.runtime.ops_cpu import FMA_CHAINS, native_macros, fma_peak, fma_source, native_vector_width, vector_bits, vector_registers
from tinylit.schedule import create_schedule

AVX512 = {"__AVX512F__", "__AVX2__", "__AVX__", "__SSE2__"}
AVX2 = {"__AVX2__", "__AVX__", "__SSE2__"}


@pytest.mark.parametrize("macros, bits, width", [
  (AVX512, 512, 16),   # Zen 4 (each 512-bit op in two halves), Zen 5, Ice Lake, Sapphire Rapids
  (AVX2, 256, 8),      # Zen 3, Haswell
  ({"__SSE2__"}, 128, 4),
  ({"__ARM_NEON"}, 128, 4),
  (set(), 0, None),
])
def test_width_from_compiler_macros(macros, bits, width):
  assert vector_bits(macros) == bits
  assert native_vector_width(macros) == width


@pytest.mark.parametrize("macros, width, registers", [
  (AVX512, 16, 32), (AVX512, 8, 32),   # zmm0-31, and with AVX-512VL ymm0-31 (CPU_VECTOR_WIDTH=8 there)
  (AVX2, 8, 16), (AVX2, 4, 16),        # ymm0-15 / xmm0-15
  (AVX2, 16, 32),                      # CPU_VECTOR_WIDTH=16 without AVX-512: planned as the AVX-512 CPU it pins
  ({"__ARM_NEON", "__aarch64__"}, 4, 32), ({"__ARM_NEON"}, 4, 16),   # AArch64's v0-31; 32-bit ARM's q0-15
])
def test_registers_from_compiler_macros(macros, width, registers):
  assert vector_registers(macros, width) == registers


def test_cpu_device_offers_no_wider_vector():
  cpu = Device["CPU"]
  assert max(cpu.renderer.vector_widths) == cpu.vector_width
  assert set(cpu.renderer.vector_widths) <= set(type(cpu.renderer).vector_widths)
  assert cpu.renderer.vector_registers == vector_registers(native_macros(), cpu.vector_width)


def _width_in_fresh_process(value: str) -> subprocess.CompletedProcess:
  code = "from tinylit.device import Device; d = Device['CPU']; print(d.vector_width, max(d.renderer.vector_widths))"
  return subprocess.run([sys.executable, "-c", code], env={**os.environ, "CPU_VECTOR_WIDTH": value},
                        capture_output=True, text=True)


def test_cpu_vector_width_env_forces_it():
  assert _width_in_fresh_process("8").stdout.split() == ["8", "8"]
  bad = _width_in_fresh_process("12")
  assert bad.returncode != 0 and "CPU_VECTOR_WIDTH=12" in bad.stderr


def test_cpu_l2_size_env_pins_the_l2():
  "CPU_L2_SIZE sets the L2 the rules fit blocks into, as CPU_VECTOR_WIDTH sets the width (make test pins 1 MiB)."
  code = "from tinylit.device import Device; print(Device['CPU'].renderer.l2_size)"
  for value in ("1048576", "524288"):
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CPU_L2_SIZE": value}, capture_output=True, text=True)
    assert run.stdout.split() == [value], run.stderr


def _data(rng, shape):
  return rng.standard_normal(shape).astype(np.float32)


# (name, inputs' shapes, tinylit function, numpy function): lengths of 1040 (16 x 65), 1032 (8 x 129, not 16), 1031
# (prime); a matmul whose output columns take 8 but not 16, and one with no vector at all
CASES = [
  ("ew 1040", [(1040,), (1040,)], lambda a, b: (a * b + 1).relu() - a, lambda a, b: np.maximum(a * b + 1, 0) - a),
  ("ew 1032", [(1032,), (1032,)], lambda a, b: (a * b + 1).relu() - a, lambda a, b: np.maximum(a * b + 1, 0) - a),
  ("ew 1031", [(1031,), (1031,)], lambda a, b: a * b - a, lambda a, b: a * b - a),
  ("sum rows 24x80", [(24, 80)], lambda a: a.sum(1), lambda a: a.sum(1)),
  ("sum cols 40x48", [(40, 48)], lambda a: a.sum(0), lambda a: a.sum(0)),
  ("matmul 32x40 @ 40x24", [(32, 40), (40, 24)], lambda a, b: a @ b, lambda a, b: a @ b),
  ("matmul 33x37 @ 37x31", [(33, 37), (37, 31)], lambda a, b: a @ b, lambda a, b: a @ b),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("device", DEVICES)
def test_device_width_odd_lengths(device, case):
  "The heuristic's kernels with the device's own vector widths, through realize."
  _, shapes, fn, np_fn = case
  rng = np.random.default_rng(0)
  xs = [_data(rng, s) for s in shapes]
  got = fn(*[Tensor(x, device=device) for x in xs]).numpy()
  np.testing.assert_allclose(got, np_fn(*xs), rtol=1e-4, atol=1e-4)


def _run_with_width(device: str, fn, xs: list[np.ndarray], width: int) -> tuple[np.ndarray, Kernel]:
  "Run the last kernel of fn(*xs) with the heuristic given vectors up to `width` lanes; its output and its Kernel."
  renderer = type(Device[device].renderer)(vector_width=width)
  *before, si = create_schedule([fn(*[Tensor(x, device=device) for x in xs]).lazydata])
  run_schedule(before)
  k = hand_coded_optimizations(Kernel(si.ast, renderer))
  runner = CompiledRunner(get_program(si.ast, renderer, k.applied_opts))
  bufs = [si.bufs[i] for i in runner.p.globals]
  for b in bufs: b.allocate()
  runner(bufs)
  return si.bufs[0].numpy().reshape(-1), k


@pytest.mark.parametrize("width", [8, 16])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("device", DEVICES)
def test_forced_width_matches_numpy(device, case, width):
  "A forced width of 8 or 16 computes what numpy does; where the length takes it, the kernel's vector is that wide."
  if width not in type(Device[device].renderer).vector_widths:
    pytest.skip(f"{device}'s renderer writes no {width}-lane vectors")
  name, shapes, fn, np_fn = case
  rng = np.random.default_rng(1)
  xs = [_data(rng, s) for s in shapes]
  got, k = _run_with_width(device, fn, xs, width)
  np.testing.assert_allclose(got, np_fn(*xs).reshape(-1), rtol=1e-4, atol=1e-4)
  vec = k.vector_axis()
  if name == "ew 1040" and not Device[device].renderer.has_local:
    assert vec is not None and k.full_shape[vec] == width, (k.applied_opts, k.full_shape)
  if vec is not None: assert k.full_shape[vec] <= width, (k.applied_opts, k.full_shape)


@pytest.mark.parametrize("bits, macros, vtype", [(512, AVX512, "__m512"), (256, AVX2 | {"__FMA__"}, "__m256"),
                                                 (128, {"__SSE2__", "__FMA__"}, "__m128"), (128, {"__ARM_NEON"}, "float32x4_t")])
def test_fma_source_uses_the_cpus_own_vectors(bits, macros, vtype):
  src = fma_source(bits, macros)
  assert src.count(f"{vtype} acc") == FMA_CHAINS and src.count("acc0 = ") == 2, src   # declared, then updated once per round


def test_fma_source_refuses_what_the_cpu_lacks():
  assert fma_source(512, AVX2 | {"__FMA__"}) is None
  assert fma_source(256, AVX2) is None   # AVX without FMA (Sandy Bridge)


def test_fma_peak_measures_where_it_can():
  "The widest FMA kernel this CPU has compiles with the CPU device's compiler, runs on every core, and gives a speed."
  widest = vector_bits(native_macros())
  if fma_source(widest) is None: pytest.skip(f"no FMA kernel for this CPU's {widest}-bit vectors")
  gflops = fma_peak(widest, seconds=0.0005, runs=2)
  assert gflops is not None and gflops > 0
