"""Issue 18, point 2 and "Also": each decision made in one place. Thread indices are written into the kernel once, as
SPECIAL UOps, when it is lowered; the linearizer, the renderers, the launch size and the PYTHON interpreter read them.
Sizes and the symbolic rules split sums with the same helpers. A dtype error is not an AttributeError (which `hasattr`
would swallow), `nn` raises ArgumentError like the rest, and the package has its docstring."""
import numpy as np
import pytest

import tinylit
from tinylit import Tensor, Variable, nn
from tinylit.device import Device
from tinylit.dtype import DTypeError, to_dtype
from tinylit.kernel import Kernel, get_grouped_dims
from tinylit.mixin import ArgumentError
from tinylit.ops import Ops, ssimplify
from tinylit.realize import get_program, unbind_views
from tinylit.renderer import (ClangRenderer, CUDARenderer, MetalRenderer, OpenCLRenderer, PythonRenderer, count_ops,
                              launch_dims)
from devices import DEVICES

RNG = np.random.default_rng(18)
RENDERERS = [ClangRenderer, OpenCLRenderer, CUDARenderer, MetalRenderer, PythonRenderer]


def _cases(device: str) -> list[tuple[str, Tensor, np.ndarray]]:
  "Kernels with global, local, group and thread axes (after the device's heuristic), and one with 4 global axes."
  a = RNG.standard_normal((64, 256)).astype(np.float32)
  b = RNG.standard_normal((48, 40)).astype(np.float32)
  x4 = np.arange(3 * 5 * 2 * 7, dtype=np.float32).reshape(3, 5, 2, 7)
  return [("row sums", Tensor(a, device=device).sum(1), a.sum(1)),
          ("elementwise", Tensor(b, device=device) * 2 + 1, b * 2 + 1),
          ("matmul", Tensor(b, device=device) @ Tensor(b.T.copy(), device=device), b @ b.T),
          ("4-D permute", (Tensor(x4, device=device) + 1).permute(1, 0, 3, 2).contiguous(), (x4 + 1).transpose(1, 0, 3, 2))]


def _program(t: Tensor, renderer):
  return get_program(t.schedule()[-1].ast, renderer)


@pytest.mark.parametrize("device", DEVICES)
def test_launch_size_is_read_from_the_specials(device):
  "ProgramSpec's global/local size are the SPECIALs' sizes; every RANGE left is a loop the source opens; results right."
  renderer = Device[device].renderer
  for what, t, want in _cases(device):
    p = _program(t, renderer)
    specials = [u for u in p.uops if u.op is Ops.SPECIAL]
    assert (p.global_size, p.local_size) == launch_dims(p.uops), what
    if specials:
      threads = int(np.prod(p.global_size)) * int(np.prod(p.local_size or (1,)))
      assert threads == int(np.prod([u.arg[1] for u in specials])), (what, p.global_size, p.local_size, specials)
    for u in specials:   # each dimension's size, where the launch has it
      size = p.local_size if u.arg[0][0] == "l" else p.global_size
      assert size[int(u.arg[0][-1])] == u.arg[1], (what, u.arg, p.global_size, p.local_size)
    if renderer.has_local:   # a device with workgroups: no loop over a global, local or group axis of fixed size
      assert not [u.arg for u in p.uops if u.op is Ops.RANGE and u.arg[1] in ("global", "local", "group")
                  and u.src[0].op is Ops.CONST], what
    else:
      assert all(u.arg[0] == "tidx0" for u in specials), what   # the CPU thread is the only thread index
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=f"{device} {what}")


@pytest.mark.parametrize("renderer", RENDERERS, ids=lambda r: r.__name__)
def test_renderers_spell_each_special_once(renderer):
  "Rendering needs no device: each SPECIAL is declared once in the source, and no range is a thread in disguise."
  r = renderer()
  for what, t, _ in _cases("CPU"):
    k = Kernel(t.schedule()[-1].ast, r)
    uops = k.linearize()
    p = _program(t, r)
    specials = [u for u in uops if u.op is Ops.SPECIAL]
    assert sorted(u.arg for u in specials) == sorted(u.arg for u in k.lower().toposort if u.op is Ops.SPECIAL)
    assert count_ops(uops) == count_ops(k.linearize())   # the same list twice: decided once, not per call
    if renderer is PythonRenderer: continue
    for u in (u for u in p.uops if u.op is Ops.SPECIAL):
      assert p.src.count(f"int {u.arg[0]} = ") == 1, (what, u.arg, p.src)
    assert p.src.count("for (") == sum(u.op is Ops.RANGE for u in p.uops), (what, p.src)


