"""BLOCK (chapter 6): a reduce cut into blocks whose loop runs outside the output's loops, the partial sums kept in
the output between blocks (the first block starts from 0, the others add to what the output holds). Checked on every
device against the same kernel with no opts: matmuls with the rules' tile and with other opts around BLOCK, a
batched matmul, a padded reduce, a kernel run twice on the same output buffer; BLOCK refused where the output can't
hold partial sums (a max, an op after the sum, a kernel that reads its output); the rules' choice on the CPU (only a
plain matmul whose B is bigger than the L2 cache; and no SWAP where only its A is) and BEAM's actions.

A random part draws opt sequences with BLOCK among them (OPT_FUZZ_SEED changes the draw)."""
import os, random
import numpy as np
import pytest
from devices import DEVICES
from test_opts import ACTIONS, close, run_kernel
from tinylit import Tensor
from tinylit.device import Device
from tinylit.helpers import Context
from tinylit.heuristic import hand_coded_optimizations
from tinylit.kernel import Kernel, KernelOptError, Opt, OptOps
from tinylit.realize import run_schedule
from tinylit.renderer import ClangRenderer
from tinylit import search

SEED = int(os.getenv("OPT_FUZZ_SEED", "0"))

def _data(seed: int, *shape) -> np.ndarray:
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def _last(t: Tensor):
  "The last schedule item of `t`, the ones before it run."
  *before, si = t.schedule()
  run_schedule(before)
  return si

def _applies(si, device: str, opts: list[Opt]) -> list[Opt]:
  "The opts of `opts` that apply on this device, in order (THREAD needs a CPU, LOCAL a GPU); BLOCK must apply."
  k = Kernel(si.ast, Device[device].renderer)
  for o in opts:
    try: k.apply_opt(o)
    except KernelOptError:
      if o.op is OptOps.BLOCK: raise
  return k.applied_opts

def _check(t: Tensor, device: str, opts: list[Opt]) -> None:
  si = _last(t)
  applied = _applies(si, device, opts)
  assert any(o.op is OptOps.BLOCK for o in applied), applied
  ref, got = run_kernel(si, device, []), run_kernel(si, device, applied)
  assert close(got, ref), f"{device} with {applied}: max difference {np.nanmax(np.abs(got - ref)):.3g}"

MATMUL = lambda d: Tensor(_data(0, 64, 96), device=d) @ Tensor(_data(1, 96, 64), device=d)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opts", [
  [Opt(OptOps.BLOCK, 0, 32)],                                               # plain loops, three blocks
  [Opt(OptOps.BLOCK, 0, 48)],                                               # two blocks
  [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.BLOCK, 0, 16), Opt(OptOps.THREAD, 0, 2)],
  [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.UPCAST, 0, 8), Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.BLOCK, 0, 8),
   Opt(OptOps.THREAD, 0, 2)],                                               # the rules' tile for a big matmul
  [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.BLOCK, 0, 8)],   # unrolled inside each block
  [Opt(OptOps.BLOCK, 0, 24), Opt(OptOps.UNROLL, 0, 4), Opt(OptOps.SWAP, 0, 1)],    # the block's rest unrolled
  [Opt(OptOps.LOCAL, 0, 4), Opt(OptOps.LOCAL, 1, 8), Opt(OptOps.BLOCK, 0, 32)],    # workgroups (GPU devices)
], ids=["plain", "two-blocks", "tile8", "tile8x2", "unroll", "unroll-after", "local"])
def test_blocked_matmul(device, opts):
  _check(MATMUL(device), device, opts)

@pytest.mark.parametrize("device", DEVICES)
def test_blocked_batched_matmul(device):
  t = Tensor(_data(2, 3, 16, 64), device=device) @ Tensor(_data(3, 3, 64, 32), device=device)
  _check(t, device, [Opt(OptOps.UPCAST, 2, 16), Opt(OptOps.BLOCK, 0, 16), Opt(OptOps.THREAD, 0, 3)])

@pytest.mark.parametrize("device", DEVICES)
def test_blocked_padded_reduce(device):
  # a reduce of 53 padded to 64: the padding's zeros are added in the last block
  t = Tensor(_data(4, 24, 53), device=device) @ Tensor(_data(5, 53, 32), device=device)
  _check(t, device, [Opt(OptOps.PADTO, 2, 16), Opt(OptOps.BLOCK, 0, 16), Opt(OptOps.UPCAST, 1, 16)])

@pytest.mark.parametrize("device", DEVICES)
def test_blocked_sum_and_rerun(device):
  # a plain sum (no product), run twice on the same output: the first block starts from 0, not from the last result
  si = _last(Tensor(_data(6, 8, 256), device=device).sum(1))
  opts = _applies(si, device, [Opt(OptOps.BLOCK, 0, 64), Opt(OptOps.UNROLL, 0, 4)])
  ref = run_kernel(si, device, [])
  first, again = run_kernel(si, device, opts), run_kernel(si, device, opts)
  assert close(first, ref) and close(again, ref), (first, again, ref)

