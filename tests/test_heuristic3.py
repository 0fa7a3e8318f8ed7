"""Regression tests for issue 17's last slow kernels of a GPT step (chapter 6b's `_reduce_plan`, chapter 6bb's `_reread_block`).

- A weight's gradient with many inputs fused into its reduce loop (a layer norm's backward: ten inputs, a dozen ALU
  ops that move along the vector's axis but not along the tile's) took 8 rows x 2 vectors: it takes 16 rows of one
  vector now (the fused work serves 16 rows), and, since its inner output loop re-reads 1.2 MB of inputs at every
  step, BLOCK (the reduce in blocks whose inputs fit the L2).
- The token embedding's gradient, `G.T @ one_hot` for a vocabulary of 65, put all 128 columns in 16 lanes x 8 copies
  and left only the 65 rows, which don't split across two cores: it ran on one. Plans that leave an axis for THREAD
  come first now.
- A plain matmul keeps its plan (8 rows x 2 vectors, SWAP).
- The register tile is bounded by the CPU's vector registers (chapter 8a's `vector_registers`, chapter 6bb's
  `_fits`): 8 rows x 2 vectors where its 16 sums fit (32 registers); with 16 (AVX2), whose 8 x 2 block would keep 3
  sums in memory and wait on them at every step, 4 rows x 2 vectors, and the fused gradient 8 rows of one vector
  instead of 16; with 8 registers, 2 rows x 2 vectors.
- A float64 kernel took 16-lane vectors, two 512-bit registers each (the matmul's 8 x 2 block: 32 registers of
  running sums, which spill): vectors now fit one register, 8 doubles.
The device tests check the results of such kernels against numpy, with the opts the rules choose on each device.
"""
import numpy as np
import pytest
from devices import DEVICES

from test_heuristic2 import planned  # the CPU rules' kernel for a tensor's last schedule item

from tinylit import Tensor
from tinylit.device import Device
from tinylit.helpers import Context
from tinylit.heuristic import hand_coded_optimizations
from tinylit.kernel import Kernel, Opt, OptOps
from tinylit.renderer import ClangRenderer


def fused_inputs(device: str = "CPU", tokens: int = 2048, width: int = 128, outs: int = 512):
  "Ten (tokens, width) inputs and G (tokens, outs), as numpy arrays and as tensors on `device`."
  rng = np.random.default_rng(0)
  xs = [rng.standard_normal((tokens, width)).astype(np.float32) for _ in range(10)]
  g = rng.standard_normal((tokens, outs)).astype(np.float32)
  return (xs, g), ([Tensor(x, device=device).realize() for x in xs], Tensor(g, device=device).realize())


def fused(xs):
  "A sum of products of the ten inputs: elementwise, so the scheduler fuses it into the matmul's reduce loop."
  return xs[0] + xs[1] * xs[2] + xs[3] * xs[4] + xs[5] * xs[6] + xs[7] * xs[8] + xs[9]


def embedding_inputs(device: str = "CPU", tokens: int = 2048, width: int = 128, vocab: int = 65):
  rng = np.random.default_rng(1)
  labels = rng.integers(0, vocab, tokens).astype(np.int32)
  g = rng.standard_normal((tokens, width)).astype(np.float32)
  tensors = (Tensor(labels, device=device).realize(), Tensor(g, device=device).realize(),
             Tensor(np.arange(vocab, dtype=np.int32), device=device).realize())
  return (labels, g), tensors


def one_hot_grad(labels: Tensor, g: Tensor, vocab: Tensor) -> Tensor:
  "The embedding's gradient as the GPT step computes it: G.T @ one_hot(labels), shape (width, vocab)."
  one_hot = (labels.reshape(-1, 1) == vocab.reshape(1, -1)).float()
  return g.T @ one_hot


def test_fused_weight_gradient_takes_16_rows_and_blocks():
  """E.T @ G with ten inputs fused into E: 16 lanes x 16 rows, the reduce in blocks, threads. (G has 32 columns: read
  by 64 or more, E is computed into a buffer of its own first, chapter 4's `costly`.)"""
  renderer = Device["CPU"].renderer
  if max(renderer.vector_widths) < 16 or not renderer.l2_size: pytest.skip("needs 16-lane vectors and a known L2 size")
  _, (xs, g) = fused_inputs(outs=32)
  k = planned(fused(xs).T @ g)
  assert k.applied_opts[:2] == [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.UPCAST, 1, 16)], k.applied_opts
  assert any(o.op is OptOps.BLOCK for o in k.applied_opts), k.applied_opts


def test_few_fused_inputs_need_no_block():
  "With one product fused in (three inputs), one pass over what the inner loop re-reads fits the L2: no BLOCK."
  _, (xs, g) = fused_inputs()
  k = planned((xs[0] * xs[1] + xs[2]).T @ g)
  assert not any(o.op is OptOps.BLOCK for o in k.applied_opts), k.applied_opts


def test_plain_matmul_keeps_its_plan():
  "X.T @ G and A @ B: 8 rows x 2 vectors, the panel loop outside, threads (the 16-row tile costs more there)."
  renderer = Device["CPU"].renderer
  if max(renderer.vector_widths) < 16: pytest.skip("needs 16-lane vectors")
  _, (xs, g) = fused_inputs()
  a = Tensor(np.ones((512, 512), np.float32)).realize() + 0
  for t in (xs[0].T @ g, a.realize() @ a):
    opts = planned(t).applied_opts
    assert Opt(OptOps.UPCAST, 0, 8) in opts and Opt(OptOps.UPCAST, 1, 2) in opts, opts


