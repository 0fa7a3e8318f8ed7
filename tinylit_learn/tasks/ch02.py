"Chapter 2, the lazy graph (nbs/02_lazy.ipynb): constant folding, `fold_alu` and `fold_reduce`."
from tinylit_learn.tasks import Task, case, expect


def check_fold_alu():
  from tinylit.dtype import dtypes
  from tinylit.lazy import LazyBuffer, fold_alu
  from tinylit.ops import Ops
  def const(v, dt=dtypes.int32): return LazyBuffer.metaop(Ops.CONST, (4,), dt, "CPU", v)
  def is_const(r, v, dt) -> bool:
    return isinstance(r, LazyBuffer) and r.is_unrealized_unmasked_const() and r.const_arg == v and r.dtype == dt and r.shape == (4,)
  x, y = LazyBuffer.metaop(Ops.EMPTY, (4,), dtypes.int32, "CPU"), LazyBuffer.metaop(Ops.EMPTY, (4,), dtypes.int32, "CPU")
  f = LazyBuffer.metaop(Ops.EMPTY, (4,), dtypes.float32, "CPU")
  with case("no constant among the sources: x + y"):
    expect(fold_alu(Ops.ADD, (x, y), dtypes.int32) is None, "expected None (a node must be recorded)")
  with case("two constants: 2 + 3"):
    r = fold_alu(Ops.ADD, (const(2), const(3)), dtypes.int32)
    expect(is_const(r, 5, dtypes.int32), f"expected a constant 5 of shape (4,), got {r}")
  with case("two constants, C's rules: int32 2147483647 + 1 wraps"):
    r = fold_alu(Ops.ADD, (const(2**31 - 1), const(1)), dtypes.int32)
    expect(is_const(r, -2**31, dtypes.int32), f"expected the constant -2147483648 (computed as the kernel would), got {r}")
  with case("two constants, a comparison: 2 < 3 gives a bool"):
    r = fold_alu(Ops.CMPLT, (const(2), const(3)), dtypes.bool)
    expect(is_const(r, True, dtypes.bool), f"expected the bool constant True, got {r}")
  for name, op, srcs, want in [("x + 0", Ops.ADD, (x, const(0)), x), ("0 + x", Ops.ADD, (const(0), x), x),
                               ("x * 1", Ops.MUL, (x, const(1)), x), ("1 * x", Ops.MUL, (const(1), x), x),
                               ("x | 0", Ops.OR, (x, const(0)), x), ("x ^ 0", Ops.XOR, (x, const(0)), x),
                               ("x // 1", Ops.IDIV, (x, const(1)), x),
                               ("float x / 1.0", Ops.FDIV, (f, const(1.0, dtypes.float32)), f)]:
    with case(f"an identity: {name}"):
      r = fold_alu(op, srcs, srcs[0].dtype)
      expect(r is want, f"expected x itself, got {r}")
  for name, op, srcs in [("int x * 0", Ops.MUL, (x, const(0))), ("int 0 * x", Ops.MUL, (const(0), x)),
                         ("x & 0", Ops.AND, (x, const(0))), ("int x % 1", Ops.MOD, (x, const(1)))]:
    with case(f"a zero: {name}"):
      r = fold_alu(op, srcs, dtypes.int32)
      expect(is_const(r, 0, dtypes.int32), f"expected the constant 0 of x's shape and dtype, got {r}")
  for name, op, srcs, out in [("float x * 0.0 (NaN * 0 is NaN)", Ops.MUL, (f, const(0.0, dtypes.float32)), dtypes.float32),
                              ("x + 1", Ops.ADD, (x, const(1)), dtypes.int32), ("x * 2", Ops.MUL, (x, const(2)), dtypes.int32),
                              ("0 // x", Ops.IDIV, (const(0), x), dtypes.int32), ("1 % x", Ops.MOD, (const(1), x), dtypes.int32),
                              ("x < 0 (a bool result is not x)", Ops.CMPLT, (x, const(0)), dtypes.bool)]:
    with case(f"not foldable: {name}"):
      r = fold_alu(op, srcs, out)
      expect(r is None, f"expected None, got {r}")


def check_fold_reduce():
  import math
  from tinylit.dtype import dtypes
  from tinylit.lazy import fold_reduce
  from tinylit.ops import Ops
  for name, args, want in [
      ("max of 5 copies of 7", (Ops.MAX, 7, 5, dtypes.int32), 7),
      ("sum of 5 copies of 7", (Ops.ADD, 7, 5, dtypes.int32), 35),
      ("sum of 4 copies of 2.5 (float32)", (Ops.ADD, 2.5, 4, dtypes.float32), 10.0),
      ("sum of 3 copies of 100 in int8 (wraps, as C's would)", (Ops.ADD, 100, 3, dtypes.int8), 44),
      ("sum of no copies", (Ops.ADD, 7, 0, dtypes.int32), 0),
      ("product of 5 copies of 3 (int32)", (Ops.MUL, 3, 5, dtypes.int32), 243),
      ("product of 5 copies of 3 in int8 (wraps)", (Ops.MUL, 3, 5, dtypes.int8), -13),
      ("product of 8 copies of 2 in uint8 (wraps to 0)", (Ops.MUL, 2, 8, dtypes.uint8), 0),
      ("product of 40 copies of 3 in int64 (wraps)", (Ops.MUL, 3, 40, dtypes.int64), 3**40 - 2**64),
      ("product of no copies", (Ops.MUL, 3, 0, dtypes.int32), 1),
      ("product of 10 copies of 2.0 (float32)", (Ops.MUL, 2.0, 10, dtypes.float32), 1024.0),
      ("product of 3 copies of True (bool)", (Ops.MUL, True, 3, dtypes.bool), True),
      ("product of 50 copies of 10.0 in float16 (overflows to inf)", (Ops.MUL, 10.0, 50, dtypes.float16), math.inf)]:
    with case(f"fold_reduce: {name}"):
      got = fold_reduce(*args)
      expect(got == want and type(got) is type(want), f"expected {want!r}, got {got!r}")


TASKS = [
  Task("02.1", "write fold_alu: the result of an elementwise op on LazyBuffers when it is known without a kernel, or "
       "None. All sources constants: a new constant (LazyBuffer.metaop(Ops.CONST, ...)) computed now by chapter 3's "
       "exec_alu, so it wraps and rounds as the kernel would. Otherwise the identities of the docstring, with the "
       "constant on either side. Chapter 2 showed is_unrealized_unmasked_const and const_arg.",
       "a float x*0 must not fold (NaN*0 is NaN); an identity keeps x only when out_dtype and both sources' dtypes agree.",
       check_fold_alu),
  Task("02.2", "write fold_reduce: what reducing n copies of the constant `value` with op (ADD, MUL or MAX) gives in "
       "dtype, without a kernel: MAX is the value, ADD is value*n, MUL is value**n; integers wrap as C's do, a float "
       "rounds to dtype (chapter 1a's dtypes.as_const), a bool product is the bool.",
       "exec_alu(Ops.MUL, dtype, [value, n]) wraps a sum for you; for an int product, pow(v, n, 2**bits) then as_const.",
       check_fold_reduce),
]