def test_blocked_loop_is_outside_the_output_loops():
  si = _last(MATMUL("CPU"))
  k = Kernel(si.ast, ClangRenderer())
  k.apply_opt(Opt(OptOps.BLOCK, 0, 32))
  assert k.axis_kinds() == ["global", "global", "reduce", "block"], k.axis_kinds()
  assert k.full_shape == (64, 64, 32, 3), k.full_shape
  from tinylit.realize import get_program
  src = get_program(si.ast, ClangRenderer(), [Opt(OptOps.BLOCK, 0, 32)]).src
  loops = [line.strip().split("(int ")[1].split(" ")[0] for line in src.splitlines() if line.strip().startswith("for (int")]
  assert loops[0].startswith("kidx") and loops[-1].startswith("ridx"), loops

@pytest.mark.parametrize("build, opts, why", [
  (lambda: Tensor(_data(7, 8, 64)).max(1), [Opt(OptOps.BLOCK, 0, 16)], "MAX reduce"),
  (lambda: (Tensor(_data(7, 8, 64)) @ Tensor(_data(8, 64, 16))).relu(), [Opt(OptOps.BLOCK, 0, 16)], "more than the sum"),
  (lambda: MATMUL("CPU"), [Opt(OptOps.BLOCK, 0, 96)], "at least two blocks"),
  (lambda: MATMUL("CPU"), [Opt(OptOps.BLOCK, 0, 40)], "must divide"),
  (lambda: MATMUL("CPU"), [Opt(OptOps.BLOCK, 0, 32), Opt(OptOps.BLOCK, 0, 16)], "one block axis"),
  (lambda: MATMUL("CPU"), [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.BLOCK, 1, 16)], "block is for reduce axes"),
], ids=["max", "relu-after", "one-block", "not-divide", "twice", "not-reduce"])
def test_block_refused(build, opts, why):
  si = _last(build())
  k = Kernel(si.ast, Device["CPU"].renderer)
  for o in opts[:-1]: k.apply_opt(o)
  with pytest.raises(KernelOptError, match=why) as e: k.apply_opt(opts[-1])
  assert "BLOCK" in str(e.value)   # the error names the opt

def test_block_refused_where_the_output_is_read():
  # a kernel that reads the buffer it writes would see the partial sums of earlier blocks. The scheduler never makes
  # one for a reduce (it computes into a new buffer and copies), so the AST is made by hand: A's buffer is the output's
  from tinylit.ops import Ops
  ast = _last(MATMUL("CPU")).ast
  out, a = sorted((u for u in ast.toposort if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)[:2]
  k = Kernel(ast.substitute({a: out}), Device["CPU"].renderer)
  with pytest.raises(KernelOptError, match="reads its output"): k.apply_opt(Opt(OptOps.BLOCK, 0, 32))

def test_block_and_group_exclude_each_other():
  from tinylit.renderer import OpenCLRenderer
  si = _last(Tensor(_data(12, 4, 256)).sum(1))
  k = Kernel(si.ast, OpenCLRenderer())
  k.apply_opt(Opt(OptOps.GROUP, 0, 16))
  with pytest.raises(KernelOptError, match="grouped"): k.apply_opt(Opt(OptOps.BLOCK, 1, 4))
  k = Kernel(si.ast, OpenCLRenderer())
  k.apply_opt(Opt(OptOps.BLOCK, 0, 64))
  with pytest.raises(KernelOptError, match="blocked"): k.apply_opt(Opt(OptOps.GROUP, 0, 16))

def _planned(n: int, l2: int):
  "The rules' opts for an n x n matmul on a CPU renderer with 16-float vectors, 2 threads and an L2 of `l2` bytes."
  r = ClangRenderer(vector_width=16, l2_size=l2)
  r.threads = 2
  with Context(PACK=0): si = (Tensor.empty(n, n) @ Tensor.empty(n, n)).schedule()[-1]   # B as stored (rule 8 packs it)
  return hand_coded_optimizations(Kernel(si.ast, r)).applied_opts

@pytest.mark.parametrize("n, l2, block", [(512, 1 << 20, None), (1024, 1 << 20, 128), (2048, 1 << 20, 64),
                                          (2048, 4 << 20, 256), (2048, 0, None), (256, 1 << 20, None)])
def test_rules_block_only_a_matmul_bigger_than_l2(n, l2, block):
  opts = _planned(n, l2)
  got = next((o.amt for o in opts if o.op is OptOps.BLOCK), None)
  assert got == block, opts
  # a blocked plan walks the row blocks in the plain order; an unblocked one swaps the panel outside
  assert any(o.op is OptOps.SWAP for o in opts) == (block is None), opts

def _weight_grad(tokens: int, wide: int, narrow: int, l2: int, data: bool = False):
  "A weight's gradient `X.T @ G` (X: tokens x wide, G: tokens x narrow), and the rules' opts for it as in `_planned`."
  r = ClangRenderer(vector_width=16, l2_size=l2)
  r.threads = 2
  x, g = (_data(15, tokens, wide), _data(16, tokens, narrow)) if data else (None, None)
  X, G = (Tensor(x), Tensor(g)) if data else (Tensor.empty(tokens, wide), Tensor.empty(tokens, narrow))
  with Context(PACK=0): si = _last(X.T @ G)
  return si, hand_coded_optimizations(Kernel(si.ast, r)).applied_opts, (x, g)

@pytest.mark.parametrize("tokens, wide, l2, swap", [(768, 512, 1 << 20, False), (768, 512, 4 << 20, True), (256, 512, 1 << 20, True)])
def test_rules_swap_unless_only_a_is_bigger_than_l2(tokens, wide, l2, swap):
  """`X.T @ G`, G (tokens x 128) fitting the L2: the panel order (SWAP) reads all of X (the tile's input, A) once per
  panel of G, so the rules keep the plain order where X alone is bigger than the L2 (768 x 512 floats, 1.5 MB, against
  1 MB), and swap where it fits."""
  _, opts, _ = _weight_grad(tokens, wide, 128, l2)
  assert not any(o.op is OptOps.BLOCK for o in opts), opts
  assert any(o.op is OptOps.SWAP for o in opts) == swap, opts

def test_rules_plain_order_weight_grad_is_right():
  si, opts, (x, g) = _weight_grad(768, 512, 128, 1 << 20, data=True)
  np.testing.assert_allclose(run_kernel(si, "CPU", opts).reshape(512, 128), x.T @ g, rtol=1e-3, atol=1e-3)

def test_rules_leave_x_at_w_t_alone():
  # x @ W.T (W read along k, a reduce vector): not the plain matmul, whatever its size
  r = ClangRenderer(vector_width=16, l2_size=1 << 20)
  r.threads = 2
  si = (Tensor.empty(256, 2048) @ Tensor.empty(2048, 2048).T).schedule()[-1]
  assert not any(o.op is OptOps.BLOCK for o in hand_coded_optimizations(Kernel(si.ast, r)).applied_opts)

@pytest.mark.parametrize("device", DEVICES)
def test_rules_blocked_plan_is_right(device):
  # a matmul whose B (2048 x 64 floats, 512 KB) exceeds a 256 KB L2: the rules block it; the result is a @ b
  a, b = _data(13, 32, 2048), _data(14, 2048, 64)
  si = _last(Tensor(a, device=device) @ Tensor(b, device=device))
  r = Device[device].renderer
  if device == "CPU":
    k = Kernel(si.ast, ClangRenderer(max(r.vector_widths), 256 << 10))
    k.opts.threads = 2
    opts = hand_coded_optimizations(k).applied_opts
    assert any(o.op is OptOps.BLOCK for o in opts), opts
  else: opts = _applies(si, device, [Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.BLOCK, 0, 256)])
  np.testing.assert_allclose(run_kernel(si, device, opts).reshape(32, 64), a @ b, rtol=1e-3, atol=1e-3)

