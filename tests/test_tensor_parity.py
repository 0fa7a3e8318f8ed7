"""tinygrad v0.10 parity: the ops, semantics and error types tinygrad's own test/test_ops.py checks, written as
tinylit's own tests against torch (forward and backward) on CPU and PYTHON, and CL where it runs. Each group
names the tinygrad behaviour it pins down."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tinylit import Tensor, dtypes
from tinylit.dtype import DTypeError
from tinylit.mixin import ArgumentError
from test_ops import check_op, kernels_bind_many_buffers

F = torch.nn.functional
from devices import DEVICES, skip_without_half
rng = np.random.default_rng(0)


# ---- transposed convolution: any number of spatial axes, stride, padding, output_padding, dilation, groups
CONVT = [((1, 2, 4, 4), (2, 3, 3, 3), {}), ((2, 4, 3, 5), (4, 1, 2, 3), dict(stride=2, padding=1, groups=2)),
         ((1, 2, 5, 5), (2, 2, 3, 3), dict(stride=3, output_padding=2, dilation=2)), ((2, 3, 7), (3, 2, 4), dict(stride=2, padding=2)),
         ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), dict(stride=2)), ((1, 4, 5, 5), (4, 4, 3, 3), dict(stride=(2, 1), padding=(1, 0), groups=4)),
         ((2, 2, 4, 4), (2, 3, 1, 1), dict(stride=2, output_padding=1))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xs,ws,kw", CONVT, ids=[str(kw) + str(len(x)) for x, _, kw in CONVT])
def test_conv_transpose(device, xs, ws, kw):
  if device == "CL" and len(xs) == 5: pytest.skip("one 3-d case is enough on CL")
  fn = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}[len(xs)]
  check_op(device, [xs, ws, (ws[1] * kw.get("groups", 1),)], lambda x, w, b: fn(x, w, b, **kw),
           lambda x, w, b: x.conv_transpose2d(w, b, **kw), atol=1e-4, grad_atol=1e-3)


# ---- interpolate: nearest, nearest-exact, linear (1-d, bilinear, trilinear), align_corners, uint8
INTERP = [((2, 3, 5), (8,), "linear", False), ((2, 3, 5), (3,), "linear", True), ((1, 2, 6, 7), (4, 11), "linear", False),
          ((1, 2, 6, 7), (9, 3), "linear", True), ((1, 1, 3, 4, 5), (5, 2, 7), "linear", False),
          ((1, 1, 3, 4, 5), (5, 2, 7), "linear", True), ((2, 2, 5, 6), (7, 4), "nearest", False),
          ((2, 2, 5, 6), (7, 4), "nearest-exact", False), ((1, 1, 9), (4,), "nearest", False)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,size,mode,corners", INTERP, ids=[f"{m}{len(s)}{'-ac' if c else ''}-{s}" for _, s, m, c in INTERP])
def test_interpolate(device, shape, size, mode, corners):
  tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)] if mode == "linear" else mode
  extra = {"align_corners": corners} if mode == "linear" else {}
  check_op(device, [shape], lambda x: F.interpolate(x, size=size, mode=tmode, **extra),
           lambda x: x.interpolate(size, mode=mode, align_corners=corners), grad=mode == "linear", atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["linear", "nearest", "nearest-exact"])
def test_interpolate_uint8(device, mode):
  "uint8 images: torch's fixed-point blend, rounded after each axis (nearest modes are a plain gather)."
  img = rng.integers(0, 256, (2, 3, 23, 17)).astype(np.uint8)
  for size in [(10, 10), (40, 31)]:
    ours = Tensor(img, device=device).interpolate(size, mode=mode).numpy()
    ref = F.interpolate(torch.tensor(img), size=size, mode="bilinear" if mode == "linear" else mode).numpy()
    assert ours.dtype == np.uint8
    if mode != "linear" or size[0] < 23: np.testing.assert_array_equal(ours, ref)
    else: assert np.abs(ours.astype(int) - ref.astype(int)).max() <= 1   # upsampling: torch picks its edge taps differently


def test_interpolate_errors():
  x = Tensor.ones(1, 1, 4)
  for bad in [lambda: x.interpolate((2, 2, 2, 2)), lambda: x.interpolate((0,)), lambda: x.interpolate((3,), mode="cubic"),
              lambda: x.interpolate((3,), mode="nearest", align_corners=True), lambda: x.interpolate(3)]:
    with pytest.raises(AssertionError): bad()


# ---- pad modes (torch's reflect, replicate, circular; negative amounts crop after the padding)
PADS = [((2, 3, 5), (2, 1), "reflect"), ((1, 2, 5, 5), (0, 2, 3, 2), "reflect"), ((3, 3, 3, 3), (-1, 2, 2, -1), "reflect"),
        ((1, 1, 5, 5), (3, -5, 1, -5), "reflect"), ((1, 1, 5, 5, 5), (1, 2, 3, 4, 1, 2), "reflect"),
        ((2, 3, 4), (3, 2), "replicate"), ((1, 2, 4, 5), (2, 0, 1, 3), "replicate"), ((2, 3, 4), (4, 1), "circular"),
        ((1, 2, 4, 5), (1, 2, 0, 4), "circular"), ((1, 2, 4, 5), (-1, 3, 2, -2), "circular")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,pads,mode", PADS, ids=[f"{m}-{p}" for _, p, m in PADS])
def test_pad_modes(device, shape, pads, mode):
  check_op(device, [shape], lambda x: F.pad(x, pads, mode=mode), lambda x: x.pad(pads, mode=mode))


def test_pad_mode_errors():
  x = Tensor.ones(1, 1, 5, 5)
  with pytest.raises(ValueError): x.pad((3, 5, 0, 0), mode="reflect")          # reflect needs pad < size
  with pytest.raises(RuntimeError): x.pad((6, 0), mode="circular")              # wraps around more than once
  with pytest.raises(NotImplementedError): x.pad((1, 1), mode="typo")


# ---- pooling
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), stride=1, padding=(1, 1)),
                                dict(kernel_size=2, stride=1, padding=1), dict(kernel_size=(3, 2), padding=(1, 1), stride=(2, 1))])
def test_avg_pool2d_padding_not_counted(device, kw):
  check_op(device, [(2, 3, 6, 7)], lambda x: F.avg_pool2d(x, count_include_pad=False, **kw),
           lambda x: x.avg_pool2d(count_include_pad=False, **kw))


@pytest.mark.parametrize("device", DEVICES)
def test_max_pool2d_keeps_int_dtype(device):
  x = rng.integers(-100, 100, (2, 3, 7, 6)).astype(np.int32)
  out = Tensor(x, device=device).max_pool2d(kernel_size=(3, 2), padding=1)
  assert out.dtype == dtypes.int32
  np.testing.assert_array_equal(out.numpy(), F.max_pool2d(torch.tensor(x).float(), (3, 2), padding=1).int().numpy())


# ---- dtype tricks: bitcast, bitwise ops on bools
@pytest.mark.parametrize("device", DEVICES)
def test_bitcast(device):
  x = rng.standard_normal((3, 4)).astype(np.float32)
  np.testing.assert_array_equal(Tensor(x, device=device).bitcast(dtypes.int32).numpy(), x.view(np.int32))
  np.testing.assert_array_equal(Tensor(x, device=device).bitcast("uint32").numpy(), x.view(np.uint32))
  u = np.arange(8, dtype=np.uint16)
  np.testing.assert_array_equal(Tensor(u, device=device).bitcast(dtypes.uint8).numpy(), u.view(np.uint8))
  with pytest.raises(RuntimeError): Tensor(x, requires_grad=True).bitcast(dtypes.int32)
  with pytest.raises(ArgumentError): Tensor(np.arange(3, dtype=np.uint8)).bitcast(dtypes.uint16)

@pytest.mark.parametrize("device", DEVICES)
def test_bitcast_half(device):
  skip_without_half(device)
  x = rng.standard_normal((3, 4)).astype(np.float32)
  np.testing.assert_array_equal(Tensor(x, device=device).half().bitcast(dtypes.int16).numpy(), x.astype(np.float16).view(np.int16))


@pytest.mark.parametrize("device", DEVICES)
def test_bitwise_bools(device):
  a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  for ours, ref in [(ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b), (~ta, ~a)]:
    assert ours.dtype == dtypes.bool
    np.testing.assert_array_equal(ours.numpy(), ref)
  for op in [lambda x: x & x, lambda x: x | 1, lambda x: x ^ x, lambda x: ~x]:
    with pytest.raises(RuntimeError): op(Tensor([1.0, 2.0]))   # torch's RuntimeError, tinylit's DTypeError


# ---- random: multinomial
def test_multinomial():
  Tensor.manual_seed(0)
  w = np.array([0.1, 0.0, 0.5, 2.0, 0.4], np.float32)
  draws = Tensor(w).multinomial(20000, replacement=True).numpy()
  assert draws.dtype == np.int32 and draws.shape == (20000,)
  np.testing.assert_allclose(np.bincount(draws, minlength=5) / 20000, w / w.sum(), atol=0.015)
  two = Tensor(np.stack([w, w[::-1]])).multinomial(3, replacement=True)
  assert two.shape == (2, 3) and (two.numpy()[0] != 1).all() and (two.numpy()[1] != 3).all()
  with pytest.raises(AssertionError): Tensor(w).multinomial(2)                  # without replacement only one sample
  with pytest.raises(AssertionError): Tensor.ones(2, 2, 2).multinomial()


# ---- activations under tinygrad's names
@pytest.mark.parametrize("device", DEVICES)
def test_leakyrelu(device):
  check_op(device, [(45, 65)], lambda x: F.leaky_relu(x, 0.01), lambda x: x.leakyrelu())
  check_op(device, [(45, 65)], lambda x: F.leaky_relu(x, 0.3), lambda x: x.leakyrelu(0.3))


# ---- matmul with 1-D operands and batches, einsum with ...
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [[(65,), (65,)], [(65,), (65, 45)], [(45, 65), (65,)], [(8, 45, 65), (65,)], [(65,), (8, 65, 45)],
                                    [(3,), (2, 3, 4)], [(2, 1, 4, 3), (5, 3, 2)], [(0,), (0, 8)], [(8, 0), (0, 8)]])
def test_dot_shapes(device, shapes):
  if device == "CL" and 0 in shapes[0]: pytest.skip("empty shapes are covered on CPU and PYTHON")
  check_op(device, shapes, lambda a, b: a @ b, lambda a, b: a.dot(b), atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("formula,shapes", [("...id,...jd->...ij", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("i...j,ji...->...", [(2, 3, 4, 5), (5, 2, 4)]),
                                            ("ij...,ij...->ij", [(3, 4, 2, 2), (3, 4, 2, 2)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]),
                                            ("b...,b...->b", [(3, 2, 2), (3, 1, 2)])])
def test_einsum_ellipsis(device, formula, shapes):
  check_op(device, shapes, lambda *xs: torch.einsum(formula, *xs), lambda *xs: Tensor.einsum(formula, *xs), atol=1e-4)


def test_einsum_errors():
  a, b = Tensor.zeros(3, 8, 10, 5), Tensor.zeros(11, 5, 13, 16, 8)
  with pytest.raises(AssertionError): Tensor.einsum("pqrs,tuqvr->pstuv", a, b)
  with pytest.raises(AssertionError): Tensor.einsum("ij,jk->ij", Tensor.zeros(2, 2), Tensor.zeros(2, 2), Tensor.zeros(2, 2))
  with pytest.raises(RuntimeError): Tensor.einsum("...ik...,...jk->", Tensor.zeros(2, 3, 4), Tensor.zeros(2, 3, 4))
  with pytest.raises(RuntimeError): Tensor.einsum("i...j,ji...->...", Tensor.zeros(2, 3, 4, 5), Tensor.zeros(5, 2, 7))


# ---- fancy indexing: lists, tuples, lists of tensors, ints and None among tensor indices
def _index_randoms():
  r = np.random.default_rng(7)
  return [r.integers(lo, hi, s) for lo, hi, s in [(-1, 1, (2, 1, 1, 1, 1, 1)), (0, 1, (1, 3, 1, 1, 1, 1)), (-5, 5, (1, 1, 4, 1, 1, 1)),
                                                  (0, 4, (2, 1, 1, 5, 1, 1)), (0, 1, (1, 1, 1, 1, 6, 1))]]


FANCY = ["x[a,b,c,d,e]", "x[:,b,c,d,:]", "x[a,b,...]", "x[a,...,e]", "x[...,c,:,e]", "x[1,b,2,d,2]", "x[1,:,3:11:2,d,0:2]",
         "x[None,b,c,d,e]", "x[a,b,None,d,e]", "x[None,None,b,c,None,None]", "x[1,b,None,d,1]", "x[...,1,d,None]",
         "x[[[0]]]", "x[[0],b,c,d,:]", "x[[[[0]]],b,c,d,[[1]]]", "x[[1,0],b,c,d,:]", "x[a,b,c,[[1],[2],[3]],...]",
         "x[a,[2,1,0],c,[2,1,0],e]", "x[(((0,),),)]", "x[(1,0),b,c,d,:]", "x[a,((2,),(1,),(0,)),c,(2,1,0)]",
         "x[1,(2,1,0),None,c,(2,1,0),e]", "x[[a]]", "x[[a,1]]", "x[[a,[1,1]]]", "x[[a,(1,1)]]"]


FIVE_INDEX_TENSORS = {"x[a,b,c,d,e]", "x[[[[0]]],b,c,d,[[1]]]", "x[a,[2,1,0],c,[2,1,0],e]"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("code", FANCY)
def test_fancy_indexing(device, code):
  if code in FIVE_INDEX_TENSORS and not kernels_bind_many_buffers(device):
    pytest.xfail("five index tensors make a kernel of 12 buffers, which needs the renderer's buffer-order fix (chapters 7-8)")
  names = dict(zip("abcde", _index_randoms()))
  def run(lib, x):
    idx = {k: (torch.tensor(v) if lib == "torch" else Tensor(v.astype(np.int32), device=device)) for k, v in names.items()}
    return eval(code, {"x": x, **idx})  # noqa: S307 -- this file's own table
  check_op(device, [(2, 5, 6, 5, 3, 4)], lambda x: run("torch", x), lambda x: run("tinylit", x))


@pytest.mark.parametrize("device", DEVICES)
def test_indexing_with_tensors_of_different_shapes(device):
  for idx in [([[0, 0, 0], [0, 0, 0]], 1), ([1], [[0, 0, 0], [0, 0, 0]]), ([[0, 1, -1], [-1, -2, 0]], [2, 1, -1])]:
    check_op(device, [(2, 3)], lambda x, idx=idx: x[tuple(torch.tensor(i) for i in idx)],
             lambda x, idx=idx: x[tuple(Tensor(i, device=device) for i in idx)])


def test_index_errors():
  a = Tensor.ones(3, 4)
  with pytest.raises(IndexError, match="too many"): a[1, 77, 77]
  with pytest.raises(IndexError, match="out of bounds"): a[1, 4]
  with pytest.raises(IndexError, match="single ellipsis"): a[..., ...]
  with pytest.raises(ValueError): a[::0, 1]
  with pytest.raises(TypeError): a[:Tensor([3]), 1]
  with pytest.raises(IndexError): Tensor(3.0)[:]
  with pytest.raises(IndexError): a[Tensor(1.1)]
  with pytest.raises(IndexError): a[Tensor([True, True])]
  with pytest.raises((IndexError, ValueError)): a[Tensor.randint(3, 1, 1, 1), Tensor.randint(1, 4, 1, 1, 1)][0, 0]


# ---- __setitem__: slices, ints, None, ..., index tensors (the last of repeated indices wins), broadcast values
SETS = [("[1]", "5.0"), ("[:, 2]", "v3"), ("[1:3, ::2]", "-1.0"), ("[::-1, 1]", "v3"), ("[..., -1]", "v3"), ("[None, 0, 1:]", "7.0"),
        ("[0, 0]", "-3.0"), ("[[0, 2], [1, 3]]", "v2"), ("[[2, 0, 2], 1]", "v3"), ("[T([2, 0, 2])]", "9.0"), ("[T([[1], [2]]), T([0, 3])]", "v22"),
        ("[1:, T([3, 0])]", "v22"), ("[:, ::3]", "v32"), ("[2:0:-1, 1::2]", "v22"), ("[T([1, 1, 1])]", "rows")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index,value", SETS, ids=[f"{i}={v}" for i, v in SETS])
def test_setitem(device, index, value):
  base = np.arange(12, dtype=np.float32).reshape(3, 4)
  vals = {"v3": np.array([10.0, 20.0, 30.0], np.float32), "v2": np.array([-1.0, -2.0], np.float32),
          "v22": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), "v32": np.arange(6, dtype=np.float32).reshape(3, 2),
          "rows": np.array([[1.0, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]], np.float32)}
  def apply(lib, t):   # numpy is the reference: torch has no negative slice steps, and numpy's last repeated write wins
    v = vals.get(value)
    v = (v if lib == "numpy" else Tensor(v, device=device)) if v is not None else float(value)
    T = np.array if lib == "numpy" else (lambda i: Tensor(i, device=device))
    exec(f"t{index} = v", {"t": t, "v": v, "T": T})  # noqa: S102 -- this file's own table
    return t
  ref = apply("numpy", base.copy())
  t = Tensor(base, device=device).contiguous().realize()
  buf = t.lazydata.base.buffer
  np.testing.assert_array_equal(apply("tinylit", t).numpy(), ref)
  assert t.lazydata.base.buffer is buf   # written in place


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_semantics(device):
  t = Tensor.zeros(2, 3, dtype=dtypes.int32, device=device)       # a constant gets memory of its own
  t[0] = 2.7                                                      # cast to the target's dtype, as torch
  t[1, 1:] = Tensor([5, 6], device=device)
  np.testing.assert_array_equal(t.numpy(), [[2, 2, 2], [0, 5, 6]])
  base = Tensor.arange(6, device=device).contiguous().realize()
  flat_view = base.reshape(2, 3)
  flat_view[1, 1] = 40                                            # a view shares the memory: writes through, as torch
  np.testing.assert_array_equal(base.numpy(), [0, 1, 2, 3, 40, 5])
  base.reshape(2, 3)[0].__setitem__(0, 1)                          # a view of part of it too (tinygrad v0.10 refuses it)
  np.testing.assert_array_equal(base.numpy(), [1, 1, 2, 3, 40, 5])
  with pytest.raises(RuntimeError, match="expanded"): base.reshape(1, 6).expand(2, 6).__setitem__((0, 0), 1)
  with pytest.raises(NotImplementedError): Tensor([1.0, 2.0], requires_grad=True).__setitem__(0, 3.0)
  with pytest.raises(TypeError): Tensor.ones(2).contiguous().__setitem__(0, "a")
  u = Tensor([1, 2], dtype=dtypes.uint8, device=device).contiguous()
  u[0] = 300                                                      # a Python int wraps like a C cast into uint8
  assert u.numpy().tolist() == [44, 2]


# ---- reductions and scans at the edges
@pytest.mark.parametrize("device", DEVICES)
def test_cumsum_and_logcumsumexp_edges(device):
  for shape, axis in [((), 0), ((), -1), ((2, 0, 4), 1), ((0, 3), 0), ((2, 3, 0), 2), ((1022,), 0), ((20, 30), 1)]:
    check_op(device, [shape], lambda x, axis=axis: torch.cumsum(x, dim=axis), lambda x, axis=axis: x.cumsum(axis), atol=1e-4)
    check_op(device, [shape], lambda x, axis=axis: torch.logcumsumexp(x, dim=axis), lambda x, axis=axis: x.logcumsumexp(axis), atol=1e-4)
  for shape, axis in [((), 1), ((20,), 1), ((20,), -2)]:
    with pytest.raises(IndexError): Tensor.ones(*shape).cumsum(axis)


@pytest.mark.parametrize("device", DEVICES)
def test_squeeze_edges(device):
  for shape, dim in [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), 1), ((), 0), ((), -1), ((), None)]:
    check_op(device, [shape], lambda x, dim=dim: x.squeeze() if dim is None else x.squeeze(dim), lambda x, dim=dim: x.squeeze(dim))
  for shape, dim in [((4, 3, 6, 6), 50), ((4, 3, 6, 6), -50), ((), 10), ((), 1), ((), -2)]:
    with pytest.raises(IndexError): Tensor.ones(*shape).squeeze(dim)


@pytest.mark.parametrize("device", DEVICES)
def test_gather_edges(device):
  b = torch.randint(3, size=(4, 5, 6), generator=torch.Generator().manual_seed(0))
  for dim in (0, 1, 2, -1, -3):
    check_op(device, [(4, 5, 6)], lambda x, dim=dim: x.gather(dim, b),
             lambda x, dim=dim: x.gather(dim, Tensor(b.numpy().astype(np.int32), device=device)))
  idx = [2, 1, 0, 1, 2]
  check_op(device, [(3,)], lambda x: x.gather(0, torch.tensor(idx)), lambda x: x.gather(0, Tensor(idx, device=device)))
  with pytest.raises(RuntimeError): Tensor.ones(4, 5, 6).gather(0, Tensor([1]))
  with pytest.raises(AssertionError): Tensor.ones(2, 1, 1).gather(0, Tensor.ones(4, 5, 6, dtype=dtypes.int32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("axis,correction", [((0, 3), 1), ((0, 3), 0), ((0, 3), 5), ((0, 4), 0), ((0, 4), 5), (None, 1), ((1, 3), 1)])
def test_std_with_size_one_axes(device, axis, correction):
  shape = (1, 2, 3, 1, 5) if axis != (1, 3) else (1, 0, 3, 0, 5)
  grad = correction <= 1 and axis != (1, 3)
  check_op(device, [shape], lambda x: x.std(dim=axis, correction=correction), lambda x: x.std(axis, correction=correction), grad=grad)
  check_op(device, [shape], lambda x: torch.stack(torch.std_mean(x, dim=axis, correction=correction)),
           lambda x: Tensor.stack(*x.std_mean(axis, correction=correction)), grad=grad)


def test_sum_prod_acc_dtype():
  x = rng.standard_normal((45, 3)).astype(np.float32)
  np.testing.assert_allclose(Tensor(x).sum(acc_dtype=dtypes.float64).numpy(), x.astype(np.float64).sum(), rtol=1e-6)
  assert Tensor(x).sum(acc_dtype=dtypes.float64).dtype == dtypes.float64
  assert Tensor([1, 2], dtype=dtypes.int8).prod(acc_dtype=dtypes.int32).dtype == dtypes.int32
  for bad in [lambda: Tensor([1.0, 2.0]).sum(acc_dtype=""), lambda: Tensor([1.0, 2.0]).prod(acc_dtype=""),
              lambda: Tensor([1.0]).sum(acc_dtype="complex64")]:
    with pytest.raises(AttributeError): bad()


# ---- losses
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_nd(device, reduction, weighted):
  y = np.random.default_rng(3).integers(0, 10, (8, 3, 3, 3))
  if weighted:   # (torch has no gradient for the weights)
    w = np.random.default_rng(4).uniform(0.1, 2.0, 10).astype(np.float32)
    check_op(device, [(8, 10, 3, 3, 3)], lambda x: F.nll_loss(x.log_softmax(1), torch.tensor(y), weight=torch.tensor(w), reduction=reduction),
             lambda x: x.log_softmax(1).nll_loss(Tensor(y, device=device), weight=Tensor(w, device=device), reduction=reduction), atol=1e-5)
  else:
    check_op(device, [(8, 10, 3, 3, 3)], lambda x: F.nll_loss(x.log_softmax(1), torch.tensor(y), reduction=reduction, ignore_index=2),
             lambda x: x.log_softmax(1).nll_loss(Tensor(y, device=device), reduction=reduction, ignore_index=2), atol=1e-5)


# ---- pow: the whole range (negative bases, NaN where torch has NaN, in the gradient too), constant bases
@pytest.mark.parametrize("device", DEVICES)
def test_pow_full_range(device):
  check_op(device, [(45, 65), (45, 65)], lambda a, b: a ** b, atol=1e-4, grad_atol=1e-3)
  for e in [0, 1, 2, 3, -2, 1.0, -1.0, 2.0, 0.5]: check_op(device, [(10, 6)], lambda x, e=e: x ** e, atol=1e-4, grad_atol=1e-3)
  for e in [3, 0.2, 1.2]: check_op(device, [(10, 6)], lambda x, e=e: x ** e, low=-30, high=-27, atol=1e-2, grad_atol=1e-2, rtol=1e-3)
  for c in [1.0, 2.0, 0.5, 10.0]: check_op(device, [(10, 6)], lambda x, c=c: c ** x, atol=1e-4, grad_atol=1e-3)
  zero_t, zero_l = torch.tensor([0.0], requires_grad=True), Tensor([0.0], requires_grad=True, device=device)
  (zero_t ** 1.1).sum().backward(); (zero_l ** 1.1).sum().backward()
  np.testing.assert_allclose(zero_l.grad.numpy(), zero_t.grad.numpy())


# ---- half matmul backward: the broadcast's gradient sums in float32
@pytest.mark.parametrize("device", DEVICES)
def test_gemm_fp16_backward(device):
  skip_without_half(device)
  x, w = rng.uniform(-2, 2, (64, 64)).astype(np.float32), rng.uniform(-2, 2, (64, 64)).astype(np.float32)
  tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  lx, lw = Tensor(x, requires_grad=True, device=device), Tensor(w, requires_grad=True, device=device)
  (tx.half().float() @ tw.half().float()).square().mean().backward()
  out = lx.half().matmul(lw.half())
  assert out.dtype == dtypes.float16
  (out.float()).square().mean().backward()
  np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), atol=5e-3, rtol=5e-3)
  np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), atol=5e-3, rtol=5e-3)


# ---- meshgrid as an instance method, returning a tuple
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
  x, y, z = Tensor([0.0, 1.0, 2.0]), Tensor([3.0, 4.0, 5.0, 6.0]), Tensor(10.0)
  for ours, theirs in [(x.meshgrid(indexing=indexing), torch.meshgrid(torch.tensor(x.numpy()), indexing=indexing)),
                       (x.meshgrid(z, y, indexing=indexing), torch.meshgrid(*(torch.tensor(t.numpy()) for t in (x, z, y)), indexing=indexing))]:
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs): np.testing.assert_array_equal(a.numpy(), b.numpy())
  with pytest.raises(RuntimeError): x.meshgrid(indexing="bad")


# ---- exception types tinygrad's tests expect (our classes are also what numpy and torch raise)
@pytest.mark.parametrize("fxn,exc", [
  (lambda x: x.reshape((-1, -1, 2)), RuntimeError), (lambda x: x.reshape((-1, -1, -1, 2)), RuntimeError),
  (lambda x: x.reshape(5), ValueError), (lambda x: x.reshape(3, 4, 1, 1).permute((0, 2)), RuntimeError),
  (lambda x: x.permute((0, 1, 2, 3, 3, 3)), RuntimeError),
  (lambda x: x.permute((0, 0)), RuntimeError), (lambda x: x.flip((0, 0)), RuntimeError), (lambda x: x.flip((1, -1)), RuntimeError),
  (lambda x: x.clip(None, None), RuntimeError), (lambda x: x.expand(4, 1, 1, 6), (ValueError, RuntimeError)),
  (lambda x: Tensor.linspace(5, 10, 3, dtype="bool"), (RuntimeError, ValueError)), (lambda x: Tensor.linspace(1, 2, -1), ValueError),
  (lambda x: x.pad((2, 0, 2)), (RuntimeError, ValueError)), (lambda x: x.pad((0, 0, 0, 0, 1, 0, 3, 0)), (RuntimeError, ValueError)),
  (lambda x: x @ x, RuntimeError), (lambda x: Tensor(3.14) @ x, RuntimeError), (lambda x: x.sum(5), IndexError),
  (lambda x: Tensor(1.0).cat(Tensor(1.0)), IndexError), (lambda x: Tensor.stack(x, dim=77), IndexError),
  (lambda x: x.reshape(3, 4, 1).repeat(2, 4), ValueError),
  (lambda x: x.conv2d(Tensor.ones(6, 1, 3, 3), dilation=3), (RuntimeError, AssertionError)),
  (lambda x: x.cross_entropy(Tensor([0, 1, 2]), reduction="typo"), ValueError),
  (lambda x: x.nll_loss(Tensor([0, 1, 2]), reduction="typo"), ValueError),
  (lambda x: (x != x).sum().backward(), RuntimeError), (lambda x: Tensor.ones(3, 4).sum(acc_dtype=""), AttributeError),
])
def test_error_types(fxn, exc):
  with pytest.raises(exc): fxn(Tensor.ones(3, 4))
  assert issubclass(ArgumentError, (ValueError, RuntimeError, AssertionError)) and issubclass(DTypeError, (TypeError, RuntimeError, AttributeError))
