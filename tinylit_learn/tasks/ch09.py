"Chapter 9, the JIT (nbs/09_jit.ipynb): what a jitted function returns, found at capture and rebuilt at each replay."
from collections import namedtuple

from tinylit_learn.tasks import Task, case, expect


class Holder:
  "An object that holds tensors in its attributes, as a model or an optimizer does."
  def __init__(self, **kw): self.__dict__.update(kw)


def check_returned_tensors():
  from tinylit import Tensor
  from tinylit.jit import _returned_tensors
  a, b, c = Tensor(1.0), Tensor(2.0), Tensor(3.0)   # constants: no memory, no kernel (other tasks stay out of it)
  def ids(ts): return [id(t) for t in ts]
  with case("one tensor"):
    expect(ids(_returned_tensors(a)) == [id(a)], "expected [a]")
  with case("nothing that is a tensor: None, 3, 'text', []"):
    for ret in (None, 3, "text", [], {}, ()):
      expect(_returned_tensors(ret) == [], f"expected [] for {ret!r}")
  with case("a dict of a list and a tuple: {'x': [a, (b, 3)], 'y': c}"):
    got = _returned_tensors({"x": [a, (b, 3)], "y": c})
    expect(ids(got) == [id(a), id(b), id(c)], f"expected [a, b, c] in that order, got {len(got)} tensors")
  with case("the same tensor returned twice: (a, [a, b])"):
    got = _returned_tensors((a, [a, b]))
    expect(ids(got) == [id(a), id(b)], f"expected each tensor once, [a, b], got {len(got)} tensors")
  with case("an object's attributes: a model holding a and a list [b, c]"):
    got = _returned_tensors(Holder(weight=a, layers=[b, c], name="m"))
    expect(ids(got) == [id(a), id(b), id(c)], f"expected [a, b, c], got {len(got)} tensors")
  with case("a list that holds itself"):
    loop = [a]
    loop.append(loop)
    expect(ids(_returned_tensors(loop)) == [id(a)], "expected [a] (and no endless recursion)")


def check_map_tensors():
  from tinylit import Tensor
  from tinylit.jit import _map_tensors
  a, b = Tensor(1.0), Tensor(2.0)   # constants: no memory, no kernel (other tasks stay out of it)
  names, calls = {id(a): 1.0, id(b): 2.0}, []
  def fn(t):
    calls.append(t)
    return ("new", names[id(t)])
  with case("one tensor"):
    expect(_map_tensors(a, fn) == ("new", 1.0), "expected fn(a)")
  with case("a dict of a list and a tuple: {'x': [a, (b, 3)], 'y': 'text'}"):
    ret = {"x": [a, (b, 3)], "y": "text"}
    got = _map_tensors(ret, fn)
    expect(got == {"x": [("new", 1.0), (("new", 2.0), 3)], "y": "text"}, f"got {got!r}")
    expect(ret["x"][0] is a and ret["x"][1][0] is b, "the function's own container must not change: build new ones")
    expect(type(got["x"]) is list and type(got["x"][1]) is tuple, "lists stay lists and tuples stay tuples")
  with case("a namedtuple"):
    Pair = namedtuple("Pair", "loss out")
    got = _map_tensors(Pair(a, b), fn)
    expect(isinstance(got, Pair) and got.loss == ("new", 1.0) and got.out == ("new", 2.0), f"expected a Pair, got {got!r}")
  with case("the same tensor returned twice: [a, {'again': a}]"):
    calls.clear()
    got = _map_tensors([a, {"again": a}], lambda t: calls.append(t) or object())
    expect(len(calls) == 1 and got[0] is got[1]["again"], "expected fn called once, its one result in both places")
  with case("another object: returned as it is"):
    h = Holder(weight=a)
    expect(_map_tensors(h, fn) is h, "expected the same object back")
  with case("a TinyJit replay returns the structure with this call's values"):
    from tinylit import TinyJit
    def f(x):
      double = x * 2
      return {"double": [double], "pair": (x + 1, double)}
    step = TinyJit(f)
    for i in range(4):
      out = step(Tensor([float(i)]))
    expect(out["double"][0].numpy().tolist() == [6.0] and out["pair"][0].numpy().tolist() == [4.0],
           f"the fourth call (x = 3) returned {out['double'][0].numpy().tolist()} and {out['pair'][0].numpy().tolist()}")
    expect(out["double"][0] is out["pair"][1], "a tensor returned twice must be one tensor on a replay too")


TASKS = [
  Task("09.1", "write _returned_tensors(ret): the Tensors in what a jitted function returned, each once, in the order "
       "met: in dicts (their values), lists and tuples at any depth, and in other objects' attributes (vars(obj)), the "
       "places tinygrad's get_parameters looks. The capture realizes them (chapter 9: whatever the function returns is "
       "computed inside the recording).",
       "keep a set of the ids already seen, passed down the recursion: it makes each tensor count once and stops a "
       "container that holds itself.", check_returned_tensors),
  Task("09.2", "write _map_tensors(ret, fn): ret with fn(t) in place of every Tensor t, rebuilding dicts, lists and "
       "tuples (namedtuples with their _make) around the new values without changing the originals; any other object "
       "comes back as it is. A replay uses it to hand back the capture's structure with this call's tensors (chapter 9).",
       "a dict `done` from id(t) to fn(t), passed down: a tensor returned twice becomes one new tensor; copy.copy keeps "
       "a dict's or a list's own type.", check_map_tensors),
]
