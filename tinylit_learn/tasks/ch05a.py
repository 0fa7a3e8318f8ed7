"""Chapter 5a, symbolic math as rewrite rules (nbs/05a_symbolic.ipynb): constant folding and folding by bounds, and
the division and remainder rule (`div_mod_fold`). A rewrite may give any expression, as long as it computes the same
value for every value of its variables: that is what the checks try, exhaustively over small ranges."""
import itertools

from tinylit_learn.tasks import Task, case, expect


def evaluate(u, env: dict) -> int:
  "An integer expression of variables and constants, with C's division (toward zero), as the kernel computes it."
  from tinylit.ops import Ops
  if u.op is Ops.DEFINE_VAR: return env[u.arg[0]]
  if u.op is Ops.CONST: return u.arg
  v = [evaluate(s, env) for s in u.src]
  if u.op is Ops.IDIV: return 0 if v[1] == 0 else abs(v[0]) // abs(v[1]) * (1 if (v[0] < 0) == (v[1] < 0) else -1)
  if u.op is Ops.MOD: return 0 if v[1] == 0 else v[0] - evaluate(u.src[0] // u.src[1], env) * v[1]
  ops = {Ops.ADD: lambda a, b: a + b, Ops.MUL: lambda a, b: a * b, Ops.MAX: max, Ops.CMPLT: lambda a, b: a < b,
         Ops.CMPNE: lambda a, b: a != b, Ops.WHERE: lambda c, a, b: a if c else b, Ops.NEG: lambda a: -a}
  return ops[u.op](*v)


def same_everywhere(got, want, names) -> None:
  "`got` computes `want` for every value of the variables (each over its range)."
  from tinylit.ops import Ops
  ranges = {n: range(lo, hi + 1) for n, lo, hi in sorted({u.arg for w in (want,) for u in w.toposort if u.op is Ops.DEFINE_VAR})}
  for vals in itertools.product(*ranges.values()):
    env = dict(zip(ranges, vals))
    g, w = evaluate(got, env), evaluate(want, env)
    expect(g == w, f"with {', '.join(f'{k}={v}' for k, v in env.items())} the result is {g}, but {names} is {w}")


def divisions(x, c) -> int:
  from tinylit.ops import Ops
  return sum(1 for u in x.toposort if u.op in (Ops.IDIV, Ops.MOD) and u.src[1].op is Ops.CONST and u.src[1].arg == c)


def check_div_mod_fold():
  from tinylit.dtype import dtypes
  from tinylit.ops import UOp
  from tinylit.symbolic import div_mod_fold
  a, b, n = UOp.variable("a", 0, 5), UOp.variable("b", 0, 7), UOp.variable("n", -4, 4)
  b8, s = UOp.variable("b8", 0, 8), UOp.variable("s", 0, 3)
  def c(v): return UOp.const(dtypes.int32, v)
  must_fold = [("(a*8 + b) // 8, b in [0, 7]", a * 8 + b, 8, False), ("(a*8 + b) % 8, b in [0, 7]", a * 8 + b, 8, True),
               ("b // 8, b in [0, 7]", b, 8, False), ("b % 8, b in [0, 7]", b, 8, True),
               ("(a*16 + s*4 + 2) // 4", a * 16 + s * 4 + 2, 4, False), ("(a*16 + s*4 + 2) % 4", a * 16 + s * 4 + 2, 4, True),
               ("(a*4 + s*2) // 6 (a common factor 2)", a * 4 + s * 2, 6, False)]
  for name, x, d, mod in must_fold:
    with case(name):
      got = div_mod_fold(x, c(d), mod)
      want = x % d if mod else x // d
      expect(got is not None, "expected a simpler expression, got None")
      same_everywhere(got, want, name.split(",")[0].split(" (")[0])
      expect(divisions(got, d) == 0, f"expected no division by {d} left, got {got}")
  for name, x, d, mod in [("(a*8 + b8) // 8, b8 in [0, 8] (b8 = 8 carries)", a * 8 + b8, 8, False),
                          ("(a*8 + b8) % 8, b8 in [0, 8]", a * 8 + b8, 8, True),
                          ("(n*8 + b) // 8, n in [-4, 4] (C divides toward zero)", n * 8 + b, 8, False),
                          ("(n*8 + b) % 8, n in [-4, 4]", n * 8 + b, 8, True), ("(a + b) // 3", a + b, 3, False),
                          ("(a*8 + b) // -8", a * 8 + b, -8, False), ("(a*8 + b) // 0", a * 8 + b, 0, False)]:
    with case(name):
      got = div_mod_fold(x, c(d), mod)
      if got is not None: same_everywhere(got, x % c(d) if mod else x // c(d), name.split(",")[0].split(" (")[0])


def check_fold_constants_and_bounds():
  from tinylit.dtype import dtypes
  from tinylit.ops import Ops, UOp
  from tinylit.symbolic import fold_by_bounds, fold_constants
  def c(v, dt=dtypes.int32): return UOp.const(dt, v)
  for name, op, dt, srcs, want in [("3 + 4", Ops.ADD, dtypes.int32, (c(3), c(4)), 7),
                                   ("-7 // 2 (C: toward zero)", Ops.IDIV, dtypes.int32, (c(-7), c(2)), -3),
                                   ("-7 % 2 (C: the sign of the dividend)", Ops.MOD, dtypes.int32, (c(-7), c(2)), -1),
                                   ("int32 2147483647 + 1 (wraps)", Ops.ADD, dtypes.int32, (c(2**31 - 1), c(1)), -2**31),
                                   ("1.5 * 2.0 (float32)", Ops.MUL, dtypes.float32, (c(1.5, dtypes.float32), c(2.0, dtypes.float32)), 3.0),
                                   ("2 < 3", Ops.CMPLT, dtypes.bool, (c(2), c(3)), True),
                                   ("cast of 2.75 to int32", Ops.CAST, dtypes.int32, (c(2.75, dtypes.float32),), 2)]:
    with case(f"fold_constants: {name}"):
      got = fold_constants(UOp(op, dt, srcs, None))
      expect(got is not None and got.op is Ops.CONST and got.arg == want and got.dtype == dt,
             f"expected the {dt} constant {want!r}, got {got}")
  a = UOp.variable("a", 0, 5)
  with case("fold_constants: a + 3 (a is a variable)"):
    expect(fold_constants(a + 3) is None, "expected None: a source is not a constant")
  with case("fold_by_bounds: a variable a in [3, 3]"):
    got = fold_by_bounds(UOp.variable("k", 3, 3))
    expect(got is not None and got.op is Ops.CONST and got.arg == 3, f"expected the constant 3, got {got}")
  with case("fold_by_bounds: a < 10 with a in [0, 5]"):
    got = fold_by_bounds(UOp(Ops.CMPLT, dtypes.bool, (a, c(10)), None))
    expect(got is not None and got.op is Ops.CONST and got.arg is True, f"expected the bool constant True, got {got}")
  with case("fold_by_bounds: a // 8 with a in [0, 5]"):
    got = fold_by_bounds(UOp(Ops.IDIV, dtypes.int32, (a, c(8)), None))
    expect(got is not None and got.op is Ops.CONST and got.arg == 0, f"expected the constant 0, got {got}")
  with case("fold_by_bounds: a + 1 with a in [0, 5]"):
    got = fold_by_bounds(a + 1)
    expect(got is None, f"expected None (a + 1 can be 1 to 6), got {got}")
  with case("fold_by_bounds: a float x * 0.0"):
    x = UOp(Ops.DEFINE_VAR, dtypes.float32, (), ("x", 0, 1))
    expect(fold_by_bounds(UOp(Ops.MUL, dtypes.float32, (x, c(0.0, dtypes.float32)), None)) is None,
           "expected None: bounds are for integers and bools (a float could be NaN)")


TASKS = [
  Task("05a.1", "write div_mod_fold: x // c or x % c (mod) for x >= 0 and a constant c > 0, written without the "
       "division where chapter 5a's reasoning allows: split x into terms with coefficients (split_add, "
       "term_coefficient), divide each coefficient by c, and if what is left is always in [0, c) the quotient and "
       "remainder are the two sums (build_sum); x.vmax < c is the trivial case; a factor common to c and every "
       "coefficient divides out. Return None when no rule applies (x may be negative, or c <= 0).",
       "(a*8 + b) // 8 is a exactly when 0 <= b < 8: check the remainder's vmin and vmax, not just its terms.",
       check_div_mod_fold),
  Task("05a.2", "write fold_constants and fold_by_bounds, the two rules that end most rewrites. fold_constants: an ALU op "
       "or CAST whose sources are all constants becomes one constant, computed by chapter 3's exec_alu (C's "
       "semantics, the node's dtype). fold_by_bounds: an integer or bool node (not already a constant) whose vmin and "
       "vmax agree is that constant. Both return None otherwise.",
       "UOp.const(x.dtype, value) and x.const_like(value) make constants; floats have no bounds here.",
       check_fold_constants_and_bounds),
]