def test_beam_can_choose_block():
  si = (Tensor.empty(16, 512) @ Tensor.empty(512, 16)).schedule()[-1]
  k = Kernel(si.ast, Device["CPU"].renderer)
  assert any(opts[-1].op is OptOps.BLOCK for opts in search.children(k))

BLOCK_ACTIONS = ACTIONS + [Opt(OptOps.BLOCK, axis, amt) for amt in (4, 8, 16, 32) for axis in range(2)]
CASES = {
  "matmul": lambda d, rng: Tensor(rng.standard_normal((16, 64)).astype(np.float32), device=d) @
                           Tensor(rng.standard_normal((64, 32)).astype(np.float32), device=d),
  "batched": lambda d, rng: Tensor(rng.standard_normal((2, 8, 32)).astype(np.float32), device=d) @
                            Tensor(rng.standard_normal((2, 32, 16)).astype(np.float32), device=d),
  "sum": lambda d, rng: Tensor(rng.standard_normal((8, 128)).astype(np.float32), device=d).sum(1),
  "sum2": lambda d, rng: Tensor(rng.standard_normal((4, 16, 32)).astype(np.float32), device=d).sum((1, 2)),
}

@pytest.mark.parametrize("device", DEVICES)
def test_random_opts_with_block(device):
  rng = random.Random(f"{SEED}-{device}-block")
  blocked = 0
  for _ in range(24):
    name = rng.choice(sorted(CASES))
    si = _last(CASES[name](device, np.random.default_rng(rng.randrange(2**32))))
    k = Kernel(si.ast, Device[device].renderer)
    for _ in range(rng.randint(1, 5)):
      for _ in range(20):
        try: k.apply_opt(rng.choice(BLOCK_ACTIONS))
        except KernelOptError: continue
        break
    if not any(o.op is OptOps.BLOCK for o in k.applied_opts):
      try: k.apply_opt(Opt(OptOps.BLOCK, 0, 4))
      except KernelOptError: continue
    blocked += 1
    ref, got = run_kernel(si, device, []), run_kernel(si, device, k.applied_opts)
    assert close(got, ref), f"{device} {name} with {k.applied_opts}: max difference {np.nanmax(np.abs(got - ref)):.3g}"
  assert blocked >= 8, blocked   # most draws have a BLOCK: the test is not vacuous