def test_embedding_gradient_leaves_an_axis_for_threads():
  "G.T @ one_hot for a vocabulary of 65: fewer copies along the 128 columns, so that two threads can split them."
  renderer = Device["CPU"].renderer
  if not renderer.has_threads or renderer.threads < 2: pytest.skip("the CPU device runs one thread here")
  _, tensors = embedding_inputs()
  k = planned(one_hot_grad(*tensors))
  assert any(o.op is OptOps.THREAD for o in k.applied_opts), k.applied_opts


@pytest.mark.parametrize("device", DEVICES)
def test_fused_weight_gradient_computes_right(device):
  "E.T @ G with the rules' opts (on the CPU: 16 rows, BLOCK, threads), against numpy."
  tokens = 256 if device == "PYTHON" else 2048   # the PYTHON device interprets every op: a smaller reduce
  (xs_np, g_np), (xs, g) = fused_inputs(device, tokens=tokens)
  got = (fused(xs).T @ g).numpy()
  want = fused(xs_np).T @ g_np
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-3 * np.sqrt(tokens))


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_gradient_computes_right(device):
  "G.T @ one_hot(labels) for a vocabulary of 65, with the rules' opts (threads on the CPU), against numpy."
  tokens = 256 if device == "PYTHON" else 2048
  (labels, g_np), tensors = embedding_inputs(device, tokens=tokens)
  want = g_np.T @ np.eye(65, dtype=np.float32)[labels]
  np.testing.assert_allclose(one_hot_grad(*tensors).numpy(), want, rtol=1e-4, atol=1e-3)


def test_float64_vectors_fit_one_register():
  "A float64 matmul: 8-lane vectors where a register holds 16 floats (16 doubles would be two registers each)."
  renderer = Device["CPU"].renderer
  if max(renderer.vector_widths) < 16: pytest.skip("needs 16-float vectors")
  a = Tensor(np.random.default_rng(2).standard_normal((256, 256))).realize()
  assert a.dtype.itemsize == 8
  k = planned(a @ a)
  assert k.applied_opts[0] == Opt(OptOps.UPCAST, 1, 8), k.applied_opts
  assert planned(a + 1).applied_opts[0] == Opt(OptOps.UPCAST, 0, 8)
  f32 = Tensor(np.ones((256, 256), np.float32)).realize()
  assert planned(f32 @ f32).applied_opts[0] == Opt(OptOps.UPCAST, 1, 16)   # floats keep the full width


@pytest.mark.parametrize("device", DEVICES)
def test_float64_kernels_compute_right(device):
  "float64 matmul, column sum and elementwise kernels with the rules' opts, against numpy."
  rng = np.random.default_rng(3)
  a_np, b_np = rng.standard_normal((96, 64)), rng.standard_normal((64, 80))
  try: a, b = Tensor(a_np, device=device).realize(), Tensor(b_np, device=device).realize()
  except RuntimeError as e: pytest.skip(f"{device} has no float64 here: {e}")
  np.testing.assert_allclose((a @ b).numpy(), a_np @ b_np, rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(a.sum(0).numpy(), a_np.sum(0), rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose((a * 2 + 1).numpy(), a_np * 2 + 1, rtol=1e-12)


def _upcasts(t: Tensor, width: int, registers: int) -> list[Opt]:
  """The UPCASTs of the rules' plan for `t`'s last kernel on a C renderer with these vectors and vector registers
  (scheduled unpacked: this CPU's packing rule would cut B into panels of its own vectors' width)."""
  with Context(PACK=0): k = Kernel(t.schedule()[-1].ast, ClangRenderer(width, 1 << 20, registers))
  return [o for o in hand_coded_optimizations(k).applied_opts if o.op is OptOps.UPCAST]


@pytest.mark.parametrize("width, registers, tile", [
  (16, 32, [(0, 8), (1, 2)]), (8, 32, [(0, 8), (1, 2)]),   # AVX-512, and its 8-float halves (Zen 4): the sums fit
  (8, 16, [(0, 4), (1, 2)]),   # AVX2: 8 x 2 wants 19 registers; 4 x 2 takes 11 (6 x 2 would fit: 6 doesn't divide 512)
  (4, 32, [(0, 8), (1, 2)]),   # 64-bit ARM
  (4, 8, [(0, 2), (1, 2)]),    # 8 registers (32-bit x86): 2 x 2 takes 7
])
def test_register_tile_bounded_by_the_registers(width, registers, tile):
  ups = _upcasts(Tensor.empty(512, 512) @ Tensor.empty(512, 512), width, registers)
  assert ups == [Opt(OptOps.UPCAST, 1, width)] + [Opt(OptOps.UPCAST, a, n) for a, n in tile], ups


def test_fused_weight_gradient_takes_the_rows_the_registers_hold():
  "16 rows of one vector where 32 registers hold their sums; with 16, whose 16 rows would want 18, 8 rows."
  _, (xs, g) = fused_inputs(outs=32)
  assert _upcasts(fused(xs).T @ g, 8, 32)[:2] == [Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 16)]
  assert _upcasts(fused(xs).T @ g, 8, 16)[:2] == [Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 8)]
