"""Chapter 3, UOps and C semantics (nbs/03_uop.ipynb): integer division and remainder as C computes them
(`_trunc_div`, `_c_mod`), and float-to-int conversion as x86-64 does (`_float_to_int`). Constant folding and the
PYTHON device compute through them, so they must agree with the compiled kernels bit for bit."""
from tinylit_learn.tasks import Task, case, expect


def same(got, want, dtype) -> bool:
  import numpy as np
  got = np.asarray(got)
  return got.dtype == np.dtype(dtype) and got.shape == np.shape(want) and bool(np.array_equal(got, np.asarray(want, dtype=dtype)))


def check_div_mod():
  import numpy as np
  from tinylit.dtype import dtypes
  from tinylit.ops import Ops, _c_mod, _trunc_div, exec_alu
  a, b = np.array([7, -7, 7, -7, 0, 5, 6], np.int32), np.array([2, 2, -2, -2, 3, 0, 3], np.int32)
  for name, fn, want in [("_trunc_div", _trunc_div, [3, -3, -3, 3, 0, 0, 2]), ("_c_mod", _c_mod, [1, -1, 1, -1, 0, 0, 0])]:
    sym = "//" if fn is _trunc_div else "%"
    with case(f"{name}: [7, -7, 7, -7, 0, 5, 6] {sym} [2, 2, -2, -2, 3, 0, 3] (int32: toward zero; by 0 gives 0)"):
      got = fn(a, b)
      expect(same(got, want, np.int32), f"expected {want} (int32), got {np.asarray(got).tolist()} ({np.asarray(got).dtype})")
  for dt, lo in [(np.int32, -2**31), (np.int64, -2**63), (np.int8, -128)]:
    x, m1 = np.array([lo, lo], dt), np.array([-1, 1], dt)
    with case(f"_trunc_div: {np.dtype(dt).name} minimum // [-1, 1] (C wraps -MIN to MIN)"):
      got = _trunc_div(x, m1)
      expect(same(got, [lo, lo], dt), f"expected {[lo, lo]}, got {np.asarray(got).tolist()}")
    with case(f"_c_mod: {np.dtype(dt).name} minimum % [-1, 1]"):
      got = _c_mod(x, m1)
      expect(same(got, [0, 0], dt), f"expected [0, 0], got {np.asarray(got).tolist()}")
  with case("_trunc_div: uint32 [4294967295, 7] // [2, 0]"):
    got = _trunc_div(np.array([4294967295, 7], np.uint32), np.array([2, 0], np.uint32))
    expect(same(got, [2147483647, 0], np.uint32), f"expected [2147483647, 0] (uint32), got {np.asarray(got).tolist()}")
  with case("exec_alu(Ops.IDIV, dtypes.int32, [-7, 2]) and exec_alu(Ops.MOD, dtypes.int32, [-7, 2]) (constant folding)"):
    got = exec_alu(Ops.IDIV, dtypes.int32, [-7, 2]), exec_alu(Ops.MOD, dtypes.int32, [-7, 2])
    expect(got == (-3, -1), f"expected (-3, -1), got {got}")


def check_float_to_int():
  import numpy as np
  from tinylit.dtype import dtypes
  from tinylit.ops import _float_to_int
  nan, inf = float("nan"), float("inf")
  for name, values, dt, want in [
      ("to int32: truncation toward zero", [2.7, -2.7, 0.5, -0.5, 2147483647.0], dtypes.int32, [2, -2, 0, 0, 2147483647]),
      ("to int32: NaN, inf, -inf and values out of range", [nan, inf, -inf, 3e9, -3e9, 2147483648.0], dtypes.int32, [-2**31] * 6),
      ("to int8: through int32, then wrapped", [300.5, -129.9, 127.9, 1e10], dtypes.int8, [44, 127, 127, 0]),
      ("to uint8: through int32, then wrapped", [-1.0, 256.0, 255.9], dtypes.uint8, [255, 0, 255]),
      ("to int64", [2.0**62, -2.0**63, 2.0**63, nan], dtypes.int64, [2**62, -2**63, -2**63, -2**63]),
      ("to uint32: through int64", [4e9, -1.0, 5e9], dtypes.uint32, [4000000000, 4294967295, 5000000000 % 2**32]),
      ("to uint64: from 2**63 up, 2**63 plus the rest", [1.5e19, 2.0**63, 3.0, nan], dtypes.uint64,
       [15000000000000000000, 2**63, 3, 2**63])]:
    with case(f"_float_to_int {values} {name}"):
      got = _float_to_int(np.array(values, np.float64), dt)
      expect(same(got, want, dt.np), f"expected {want} ({dt}), got {np.asarray(got).tolist()} ({np.asarray(got).dtype})")
  with case("_float_to_int of float32 and float16 arrays to int32"):
    got = _float_to_int(np.array([1.5, -1e10], np.float32), dtypes.int32), _float_to_int(np.array([-3.5, np.inf], np.float16), dtypes.int32)
    expect(same(got[0], [1, -2**31], np.int32) and same(got[1], [-3, -2**31], np.int32),
           f"expected [1, -2147483648] and [-3, -2147483648], got {[g.tolist() for g in got]}")


TASKS = [
  Task("03.1", "write _trunc_div and _c_mod: integer a // b and a % b on numpy arrays as C computes them (chapter 3): "
       "the quotient rounds toward zero and the remainder takes the dividend's sign, x // 0 and x % 0 are 0, and the "
       "type's minimum // -1 wraps to the minimum (% -1 is 0); results keep the operands' dtype. numpy's own // and % "
       "round down instead, and warn or trap on the edge cases.",
       "floor_divide, then add 1 where there was a remainder and the signs differ; np.fmod already takes the dividend's "
       "sign; replace b == 0 by 1 before dividing and the result by 0 after.",
       check_div_mod),
  Task("03.2", "write _float_to_int: a float array to an integer dtype as x86-64 compiled C does it, one answer for every "
       "input: truncate toward zero into int32 (into int64 for int64, uint32 and uint64: THROUGH_INT64), NaN, ±inf and "
       "values out of that range give its minimum, then wrap to the dtype; a uint64 from 2**63 up is 2**63 plus the "
       "rest converted the same way.",
       "compute in float64 (exact for float16 and float32), np.trunc, a range test with np.where, .astype(np.int64), "
       "then .astype(dtype.np) wraps.",
       check_float_to_int),
]
