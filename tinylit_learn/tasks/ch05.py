"Chapter 5, the pattern matcher (nbs/05_pattern.ipynb): `UPat.match` and `graph_rewrite`."
from tinylit_learn.tasks import Task, case, expect


def _leaves():
  from tinylit.dtype import dtypes
  from tinylit.ops import UOp, Ops
  a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 10)
  add = lambda x, y: UOp(Ops.ADD, dtypes.int32, (x, y), None)   # built by hand: no simplification on the way
  return a, b, add


def check_match():
  from tinylit.dtype import dtypes
  from tinylit.ops import UOp, Ops
  from tinylit.pattern import UPat
  a, b, add = _leaves()
  three = UOp.const(dtypes.int32, 3)
  with case("UPat(Ops.MUL) against an ADD"):
    expect(UPat(Ops.MUL).match(add(a, b), {}) == [], "should not match (the op differs): expected []")
  with case("UPat(Ops.ADD, name='x') against a+b"):
    got = UPat(Ops.ADD, name="x").match(add(a, b), {})
    expect(got == [{"x": add(a, b)}], f"expected [{{'x': a+b}}], got {got}")
  with case("UPat(dtype=dtypes.float32) against an int32 node"):
    expect(UPat(dtype=dtypes.float32).match(a, {}) == [], "should not match (the dtype differs): expected []")
  with case("UPat.cvar('c', ...) with arg=3 against the constant 3 and the constant 4"):
    expect(len(UPat(Ops.CONST, arg=3).match(three, {})) == 1, "the constant 3 should match arg=3")
    expect(UPat(Ops.CONST, arg=3).match(UOp.const(dtypes.int32, 4), {}) == [], "the constant 4 should not match arg=3")
  with case("arg=True against the constant 1 (True == 1 in Python, but they are different args)"):
    expect(UPat(Ops.CONST, arg=True).match(UOp.const(dtypes.int32, 1), {}) == [], "should not match: compare the arg's type too")
  with case("sources in order: UPat(Ops.ADD, src=(UPat(name='x'), UPat(Ops.CONST, name='c'))) against a+3 and 3+a"):
    pat = UPat(Ops.ADD, src=(UPat(name="x"), UPat(Ops.CONST, name="c")))
    got = pat.match(add(a, three), {})
    expect(got == [{"x": a, "c": three}], f"against a+3 expected [{{'x': a, 'c': 3}}], got {got}")
    expect(pat.match(add(three, a), {}) == [], "against 3+a expected [] (a tuple of sources matches in order only)")
  with case("a name used twice must bind the same node: UPat(Ops.ADD, src=(UPat(name='x'), UPat(name='x')))"):
    pat = UPat(Ops.ADD, src=(UPat(name="x"), UPat(name="x")))
    expect(pat.match(add(a, b), {}) == [], "against a+b expected [] (x can't be both a and b)")
    expect(pat.match(add(a, a), {}) == [{"x": a}], "against a+a expected [{'x': a}]")
  with case("a list of sources matches in any order: UPat(Ops.ADD, src=[UPat(Ops.CONST, name='c'), UPat(name='x')])"):
    pat = UPat(Ops.ADD, src=[UPat(Ops.CONST, name="c"), UPat(name="x")])
    got = pat.match(add(a, three), {})
    expect({"x": a, "c": three} in got, f"against a+3 expected a match with x=a, c=3, got {got}")
    both = pat.match(add(a, b), {})
    expect(both == [], f"against a+b expected [] (neither source is a constant), got {both}")
    ab = UPat(Ops.ADD, src=[UPat(name="x"), UPat(name="y")]).match(add(a, b), {})
    expect(len(ab) == 2, f"src=[UPat(name='x'), UPat(name='y')] against a+b: expected both ways (2 matches), got {len(ab)}")
  with case("the number of sources: UPat(Ops.ADD, src=(UPat(),)) against a+b"):
    expect(UPat(Ops.ADD, src=(UPat(),)).match(add(a, b), {}) == [], "one source pattern, two sources: expected []")
    got = UPat(Ops.ADD, src=(UPat(name="x"),), allow_any_len=True).match(add(a, b), {})
    expect(got == [{"x": a}], f"with allow_any_len=True expected [{{'x': a}}], got {got}")
  with case("a binding from the caller: store={'x': b}, pattern UPat(name='x') against a"):
    expect(UPat(name="x").match(a, {"x": b}) == [], "x is already bound to b: expected []")


