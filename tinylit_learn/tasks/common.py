"Helpers the chapters' checks share. Imported inside checks only: it imports the learner's tinylit."
from __future__ import annotations

import numpy as np

from tinylit_learn.tasks import Fail


def numpy_node_class():
  """A stand-in for LazyBuffer that computes at once with numpy (float64): chapter 3's MathTrait gives it every
  operator from `alu` and `const_like`, as it gives them to LazyBuffer. A Function's forward and backward run on it
  alone, so a check of chapter 1's math needs nothing of the compiler below."""
  from tinylit.dtype import dtypes
  from tinylit.ops import MathTrait, Ops
  unary = {Ops.NEG: np.negative, Ops.RECIP: lambda a: 1 / a, Ops.SQRT: np.sqrt, Ops.EXP2: np.exp2, Ops.LOG2: np.log2,
           Ops.SIN: np.sin}
  binary = {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.FDIV: np.divide, Ops.MAX: np.maximum, Ops.CMPLT: np.less,
            Ops.CMPNE: np.not_equal}

  class Node(MathTrait):
    def __init__(self, value):
      self.v = np.asarray(value, dtype=None if np.asarray(value).dtype == bool else np.float64)
      self.dtype = dtypes.bool if self.v.dtype == bool else dtypes.float32
    def const_like(self, b): return Node(np.full(self.v.shape, b, dtype=bool if isinstance(b, bool) else np.float64))
    def alu(self, op, *src):
      with np.errstate(all="ignore"):
        vals = [self.v, *[s.v for s in src]]
        if op in unary: return Node(unary[op](*vals))
        if op in binary: return Node(binary[op](*vals))
        if op is Ops.WHERE: return Node(np.where(*vals))
      raise Fail(f"the stand-in for LazyBuffer has no {op}: use the operators chapter 1 used")
    def __repr__(self): return f"Node({self.v.tolist()})"
  return Node


class Needs:
  "A stand-in for a Tensor handed to `Function(device, *tensors)`: only whether it needs a gradient."
  def __init__(self, requires_grad: bool): self.requires_grad = requires_grad


def close(got, want, rtol=1e-6) -> bool:
  got, want = np.asarray(getattr(got, "v", got), dtype=np.float64), np.asarray(want, dtype=np.float64)
  return got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=1e-12, equal_nan=True))


def show(x) -> str:
  return str(np.round(np.asarray(getattr(x, "v", x), dtype=np.float64), 6).tolist()) if x is not None else "None"