def test_grid_sharing_on_a_short_dimension():
  "More global axes than grid dimensions, or a dimension past its limit: the axes share one, read back with // and %."
  idxs = get_grouped_dims("gidx", [2, 3, 4, 5], (2**31 - 1,) * 3)
  assert [i.render() for i in idxs] == ["(gidx2//3)", "(gidx2%3)", "gidx1", "gidx0"]
  tall = get_grouped_dims("gidx", [70000, 16], CUDARenderer.global_max)   # CUDA's y stops at 65535
  assert {u.arg for i in tall for u in i.toposort if u.op is Ops.SPECIAL} == {("gidx0", 70000 * 16)}


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_global_axis_stays_a_loop(device):
  "A grid's size is fixed at launch: an axis of symbolic size is a loop (its bound a kernel argument) on every device."
  n = Variable("n", 1, 16).bind(5)
  t = (Tensor.ones(6, 5, device=device).contiguous().reshape(6, n) * 3).contiguous()
  p = get_program(unbind_views(t.schedule()[-1].ast)[0], Device[device].renderer)
  assert [u for u in p.uops if u.op is Ops.RANGE and u.src[0].op is not Ops.CONST], "the symbolic axis must be a loop"
  assert np.allclose(t.reshape(6, 5).numpy(), 3)


def test_sizes_and_symbolic_rules_split_sums_alike():
  "ssimplify (chapter 3) and the div/mod folding (chapter 5a) use one set of term helpers: a bound size distributes."
  n = Variable("n", 1, 10).bind(3)
  assert ssimplify((n + 1) * 2 - 2) is ssimplify(n * 2)
  assert ssimplify((n + 1) * 2 + n) is ssimplify(n * 3 + 2)
  assert ssimplify(n + 2 - n) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_hasattr_does_not_swallow_a_dtype_error(device):
  "A DTypeError raised inside a property propagates through hasattr and getattr-with-default."
  class Holder:
    @property
    def diff(self): return Tensor([True, False], device=device) - Tensor([True, True], device=device)
  with pytest.raises(DTypeError, match="sub"): hasattr(Holder(), "diff")
  with pytest.raises(DTypeError): getattr(Holder(), "diff", None)
  assert not issubclass(DTypeError, AttributeError) and issubclass(DTypeError, (TypeError, RuntimeError))
  # an unknown dtype *name* is still an AttributeError, as tinygrad's getattr(dtypes, name) raises
  with pytest.raises(AttributeError, match="float31"): to_dtype("float31")
  with pytest.raises(AttributeError): Tensor.ones(3, device=device).sum(acc_dtype="")


@pytest.mark.parametrize("device", DEVICES)
def test_nn_raises_argument_errors(device):
  "nn's bad arguments raise ArgumentError, which is still a ValueError (and an AssertionError, as tinygrad asserts)."
  assert issubclass(ArgumentError, ValueError) and issubclass(ArgumentError, AssertionError)
  with pytest.raises(ArgumentError, match="GroupNorm"): nn.GroupNorm(2, 5)
  with pytest.raises(ArgumentError, match="padding"): nn.Conv2d(1, 1, 3, padding="valid")
  with pytest.raises(ValueError, match="LayerNorm"): nn.LayerNorm(4)(Tensor.ones(2, 3, device=device))
  with pytest.raises(ArgumentError, match="no parameters"): nn.optim.SGD([])
  with pytest.raises(ArgumentError, match="shape"):
    nn.state.load_state_dict(nn.Linear(2, 3), {"weight": Tensor.ones(3, 2, device=device), "bias": Tensor.ones(4, device=device)})


def test_package_has_its_docstring():
  assert tinylit.__doc__ and "tinygrad" in tinylit.__doc__
  assert tinylit.__version__