class CountingRules:
  "A stand-in for a PatternMatcher: `rewrite` turns each `a` into `b` (and `b` into `c`), and counts its calls."
  def __init__(self, rules):
    self.rules, self.calls = rules, []
  def rewrite(self, u, ctx=None):
    self.calls.append(u)
    return self.rules.get(u)


def check_graph_rewrite():
  from tinylit.ops import UOp
  from tinylit.pattern import graph_rewrite
  a, b, add = _leaves()
  c = UOp.variable("c", 0, 10)
  with case("no rule fires: graph_rewrite(a+b) with rules that never match"):
    got = graph_rewrite(add(a, b), CountingRules({}))
    expect(got is add(a, b), f"expected the same graph back, got {got}")
  with case("a rule on a source: rules {a: c}, graph a+b"):
    got = graph_rewrite(add(a, b), CountingRules({a: c}))
    expect(got is add(c, b), f"expected c+b (the parent rebuilt on its new source), got {got}")
  with case("a rewrite's result is rewritten again: rules {a: b, b: c}, graph a"):
    got = graph_rewrite(a, CountingRules({a: b, b: c}))
    expect(got is c, f"expected c (a -> b -> c, until no rule fires), got {got}")
  with case("sources first: rules {a: c, c+b: a}, graph a+b"):
    got = graph_rewrite(add(a, b), CountingRules({a: c, add(c, b): a}))
    expect(got is c, f"expected c (a+b -> c+b -> a -> c), got {got}")
  with case("a shared node is rewritten once: (a+b)+(a+b)"):
    ab = add(a, b)
    rules = CountingRules({})
    graph_rewrite(add(ab, ab), rules)
    n = rules.calls.count(ab)
    expect(n == 1, f"pm.rewrite was asked about a+b {n} times: expected once (remember what each node became)")
  with case("a deep graph: 50 nested additions"):
    x = a
    for _ in range(50): x = add(x, b)
    got = graph_rewrite(x, CountingRules({b: c}))
    expect(got.src[1] is c and got.src[0].src[1] is c, "expected every b to become c")
  with case("the context reaches the rules: graph_rewrite(a, rules, ctx='mine')"):
    seen = []
    class Ctx:
      def rewrite(self, u, ctx=None): seen.append(ctx)
    graph_rewrite(a, Ctx(), ctx="mine")
    expect(seen and all(s == "mine" for s in seen), f"pm.rewrite got ctx={seen[:1]}, expected 'mine'")


TASKS = [
  Task("05.1", "write UPat.match: every way `uop` matches this pattern, as a list of dicts of bound names ([] for none). "
       "Check op, dtype and arg (the arg's type too), bind `name` (a name bound before must be the same node), then "
       "match the sources in each of `self.orders` (the constructor made them: a tuple's one order, every "
       "permutation of a list), their count unless allow_any_len. Chapter 5 built UPat's fields; chapter 3 made "
       "UOps hash-consed, so `is` compares nodes.",
       "carry a list of partial stores through the sources: each source pattern turns every store into its matches.",
       check_match),
  Task("05.2", "write graph_rewrite: rewrite the graph under `sink` bottom-up with pm.rewrite(node, ctx), sources "
       "first, rebuilding a node whose sources changed (UOp.replace(src=...)), and rewriting each result again until "
       "no rule fires. Each node is rewritten once: keep a memo of what it became.",
       "a nested function rewrite(u) with a dict memo; when pm.rewrite returns a UOp, the answer is rewrite(that).",
       check_graph_rewrite),
]
