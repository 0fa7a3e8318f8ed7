"""A seeded differential fuzzer for tinylit: random tensor programs, run on a device, checked against numpy
(values and dtypes, with tinylit's = tinygrad v0.10's dtype rules) and torch (gradients).

How it fits together
- `generate(seed, index, caps)` makes a `Program`: numpy input arrays and a list of `Step`s, each one line of
  tinylit code (`v3 = v1.maximum(v2)`). The same program always comes from the same (seed, index).
- `reference(program)` runs the steps on `RefVal`s: a numpy array in the exact dtype tinylit promises, plus an
  error bound per element. Operations that IEEE rounds correctly (+ - * / sqrt, casts, comparisons, max/min,
  selects, integer math) must match bit for bit when their inputs do; transcendental functions and sums get a
  bound (a few ulp, a backward error, summation order); and where the bound makes a discontinuous result
  uncertain (floor of a value 1 ulp from an integer, a comparison of two close approximate values, a float cast
  out of an integer type's range) the element is "don't care" (bound = inf) from there on.
- A `Worker` is a child process that runs programs with tinylit (and torch for gradients) and reports back,
  so a crash of the process (SIGSEGV, SIGILL, SIGFPE, an abort from a sanitizer) becomes one failure.
- `minimize` shrinks a failing program (outputs, steps, inputs, values) while it still fails the same way;
  `Failure.repro()` prints it as a standalone snippet.

pytest entry: tests/test_fuzz.py. At the desk: `python tests/fuzz.py --device CPU -n 2000 --seed 7`.
"""
from __future__ import annotations

import argparse, itertools, math, os, pickle, re, select, struct, subprocess, sys, tempfile, time, traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

# ---------------------------------------------------------------------------------------------------------------
# dtypes: names, the promotion lattice (tinygrad's, written out here so the oracle doesn't trust the library)

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64"]
FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
NP = {d: np.dtype(d) for d in DTYPES}
U = {"float16": 2.0 ** -11, "float32": 2.0 ** -24, "float64": 2.0 ** -53}  # unit roundoff
MANT = {"float16": 11, "float32": 24, "float64": 53}
FMAX = {d: float(np.finfo(d).max) for d in FLOATS}
_EDGES = {"bool": ["int8", "uint8"], "int8": ["int16"], "int16": ["int32"], "int32": ["int64"], "int64": ["float16"],
          "uint8": ["int16", "uint16"], "uint16": ["int32", "uint32"], "uint32": ["int64", "uint64"],
          "uint64": ["float16"], "float16": ["float32"], "float32": ["float64"], "float64": []}


def _upper(d: str) -> set[str]: return {d}.union(*[_upper(x) for x in _EDGES[d]])
def lub(*ds: str) -> str: return min(set.intersection(*[_upper(d) for d in ds]), key=DTYPES.index)
def lub_float(d: str) -> str: return d if d in FLOATS else lub(d, "float32")
def is_float(d: str) -> bool: return d in FLOATS
def is_int(d: str) -> bool: return d in INTS


def sum_acc(d: str) -> str:
  "What tinylit's sum accumulates in: at least int32 (uint32 for unsigned) for ints and bools, float32 for floats."
  if d in UNSIGNED: return lub(d, "uint32")
  if d in INTS or d == "bool": return lub(d, "int32")
  return lub(d, "float32")


def from_py(x) -> str:
  if isinstance(x, bool): return "bool"
  if isinstance(x, int):   # the smallest of int32, int64, uint64 that holds it (tinylit's dtypes.from_py, numpy's rule)
    return next(d for d, lo, hi in (("int32", -2**31, 2**31 - 1), ("int64", -2**63, 2**63 - 1), ("uint64", 0, 2**64 - 1))
                if lo <= x <= hi)
  return "float32"


def as_const(x, d: str):
  "A Python scalar as a constant of dtype d holds it (ints wrap like C)."
  if is_float(d): return float(x)
  if d == "bool": return bool(x)
  return int(np.array(int(x)).astype(NP[d]))


class Invalid(Exception):
  "The generator asked for something tinylit doesn't define (an empty max, a bad reshape): pick another op."

# ---------------------------------------------------------------------------------------------------------------
# reference values: a numpy array in the exact dtype and an absolute error bound per element (inf: don't care)


class RefVal:
  """`huge`, where set: the elements that are products of finite factors that rounded to infinity. A sum may fuse such
  a product into its add (one FMA, chapter 7's ClangRenderer), which does not round it: -inf + 3e38 * 3 is then -inf,
  not nan. Kept through movement and negation, the ops tinylit fuses between a product and its sum."""
  __slots__ = ("v", "e", "huge")

  def __init__(self, v, e=None, huge=None):
    self.v = np.asarray(v)
    self.e = np.zeros(self.v.shape) if e is None else np.array(np.broadcast_to(e, self.v.shape), dtype=np.float64)
    self.huge = huge

  @property
  def dtype(self) -> str: return self.v.dtype.name
  @property
  def shape(self) -> tuple[int, ...]: return self.v.shape
  @property
  def f(self) -> np.ndarray: return self.v.astype(np.float64)
  def exact(self) -> bool: return not self.e.any()
  def __repr__(self): return f"RefVal({self.dtype}{list(self.shape)}, {self.v!r}, err={self.e!r})"


def ulp(v: np.ndarray) -> np.ndarray:
  "The spacing of floats at each value, as float64 (0 for ints and non-finite values)."
  if v.dtype.kind != "f": return np.zeros(v.shape)
  with np.errstate(all="ignore"): s = np.spacing(np.abs(v)).astype(np.float64)
  return np.where(np.isfinite(s), s, 0.0)


def settle(v: np.ndarray, e) -> RefVal:
  "A result and its bound; non-finite or overflowing results of uncertain computations become don't care."
  v = np.asarray(v)
  e = np.array(np.broadcast_to(e, v.shape), dtype=np.float64)
  e = np.where(np.isnan(e), np.inf, e)
  if v.dtype.kind == "f":
    f = v.astype(np.float64)
    e = np.where((e > 0) & (~np.isfinite(f) | (np.abs(f) + e >= FMAX[v.dtype.name])), np.inf, e)
  else: e = np.where(e > 0, np.inf, 0.0)
  return RefVal(v, e)


def _box(f: Callable, xs: list[np.ndarray], es: list[np.ndarray]):
  "f (monotone in each argument) over the corners of the box xs ± es, in float64: lo, hi, all-nan, any-nan."
  outs = []
  for signs in itertools.product((-1.0, 1.0), repeat=len(xs)):
    outs.append(f(*[np.where(e > 0, x + s * e, x) for x, e, s in zip(xs, es, signs)]))
  c = np.stack(np.broadcast_arrays(*outs))
  isn = np.isnan(c)
  return np.where(isn, np.inf, c).min(0), np.where(isn, -np.inf, c).max(0), isn.all(0), isn.any(0)


def bounded(out: np.ndarray, f: Callable, xs: list[np.ndarray], es: list[np.ndarray], exact_op: bool,
            slack=0.0) -> RefVal:
  """The bound of `out` = op(xs) computed in out's dtype, where f is the op in float64 (monotone in each argument
  over the box). exact_op: IEEE rounds the op correctly, so exact inputs give an exact result."""
  with np.errstate(all="ignore"):
    o = out.astype(np.float64)
    lo, hi, alln, anyn = _box(f, xs, es)
    spread = np.maximum(hi - o, o - lo)
    dt = out.dtype.name
    certain = (alln & np.isnan(o)) | ((lo == hi) & ~np.isfinite(lo) & (o == lo))
    certain |= ((o == np.inf) & (lo > FMAX[dt] * (1 + 2 * U[dt]))) | ((o == -np.inf) & (hi < -FMAX[dt] * (1 + 2 * U[dt])))
    certain &= ~np.any(np.stack(np.broadcast_arrays(*[np.isinf(e) for e in es])), 0)   # a don't care input stays so
    err = np.where(anyn | np.isnan(spread), np.inf, spread + ulp(out)) + slack
    if exact_op:
      inexact_in = np.broadcast_to(np.any(np.stack(np.broadcast_arrays(*[e > 0 for e in es])), 0), o.shape)
      err = np.where(inexact_in, err, 0.0)
    return settle(out, np.where(certain, 0.0, err))


# ---- casts and promotion

def r_cast(x: RefVal, d: str) -> RefVal:
  if x.dtype == d: return x
  with np.errstate(all="ignore"):
    if x.dtype in FLOATS and d in FLOATS:
      out = x.v.astype(NP[d])
      return settle(out, np.where(x.e > 0, x.e + ulp(out), 0.0))
    if x.dtype in FLOATS:  # to an int or bool: C truncates; out of range (or nan) is undefined there: don't care
      f, e = x.f, x.e
      if d == "bool":
        sure = (e == 0) | (np.abs(f) > e)
        return RefVal(f != 0, np.where(sure, 0.0, np.inf))
      lo, hi = np.trunc(np.where(e > 0, f - e, f)), np.trunc(np.where(e > 0, f + e, f))
      info = np.iinfo(NP[d])
      ok = np.isfinite(f) & (lo == hi) & (lo >= info.min) & (hi <= info.max)
      out = np.where(ok, np.trunc(np.where(np.isfinite(f), f, 0)), 0).astype(np.int64 if d != "uint64" else np.uint64)
      return RefVal(out.astype(NP[d]), np.where(ok, 0.0, np.inf))
    # from ints and bools: wrap (ints), != 0 (bool), correctly rounded (floats)
    out = x.v != 0 if d == "bool" else x.v.astype(NP[d])
    return RefVal(out, np.where(x.e > 0, np.inf, 0.0))


def r_scalar_like(x: RefVal, y) -> RefVal:
  "A Python scalar next to tensor x is weakly typed: it takes x's dtype where that holds it (tinygrad's rule)."
  d = x.dtype if is_float(x.dtype) or (is_int(x.dtype) and isinstance(y, int)) else from_py(y)
  return RefVal(np.array(as_const(y, d), dtype=NP[d]))


def _prep(a, b, match_dtype=True) -> tuple[RefVal, RefVal]:
  "Both operands as RefVals of one dtype (the lattice) and one shape (numpy broadcasting), like Tensor._broadcasted."
  if not isinstance(a, RefVal): a = r_scalar_like(b, a)
  if not isinstance(b, RefVal): b = r_scalar_like(a, b)
  if match_dtype and a.dtype != b.dtype:
    d = lub(a.dtype, b.dtype)
    a, b = r_cast(a, d), r_cast(b, d)
  try: shape = np.broadcast_shapes(a.shape, b.shape)
  except ValueError: raise Invalid(f"shapes {a.shape} {b.shape}") from None
  return (RefVal(np.broadcast_to(a.v, shape), np.broadcast_to(a.e, shape)),
          RefVal(np.broadcast_to(b.v, shape), np.broadcast_to(b.e, shape)))


def _int_result(out, *xs: RefVal) -> RefVal:
  return RefVal(out, np.where(np.any(np.stack(np.broadcast_arrays(*[x.e > 0 for x in xs])), 0), np.inf, 0.0))


# ---- elementwise



def r_arith(op: str, a, b) -> RefVal:
  a, b = _prep(a, b)
  if op == "sub" and a.dtype == "bool": raise Invalid("bool sub")
  if op == "div":
    d = lub_float(a.dtype)
    a, b = r_cast(a, d), r_cast(b, d)
  fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
  if a.dtype == "bool": fn = {"add": np.logical_or, "mul": np.logical_and}[op]
  with np.errstate(all="ignore"):
    out = fn(a.v, b.v)
    if not is_float(out.dtype.name): return _int_result(out, a, b)
    fa, fb, ea, eb = a.f, b.f, a.e, b.e
    if op == "div":
      r = bounded(out, np.divide, [fa, fb], [ea, eb], exact_op=True)
      crosses = (eb > 0) & (fb - eb <= 0) & (fb + eb >= 0)
      # x / ±0 is ±inf by the sign of the zero, which the reference doesn't promise (0 + -0.0 is +0.0, a
      # one-element sum may keep -0.0): either infinity is accepted
      signed_zero = (fb == 0) & (fa != 0) & ~np.isnan(fa)
      return RefVal(r.v, np.where(crosses | signed_zero, np.inf, r.e))
    r = bounded(out, fn, [fa, fb], [ea, eb], exact_op=True)
    if op == "mul" and (huge := np.isfinite(fa) & np.isfinite(fb) & np.isinf(r.v)).any(): r.huge = huge
    return r


def r_minmax(op: str, a, b) -> RefVal:
  a, b = _prep(a, b)
  if a.dtype == "bool": return _int_result((np.logical_or if op == "maximum" else np.logical_and)(a.v, b.v), a, b)
  fn = np.maximum if op == "maximum" else np.minimum
  out = fn(a.v, b.v)  # numpy propagates nan, as torch does: the rule tinylit follows
  if not is_float(a.dtype): return _int_result(out, a, b)
  return bounded(out, fn, [a.f, b.f], [a.e, b.e], exact_op=True)


def r_cmp(op: str, a, b) -> RefVal:
  a, b = _prep(a, b)
  fn = {"lt": np.less, "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal, "eq": np.equal,
        "ne": np.not_equal}[op]
  out = fn(a.v, b.v)
  if not is_float(a.dtype): return _int_result(out, a, b)
  fa, fb, ea, eb = a.f, b.f, a.e, b.e
  with np.errstate(all="ignore"):
    sure = ((ea == 0) & (eb == 0)) | (np.isnan(fa) & (ea == 0)) | (np.isnan(fb) & (eb == 0))
    if op in ("eq", "ne"): sure |= np.abs(fa - fb) > ea + eb
    else: sure |= ((fa + ea) < (fb - eb)) | ((fa - ea) > (fb + eb))
  return RefVal(out, np.where(sure, 0.0, np.inf))


def r_bitwise(op: str, a, b) -> RefVal:
  a, b = _prep(a, b)
  if not (is_int(a.dtype) or a.dtype == "bool"): raise Invalid("bitwise on floats")
  fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
  return _int_result(fn(a.v, b.v), a, b)


def r_shift(op: str, a: RefVal, k: int) -> RefVal:
  if not is_int(a.dtype): raise Invalid("shift of non-int")
  kk = np.array(k, dtype=a.v.dtype)
  return _int_result((np.left_shift if op == "lshift" else np.right_shift)(a.v, kk), a)


def r_intdiv(op: str, a, b) -> RefVal:
  "idiv (C's truncation), floordiv and mod (Python's), on ints: x // 0 and x % 0 are 0, INT_MIN // -1 wraps."
  a, b = _prep(a, b)
  if is_float(a.dtype):
    if op == "idiv": raise Invalid("idiv of floats")
    q = r_unary("floor", r_arith("div", a, b))
    return q if op == "floordiv" else r_arith("sub", a, r_arith("mul", b, q))
  if not is_int(a.dtype): raise Invalid(f"{op} of {a.dtype}")
  with np.errstate(all="ignore"):
    fl, rem = np.floor_divide(a.v, b.v), np.remainder(a.v, b.v)
    if op == "mod": out = rem
    elif op == "floordiv": out = fl
    else:  # truncate toward zero: one more than floor where the signs differ and it doesn't divide evenly
      fix = (rem != 0) & ((a.v < 0) != (b.v < 0))
      out = np.where(fix, fl + np.ones((), a.v.dtype), fl).astype(a.v.dtype)
  return _int_result(np.where(b.v == 0, np.zeros((), a.v.dtype), out), a, b)


def r_where(c, x, y) -> RefVal:
  if not isinstance(x, RefVal) and not isinstance(y, RefVal):
    if c.dtype != "bool": raise Invalid("where with two scalars and a non-bool condition")  # tinylit != v0.10 here
    x = RefVal(np.array(as_const(x, from_py(x)), dtype=NP[from_py(x)]))
  x, y = _prep(x, y)
  c = r_cast(c, "bool")
  try: shape = np.broadcast_shapes(c.shape, x.shape)
  except ValueError: raise Invalid("where shapes") from None
  cv, ce = np.broadcast_to(c.v, shape), np.broadcast_to(c.e, shape)
  xv, xe, yv, ye = (np.broadcast_to(t, shape) for t in (x.v, x.e, y.v, y.e))
  return settle(np.where(cv, xv, yv), np.where(ce > 0, np.inf, np.where(cv, xe, ye)))


# unary float functions: (float64 function, backward error in units of u, ulps of output error, absolute error in u)
TRANSCENDENTAL = {
  "exp": (np.exp, 4, 4, 0), "exp2": (np.exp2, 4, 4, 0), "log": (np.log, 2, 4, 0), "log2": (np.log2, 2, 6, 0),
  "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), 4, 4, 0), "tanh": (np.tanh, 4, 4, 8),
  "sin": (np.sin, 4, 4, 4), "cos": (np.cos, 4, 4, 4)}


def r_unary(op: str, x: RefVal) -> RefVal:
  d = x.dtype
  with np.errstate(all="ignore"):
    if op == "neg":
      if d == "bool": return RefVal(np.logical_not(x.v), x.e)
      return RefVal(np.negative(x.v), x.e, x.huge)
    if op == "bitwise_not":
      if d == "bool": return RefVal(np.logical_not(x.v), x.e)
      if not is_int(d): raise Invalid("~ of a float")
      return RefVal(np.invert(x.v), x.e)
    if op == "abs":
      if d == "bool": raise Invalid("abs of bool")
      return RefVal(np.abs(x.v), x.e)
    if op == "relu":
      if d == "bool": raise Invalid("relu of bool")
      if not is_float(d): return RefVal(np.maximum(x.v, np.zeros((), x.v.dtype)), x.e)
      return r_minmax("maximum", x, 0.0)  # nan stays nan (torch's rule)
    if op == "sign":
      if d == "bool": raise Invalid("sign of bool")
      if not is_float(d): return RefVal(np.sign(x.v).astype(x.v.dtype), x.e)
      return bounded(np.sign(x.v), np.sign, [x.f], [x.e], exact_op=True)  # sign(nan) is nan
    if op in ("floor", "ceil", "round", "trunc"):
      if not is_float(d): return x
      fn = {"floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc}[op]
      f, e = x.f, x.e
      sure = (e == 0) | (fn(f - e) == fn(f + e))
      return settle(fn(x.v), np.where(sure, 0.0, np.inf))
    if op == "square": return r_arith("mul", x, x)
    if op == "reciprocal": return r_arith("div", 1.0, r_cast(x, lub_float(d)))
    x = r_cast(x, lub_float(d))
    out_fn = {"sqrt": np.sqrt, **{k: v[0] for k, v in TRANSCENDENTAL.items()}}[op]
    out = out_fn(x.v).astype(x.v.dtype)  # numpy computes float16 math in float32 and rounds once
    f, e = x.f, x.e
    if op == "sqrt":
      r = bounded(out, np.sqrt, [f], [e], exact_op=True)
      return RefVal(r.v, np.where(np.isinf(e) | ((e > 0) & (f - e <= 0) & (f + e >= 0)), np.inf, r.e))   # don't care stays so
    fn, back, ulps, absu = TRANSCENDENTAL[op]
    u = U[x.dtype]
    scale = np.abs(f) + (2.0 if op == "cos" else 0.0)  # cos(x) is computed as sin(pi/2 - x)
    widened = np.where(np.isfinite(f), e + back * u * scale, e)
    slack = ulps * ulp(out) + absu * u
    if op in ("sin", "cos"):
      r = bounded(out, fn, [f], [np.zeros_like(f)], exact_op=False, slack=slack)
      lip = np.where(np.isfinite(f), np.minimum(widened, 2.0), 0.0)
      return settle(r.v, np.where(r.e == 0, 0.0, r.e + lip))
    r = bounded(out, fn, [f], [widened], exact_op=False, slack=slack)
    if op in ("log", "log2"):  # an uncertain value near 0 may be on either side of log's domain
      return RefVal(r.v, np.where((e > 0) & (f - widened <= 0), np.inf, r.e))
    return r


def r_pow(x, p) -> RefVal:
  "x ** p with a scalar exponent, or p ** x (x a tensor): the math function, within tinylit's exp/log error."
  if isinstance(x, RefVal):
    if is_int(x.dtype):
      if p not in (2, 3): raise Invalid("int pow")
      return r_arith("mul", x, x) if p == 2 else r_arith("mul", r_arith("mul", x, x), x)
    base, expo = r_cast(x, lub_float(x.dtype)), r_scalar_like(r_cast(x, lub_float(x.dtype)), p)
  else:
    expo = r_cast(p, lub_float(p.dtype))
    base = r_scalar_like(expo, x)
  base, expo = _prep(base, expo)
  with np.errstate(all="ignore"):
    out = np.power(base.v, expo.v)
    fb, fe, eb, ee = base.f, expo.f, base.e, expo.e
    u = U[out.dtype.name]
    mag = np.abs(fe * np.log(np.abs(fb)))
    slack = np.where(np.isfinite(mag), np.abs(out.astype(np.float64)) * 4 * u * (mag + 2), 0) + 4 * ulp(out)
    r = bounded(out, np.power, [fb, fe], [eb, ee], exact_op=False, slack=slack)
    r = settle(r.v, np.where((eb > 0) & (fb - eb <= 0) & (fb + eb >= 0), np.inf, r.e))
    # exact inputs: the special cases (0 ** y, x ** 0, nan, inf) tinylit handles exactly
    special = (eb == 0) & (ee == 0) & ((fb == 0) | (fe == 0) | ~np.isfinite(fb) | ~np.isfinite(fe) | ~np.isfinite(out))
    signed_zero = (fb == 0) & (fe < 0)  # ±0 ** negative is ±inf by the sign of the zero (see r_arith's division)
    return RefVal(r.v, np.where(signed_zero, np.inf, np.where(special, 0.0, r.e)))


# ---- reductions

def _axes(shape, axis) -> tuple[int, ...]:
  if axis is None: return tuple(range(len(shape)))
  return tuple(sorted(a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))))


def _reduce_sum(x: RefVal, axes: tuple[int, ...], keepdim: bool) -> RefVal:
  "Sum in x's own dtype (the caller has cast to the accumulator); the bound covers any summation order."
  n = math.prod(x.shape[a] for a in axes)
  with np.errstate(all="ignore"):
    out = np.sum(x.v, axis=axes, keepdims=keepdim, dtype=x.v.dtype)
    if not is_float(x.dtype): return RefVal(out, np.where(np.sum(x.e, axis=axes, keepdims=keepdim) > 0, np.inf, 0.0))
    f = x.f
    fin = np.isfinite(f)
    absum = np.sum(np.where(fin, np.abs(f), 0), axis=axes, keepdims=keepdim)
    e_fin = np.sum(np.where(fin, x.e, 0), axis=axes, keepdims=keepdim)
    e_nonfin = np.sum(np.where(fin, 0, x.e), axis=axes, keepdims=keepdim)
    nonfin = np.any(~fin, axis=axes, keepdims=keepdim)
    intlike = np.all(~fin | (f == np.round(f)), axis=axes, keepdims=keepdim) & (absum <= 2.0 ** MANT[x.dtype])
    rnd = np.where(intlike | (n <= 2), 0.0, 1.01 * max(n - 1, 0) * U[x.dtype] * absum)
    # an addend that is a product may be fused into the sum's add (one FMA, chapter 7's ClangRenderer): it is then
    # not rounded, which moves it by at most u of itself
    fused = np.where(intlike, 0.0, U[x.dtype] * absum)
    e = e_fin + rnd + fused
    e = np.where(e > 0, e + ulp(out), 0.0)
    e = np.where(nonfin, np.where((e_nonfin == 0) & (absum < FMAX[x.dtype] / 4), 0.0, np.inf), e)
    if x.huge is not None: e = np.where(np.any(x.huge, axis=axes, keepdims=keepdim), np.inf, e)
  return settle(out, e)


def r_sum(x: RefVal, axis=None, keepdim=False) -> RefVal:
  axes = _axes(x.shape, axis)
  r = _reduce_sum(r_cast(x, sum_acc(x.dtype)), axes, keepdim)
  return r_cast(r, "float16") if x.dtype == "float16" else r


def r_prod(x: RefVal, axis=None, keepdim=False) -> RefVal:
  axes = _axes(x.shape, axis)
  n = math.prod(x.shape[a] for a in axes)
  with np.errstate(all="ignore"):
    # halves multiply in float32 and round once at the end (torch's rule, and tinylit's)
    out = np.prod(x.v, axis=axes, keepdims=keepdim, dtype=np.float32 if x.dtype == "float16" else x.v.dtype).astype(x.v.dtype)
    if x.dtype == "bool": out = np.all(x.v, axis=axes, keepdims=keepdim)
    if not is_float(x.dtype): return RefVal(out, np.where(np.sum(x.e, axis=axes, keepdims=keepdim) > 0, np.inf, 0.0))
    f, e = x.f, x.e
    af = np.abs(f)
    prop = np.prod(af + e, axis=axes, keepdims=keepdim) - np.prod(af, axis=axes, keepdims=keepdim)
    absprod = np.abs(out.astype(np.float64))
    intlike = np.all(f == np.round(f), axis=axes, keepdims=keepdim) & \
      (np.prod(np.maximum(af, 1), axis=axes, keepdims=keepdim) <= 2.0 ** MANT[x.dtype])
    tiny = float(np.finfo(x.dtype).smallest_subnormal) * n
    rnd = np.where(intlike | (n <= 2), 0.0, 1.01 * max(n - 1, 0) * U[x.dtype] * absprod + tiny)
    err = prop + rnd
    err = np.where(err > 0, err + ulp(out), 0.0)
    allexact = np.all(e == 0, axis=axes, keepdims=keepdim)
    nonfin = np.any(~np.isfinite(f), axis=axes, keepdims=keepdim)
    err = np.where(nonfin, np.where(allexact, 0.0, np.inf), err)
  return settle(out, err)


def r_max(x: RefVal, axis=None, keepdim=False, is_min=False) -> RefVal:
  axes = _axes(x.shape, axis)
  if any(x.shape[a] == 0 for a in axes): raise Invalid("max over an empty axis")
  fn = np.min if is_min else np.max
  out = fn(x.v, axis=axes, keepdims=keepdim)  # nan propagates
  if not is_float(x.dtype): return RefVal(out, np.where(np.sum(x.e, axis=axes, keepdims=keepdim) > 0, np.inf, 0.0))
  with np.errstate(all="ignore"):
    f, e = x.f, x.e
    lo, hi = fn(np.where(e > 0, f - e, f), axis=axes, keepdims=keepdim), fn(np.where(e > 0, f + e, f), axis=axes,
                                                                          keepdims=keepdim)
    o = out.astype(np.float64)
    spread = np.maximum(hi - o, o - lo)
    exact = np.all(e == 0, axis=axes, keepdims=keepdim)
    nan_sure = np.any(np.isnan(f) & (e == 0), axis=axes, keepdims=keepdim)
    err = np.where(exact | nan_sure, 0.0, np.where(np.isnan(spread), np.inf, spread))
  return settle(out, err)


def r_mean(x: RefVal, axis=None, keepdim=False) -> RefVal:
  out_dtype = x.dtype if is_float(x.dtype) else "float32"
  axes = _axes(x.shape, axis)
  count = math.prod(x.shape[a] for a in axes)
  total = r_sum(r_cast(x, sum_acc(x.dtype)), axis, keepdim)
  r = r_arith("div", total, count) if count else r_arith("mul", total, float("nan"))
  return r_cast(r, out_dtype)


def r_cumsum(x: RefVal, axis: int) -> RefVal:
  "Running sum: each prefix is a sum (same dtype rules as sum)."
  axis %= x.ndim if hasattr(x, "ndim") else len(x.shape)
  n = x.shape[axis]
  if n == 0: return x
  acc = r_cast(x, sum_acc(x.dtype))
  parts = []
  for i in range(n):
    sl = tuple(slice(0, i + 1) if d == axis else slice(None) for d in range(len(x.shape)))
    parts.append(_reduce_sum(RefVal(acc.v[sl], acc.e[sl]), (axis,), True))
  r = RefVal(np.concatenate([p.v for p in parts], axis), np.concatenate([p.e for p in parts], axis))
  return r_cast(r, "float16") if x.dtype == "float16" else r


def r_softmax(x: RefVal, axis: int, log=False) -> RefVal:
  if not is_float(x.dtype): raise Invalid("softmax of ints")
  if x.shape[axis] == 0: raise Invalid("softmax over an empty axis")
  m = r_arith("sub", x, r_max(x, axis, True))
  e = r_unary("exp", m)
  s = r_sum(e, axis, True)
  return r_arith("sub", m, r_unary("log", s)) if log else r_arith("div", e, s)


def r_matmul(a: RefVal, b: RefVal) -> RefVal:
  "tinylit's dot: the products in the promoted dtype, summed in sum's accumulator, cast back."
  if a.dtype == "bool" or b.dtype == "bool" or not a.shape or not b.shape: raise Invalid("matmul")
  n1, n2 = len(a.shape), len(b.shape)
  if a.shape[-1] != b.shape[-min(n2, 2)]: raise Invalid("matmul inner dims")
  x = RefVal(a.v.reshape(*a.shape[:-1], *[1] * min(n1 - 1, n2 - 1, 1), a.shape[-1]),
             a.e.reshape(*a.shape[:-1], *[1] * min(n1 - 1, n2 - 1, 1), a.shape[-1]))
  wshape = (*b.shape[:-2], *[1] * min(n1 - 1, n2 - 1, 1), *b.shape[-min(n2, 2):])
  w = RefVal(np.swapaxes(b.v.reshape(wshape), -1, -min(n2, 2)), np.swapaxes(b.e.reshape(wshape), -1, -min(n2, 2)))
  return r_cast(r_sum(r_arith("mul", x, w), -1), lub(a.dtype, b.dtype))


# ---- movement (the same numpy movement on values and bounds)

def _copy(a) -> np.ndarray: return np.array(a, copy=True, order="C")  # (ascontiguousarray makes 0-d 1-d)


def _move(x: RefVal, fn) -> RefVal:
  return RefVal(_copy(fn(x.v)), _copy(fn(x.e)), None if x.huge is None else _copy(fn(x.huge)))


def r_pad(x: RefVal, pads, value=0.0) -> RefVal:
  if any(b < 0 or a < 0 for b, a in pads): raise Invalid("negative pad")
  fill = np.array(as_const(value, x.dtype), dtype=x.v.dtype)
  return RefVal(np.pad(x.v, pads, constant_values=fill), np.pad(x.e, pads))


def r_getitem(x: RefVal, index: tuple, tensors: list[RefVal]) -> RefVal:
  """numpy indexing; integer tensors gather (a negative index counts from the end once; out of range reads 0).
  `index` holds ("T", k) where tensors[k] is the index tensor. The result keeps x's dtype."""
  v, e = x.v, x.e
  consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
  if consumed > len(x.shape): raise Invalid("too many indices")
  full = list(index)
  if Ellipsis in full:
    k = full.index(Ellipsis)
    full = full[:k] + [slice(None)] * (len(x.shape) - consumed) + full[k + 1:]
  else: full += [slice(None)] * (len(x.shape) - consumed)
  # as torch and tinygrad: ints, slices and None first (basic indexing), then the tensors on what is left, where
  # numpy's placement rule applies (an int is not an advanced index here, unlike in numpy)
  basic, dim, out_dim, adv, bad = [], 0, 0, {}, np.zeros((), bool)
  for i in full:
    if i is None: basic.append(None); out_dim += 1; continue
    if isinstance(i, tuple): adv[out_dim] = (tensors[i[1]], x.shape[dim]); basic.append(slice(None)); out_dim += 1
    elif isinstance(i, slice): basic.append(i); out_dim += 1
    else:
      if not -x.shape[dim] <= i < x.shape[dim]: raise Invalid("index out of range")
      basic.append(i)
    dim += 1
  v, e = v[tuple(basic)], e[tuple(basic)]
  if adv:
    # room for out-of-range tensor indices: one extra zero element at the end of each tensor-indexed axis
    pads, np_index = [(0, 1) if d in adv else (0, 0) for d in range(v.ndim)], []
    for d in range(v.ndim):
      if d not in adv: np_index.append(slice(None)); continue
      t, size = adv[d]
      idx = t.v.astype(np.int64)
      idx = np.where(idx < 0, idx + size, idx)
      np_index.append(np.where((idx < 0) | (idx >= size), size, idx))
      bad = bad | t.e.any()
    v, e = np.pad(v, pads)[tuple(np_index)], np.pad(e, pads)[tuple(np_index)]
  return RefVal(_copy(v), np.where(bad, np.inf, _copy(e)))


def r_cat(xs: list[RefVal], dim: int) -> RefVal:
  d = lub(*[x.dtype for x in xs])
  xs = [r_cast(x, d) for x in xs]
  try: return RefVal(np.concatenate([x.v for x in xs], dim), np.concatenate([x.e for x in xs], dim))
  except ValueError: raise Invalid("cat shapes") from None


def _reshape(x: RefVal, shape):
  try: return _move(x, lambda a: a.reshape(shape))
  except ValueError: raise Invalid("reshape") from None


# ---------------------------------------------------------------------------------------------------------------
# operations: how each step renders as tinylit source, its reference, and (if differentiable) its torch form

def fmt_scalar(x) -> str:
  if isinstance(x, bool) or isinstance(x, int): return repr(x)
  if math.isnan(x): return 'float("nan")'
  if math.isinf(x): return 'float("inf")' if x > 0 else 'float("-inf")'
  return repr(float(x))


def _src(s) -> str: return s if isinstance(s, str) else fmt_scalar(s)


def fmt_index(i) -> str:
  if i is None: return "None"
  if i is Ellipsis: return "..."
  if isinstance(i, slice):
    text = f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}"
    return text + (f":{i.step}" if i.step is not None else "")
  return str(i)


BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "and": "&", "or": "|",
          "xor": "^", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "eq": "==", "ne": "!=", "pow": "**",
          "lshift": "<<", "rshift": ">>", "matmul": "@"}
UNARY_METHODS = ["exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "relu", "sigmoid", "tanh", "abs", "floor", "ceil",
                 "round", "trunc", "sign", "reciprocal", "square"]


def _ref_binop(op, a, b):
  if op in ("add", "sub", "mul", "div"): return r_arith(op, a, b)
  if op in ("lt", "gt", "le", "ge", "eq", "ne"): return r_cmp(op, a, b)
  if op in ("and", "or", "xor"): return r_bitwise(op, a, b)
  if op in ("floordiv", "mod", "idiv"): return r_intdiv(op, a, b)
  if op in ("lshift", "rshift"): return r_shift(op, a, b)
  if op == "pow": return r_pow(a, b)
  if op == "matmul": return r_matmul(a, b)
  raise Invalid(op)


@dataclass
class Step:
  "One line of a program: `out = <op on srcs with args>` (srcs name values or are Python scalars)."
  out: str | None
  op: str
  srcs: tuple
  args: dict = field(default_factory=dict)

  def expr(self) -> str:
    s, a, op = [_src(x) for x in self.srcs], self.args, self.op
    if op in BINOPS: return f"{s[0]} {BINOPS[op]} {s[1]}"
    if op == "neg": return f"-{s[0]}"
    if op == "bitwise_not": return f"~{s[0]}"
    if op in UNARY_METHODS or op in ("contiguous",): return f"{s[0]}.{op}()"
    if op in ("maximum", "minimum", "idiv"): return f"{s[0]}.{op}({s[1]})"
    if op == "cast": return f"{s[0]}.cast(dtypes.{a['dtype']})"
    if op == "where": return f"{s[0]}.where({s[1]}, {s[2]})"
    if op in ("sum", "max", "min", "prod", "mean", "any", "all"):
      kw = [] if a.get("axis") is None else [f"axis={a['axis']!r}"]
      return f"{s[0]}.{op}({', '.join(kw + (['keepdim=True'] if a.get('keepdim') else []))})"
    if op in ("softmax", "log_softmax", "cumsum"): return f"{s[0]}.{op}({a['axis']})"
    if op == "clip": return f"{s[0]}.clip({fmt_scalar(a['lo'])}, {fmt_scalar(a['hi'])})"
    if op == "reshape": return f"{s[0]}.reshape({', '.join(map(str, a['shape']))}{',' if len(a['shape']) == 1 else ''})" \
      if a["shape"] else f"{s[0]}.reshape(())"
    if op == "permute": return f"{s[0]}.permute({', '.join(map(str, a['order']))})"
    if op == "expand": return f"{s[0]}.expand({', '.join(map(str, a['shape']))})"
    if op == "pad": return f"{s[0]}.pad({a['pads']!r}" + (f", value={fmt_scalar(a['value'])})" if a.get("value") else ")")
    if op == "shrink": return f"{s[0]}.shrink({a['arg']!r})"
    if op == "flip": return f"{s[0]}.flip({', '.join(map(str, a['axis']))})"
    if op == "transpose": return f"{s[0]}.transpose({a['d0']}, {a['d1']})"
    if op == "getitem":
      parts = [s[1 + i[1]] if isinstance(i, tuple) else fmt_index(i) for i in a["index"]]
      return f"{s[0]}[{', '.join(parts)}]"
    if op == "cat": return f"{s[0]}.cat({', '.join(s[1:])}, dim={a['dim']})"
    if op == "stack": return f"Tensor.stack({', '.join(s)}, dim={a['dim']})"
    if op == "pow_rev": return f"{s[0]} ** {s[1]}"
    if op == "full":
      dt = f", dtype=dtypes.{a['dtype']}" if a.get("dtype") else ""
      return f"Tensor.full({a['shape']!r}, {fmt_scalar(a['value'])}{dt}, device=DEV)"
    if op == "full_like": return f"{s[0]}.full_like({fmt_scalar(a['value'])})"
    raise KeyError(op)

  def line(self) -> str:
    if self.op == "realize": return f"{self.srcs[0]}.realize()"
    if self.op == "assign": return f"{self.srcs[0]}.assign({_src(self.srcs[1])})"
    if self.op.startswith("i"):
      if self.op in ("iadd", "isub", "imul"):
        return f"{self.srcs[0]} {BINOPS[self.op[1:]]}= {_src(self.srcs[1])}"
    return f"{self.out} = {self.expr()}"


def ref_step(st: Step, vals: dict[str, RefVal]) -> RefVal | None:
  "The reference value of one step (None for a statement that makes no new value)."
  ins = [vals[s] if isinstance(s, str) else s for s in st.srcs]
  a, op = st.args, st.op
  with np.errstate(all="ignore"):
    if op == "realize": return None
    if op == "assign" or op in ("iadd", "isub", "imul"):
      tgt = ins[0]
      new = ins[1] if op == "assign" else r_arith(op[1:], tgt, ins[1])
      if not isinstance(new, RefVal) or new.shape != tgt.shape or new.dtype != tgt.dtype: raise Invalid("assign")
      return new
    if op in BINOPS: return _ref_binop(op, ins[0], ins[1])
    if op == "pow_rev": return r_pow(ins[0], ins[1])
    if op in ("maximum", "minimum"): return r_minmax(op, ins[0], ins[1])
    if op == "idiv": return r_intdiv("idiv", ins[0], ins[1])
    if op in ("neg", "bitwise_not") or op in UNARY_METHODS: return r_unary(op, ins[0])
    if op == "contiguous": return ins[0]
    if op == "cast": return r_cast(ins[0], a["dtype"])
    if op == "where": return r_where(*ins)
    x = ins[0] if ins else None
    if op == "sum": return r_sum(x, a.get("axis"), a.get("keepdim", False))
    if op == "prod": return r_prod(x, a.get("axis"), a.get("keepdim", False))
    if op in ("max", "min"): return r_max(x, a.get("axis"), a.get("keepdim", False), is_min=op == "min")
    if op == "mean": return r_mean(x, a.get("axis"), a.get("keepdim", False))
    if op in ("any", "all"):
      b = r_cast(x, "bool")
      if op == "all": b = r_unary("neg", b)
      r = r_max(b, a.get("axis"), a.get("keepdim", False))
      return r_unary("neg", r) if op == "all" else r
    if op in ("softmax", "log_softmax"): return r_softmax(x, a["axis"], log=op == "log_softmax")
    if op == "cumsum": return r_cumsum(x, a["axis"])
    if op == "clip": return r_minmax("minimum", r_minmax("maximum", x, a["lo"]), a["hi"])
    if op == "reshape": return _reshape(x, a["shape"])
    if op == "permute": return _move(x, lambda v: np.transpose(v, a["order"]))
    if op == "expand": return _move(x, lambda v: np.broadcast_to(v, a["shape"]))
    if op == "pad": return r_pad(x, a["pads"], a.get("value", 0.0))
    if op == "shrink": return _move(x, lambda v: v[tuple(slice(lo, hi) for lo, hi in a["arg"])])
    if op == "flip": return _move(x, lambda v: np.flip(v, a["axis"]))
    if op == "transpose": return _move(x, lambda v: np.swapaxes(v, a["d0"], a["d1"]))
    if op == "getitem": return r_getitem(x, a["index"], ins[1:])
    if op == "cat": return r_cat(ins, a["dim"])
    if op == "stack": return r_cat([_move(t, lambda v: np.expand_dims(v, a["dim"])) for t in ins], a["dim"])
    if op == "full":
      d = a.get("dtype") or from_py(a["value"])
      return RefVal(np.full(a["shape"], as_const(a["value"], d), dtype=NP[d]))
    if op == "full_like": return RefVal(np.full(x.shape, as_const(a["value"], x.dtype), dtype=x.v.dtype))
  raise KeyError(op)


# ---------------------------------------------------------------------------------------------------------------
# programs

@dataclass
class Program:
  "Inputs (name, numpy array, requires_grad), steps, the values checked, and for gradients the output's weights."
  inputs: list[tuple[str, np.ndarray, bool]]
  steps: list[Step]
  outputs: list[str]
  grad_out: str | None = None
  grad_w: np.ndarray | None = None
  origin: str = ""

  def reference(self, aliases: dict[int, list[str]] | None = None) -> dict[str, RefVal]:
    """Every value's reference. `aliases[i]`: names that were the very same Tensor object as the target of the
    in-place step i when it ran (`v1 = a0.cast(a0.dtype)` returns a0 itself), so they see its new contents."""
    vals = {n: RefVal(a) for n, a, _ in self.inputs}
    for i, st in enumerate(self.steps):
      r = ref_step(st, vals)
      if r is None: continue
      vals[st.out if st.out is not None else st.srcs[0]] = r
      for n in (aliases or {}).get(i, []): vals[n] = r
    return vals

  def lines(self) -> list[str]: return [st.line() for st in self.steps]


# ---------------------------------------------------------------------------------------------------------------
# the generator

SPECIAL_F = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 0.5, -2.5, 1.5, 1e-30, -1e30, 3e38, 8388609.0,
             16777215.0, 65504.0, 6e-8, 1e-3, -1.0]
DIMS = [1, 1, 2, 2, 3, 3, 4, 5, 7, 8, 13]


def sample_array(rng, shape, d: str, special: bool) -> np.ndarray:
  if d == "bool": return rng.random(shape) < 0.5
  if is_int(d):
    info = np.iinfo(NP[d])
    mode = rng.random()
    if mode < 0.6: a = rng.integers(max(info.min, -10), min(info.max, 10) + 1, size=shape)
    elif mode < 0.85: a = rng.integers(max(info.min, -300), min(info.max, 300) + 1, size=shape)
    else: a = rng.integers(info.min, info.max, size=shape, dtype=NP[d], endpoint=True)
    a = np.asarray(a).astype(NP[d])
    if special:
      sp = np.array([info.min, info.max, 0, 1, info.max - 1] + ([-1] if info.min < 0 else []), dtype=object)
      mask = rng.random(shape) < 0.3
      a = np.where(mask, rng.choice(sp, size=shape).astype(NP[d]), a).astype(NP[d])
    return a
  mode = rng.random()
  if mode < 0.45: a = rng.standard_normal(shape) * rng.choice([1.0, 1.0, 3.0, 0.01, 100.0])
  elif mode < 0.75: a = rng.integers(-8, 9, size=shape).astype(np.float64)  # exact arithmetic, exact quotients
  else: a = rng.uniform(-3, 3, size=shape)
  a = np.asarray(a)
  if special:
    mask = rng.random(shape) < 0.25
    a = np.where(mask, rng.choice(np.array(SPECIAL_F), size=shape), a)
  with np.errstate(all="ignore"): return np.asarray(a).astype(NP[d])


def _factor(n: int, rng) -> list[int]:
  f, k = [], 2
  while n > 1 and k * k <= n:
    while n % k == 0: f.append(k); n //= k
    k += 1
  if n > 1: f.append(n)
  return f


class Gen:
  "Builds one random program, evaluating the reference as it goes (so every op sees real shapes and dtypes)."

  def __init__(self, rng: np.random.Generator, caps: dict, grad: bool, special: bool):
    self.rng, self.caps, self.grad, self.special = rng, caps, grad, special
    self.vals: dict[str, RefVal] = {}
    self.inputs: list[tuple[str, np.ndarray, bool]] = []
    self.steps: list[Step] = []
    self.uses: Counter = Counter()
    self.depth: dict[str, int] = {}
    self.counter = 0
    pool = {"float32": 30, "int32": 12, "bool": 8, "uint8": 7, "float16": 9, "int8": 3, "int16": 2, "int64": 3,
            "float64": 3, "uint16": 1, "uint32": 1, "uint64": 1}
    if not caps.get("float16", True): pool.pop("float16")
    if not caps.get("float64", True): pool.pop("float64")
    self.pool = (["float32"], [1.0]) if grad else (list(pool), [w / sum(pool.values()) for w in pool.values()])

  # ---- helpers
  def choice(self, seq):
    return seq[int(self.rng.integers(len(seq)))]

  def chance(self, p: float) -> bool: return bool(self.rng.random() < p)

  def dtype(self) -> str: return str(self.rng.choice(self.pool[0], p=self.pool[1]))

  def shape(self, max_rank=4) -> tuple[int, ...]:
    rank = int(self.rng.choice([0, 1, 2, 2, 3, 3, 4][:max_rank + 3]))
    shape = [self.choice(DIMS) for _ in range(min(rank, max_rank))]
    if shape and not self.grad and self.chance(0.04): shape[int(self.rng.integers(len(shape)))] = 0
    while math.prod(shape) > 256: shape[int(np.argmax(shape))] //= 2
    return tuple(shape)

  def input(self, shape, d: str | None = None, values=None) -> str:
    d = d or self.dtype()
    name = f"a{len(self.inputs)}"
    arr = values if values is not None else sample_array(self.rng, shape, d, self.special and self.chance(0.6))
    if self.grad and d in FLOATS: arr = (self.rng.standard_normal(shape) * 1.5).astype(NP[d])
    self.inputs.append((name, arr, self.grad and d in FLOATS))
    self.vals[name] = RefVal(arr)
    return name

  # maximum/minimum nest their operands twice each: scheduling k nested ones took 4**k time (class 13, which
  # test_regressions covers), so the fuzzer keeps nesting shallow enough to stay fast
  MAX_MINMAX_DEPTH = 5

  def emit(self, op: str, srcs: tuple, **args) -> str | None:
    depth = max([self.depth.get(s, 0) for s in srcs if isinstance(s, str)], default=0) + \
      {"maximum": 1, "minimum": 1, "clip": 2}.get(op, 0)
    if depth > self.MAX_MINMAX_DEPTH: return None
    st = Step(f"v{self.counter}", op, tuple(srcs), args)
    try: r = ref_step(st, self.vals)
    except (Invalid, ValueError, IndexError, TypeError, np.exceptions.AxisError): return None
    if r is None:
      self.steps.append(replace(st, out=None))
      return None
    if r.v.size > 2048: return None
    if self.grad:  # gradients are compared where the forward pass is well defined and finite
      if r.dtype != "float32" and op not in ("lt", "gt", "ne", "eq", "le", "ge"): return None
      # only float values flow on (a comparison's result is a where's condition, nothing else)
      if any(isinstance(x, str) and self.vals[x].dtype != "float32" for x in (srcs[1:] if op == "where" else srcs)):
        return None
      if (r.e == np.inf).any() or (r.dtype == "float32" and not np.isfinite(r.v).all()): return None
      if r.dtype == "float32" and np.abs(r.v).max(initial=0) > 1e6: return None
    if op in ("assign", "iadd", "isub", "imul"):
      st = replace(st, out=None)
      self.depth[srcs[0]] = depth
      self.vals[srcs[0]] = r
      self.steps.append(st)
      self.uses.update(s for s in srcs[1:] if isinstance(s, str))
      return srcs[0]
    self.counter += 1
    self.depth[st.out] = depth
    self.vals[st.out] = r
    self.steps.append(st)
    self.uses.update(s for s in srcs if isinstance(s, str))
    return st.out

  def live(self, pred=lambda r: True) -> list[str]:
    return [n for n, r in self.vals.items() if pred(r)]

  def pick(self, pred=lambda r: True) -> str | None:
    names = self.live(pred)
    if not names: return None
    # recent values first: programs become chains rather than bags of unrelated ops
    recent = names[-4:]
    return self.choice(recent if self.chance(0.7) else names)

  def partner_shape(self, shape) -> tuple[int, ...]:
    "A shape that broadcasts against `shape`."
    s = list(shape)
    if s and self.chance(0.3): s = s[int(self.rng.integers(len(s) + 1)):]
    return tuple(1 if (x != 0 and self.chance(0.25)) else x for x in s)

  def scalar(self, d: str):
    if d == "bool": return bool(self.chance(0.5))
    if is_int(d):
      info = np.iinfo(NP[d])
      v = int(self.rng.integers(-5 if info.min < 0 else 0, 6))
      if self.special and self.chance(0.2): v = self.choice([int(info.max), int(info.min), 60, -1])
      return v
    if self.special and self.chance(0.15): return float(self.choice(SPECIAL_F))
    return float(self.choice([0.5, 2.0, -1.5, 3.0, 0.1, 1.0, -4.0, 7.0]))

  def operand(self, a: str, dtype_same=0.6):
    "A second operand for a: a scalar, or a value or new input whose shape broadcasts with a's."
    ra = self.vals[a]
    if self.chance(0.3): return self.scalar(ra.dtype if self.chance(0.8) else self.dtype())
    def ok(r): return _broadcastable(r.shape, ra.shape)
    cands = [n for n in self.live(ok) if n != a]
    if cands and self.chance(0.5): return self.choice(cands[-5:])
    return self.input(self.partner_shape(ra.shape), ra.dtype if self.chance(dtype_same) else None)

  # ---- op families
  def g_unary(self):
    a = self.pick()
    if a is None: return
    d = self.vals[a].dtype
    if self.grad:
      op = self.choice(["neg", "exp", "log", "sqrt", "sin", "cos", "relu", "sigmoid", "tanh", "abs", "square",
                        "reciprocal", "clip"])
      if op in ("log", "sqrt", "reciprocal"): a = self.positive(a)
      if op == "exp" and np.abs(self.vals[a].v).max(initial=0) > 8: op = "tanh"
    elif is_float(d): op = self.choice(UNARY_METHODS + ["neg", "neg", "clip"])
    elif d == "bool": op = self.choice(["neg", "bitwise_not", "exp", "sqrt"])
    else: op = self.choice(["neg", "abs", "sign", "relu", "bitwise_not", "square", "floor", "exp", "sqrt", "sin",
                            "log", "sigmoid"])
    if op == "clip":
      lo = float(self.rng.uniform(-2, 0)) if is_float(d) else int(self.rng.integers(-3, 1))
      hi = lo + (float(self.rng.uniform(0.1, 3)) if is_float(d) else int(self.rng.integers(0, 4)))
      if d == "bool": return
      return self.emit("clip", (a,), lo=lo, hi=hi)
    return self.emit(op, (a,))

  def positive(self, a: str) -> str:
    "In gradient programs: a value kept away from zero (for log, sqrt, division)."
    b = self.emit("abs", (a,))
    return self.emit("add", (b, 0.5)) or a if b else a

  def g_binary(self):
    a = self.pick()
    if a is None: return
    d = self.vals[a].dtype
    if self.grad:
      op = self.choice(["add", "sub", "mul", "div", "maximum", "minimum", "add", "mul", "pow"])
      b = self.operand(a, dtype_same=1.0)
      if op == "div" and isinstance(b, str): b = self.positive(b)
      if op == "div" and not isinstance(b, str) and abs(b) < 0.1: b = 2.0
      if op == "pow":
        return self.emit("pow", (self.positive(a), self.choice([2, 3, 0.5, 1.5, -1, -0.5, 2.5])))
      if op in ("maximum", "minimum") and not isinstance(b, str): b = float(b)
      return self.emit(op, (a, b))
    ops = ["add", "sub", "mul", "div", "maximum", "minimum", "lt", "gt", "le", "ge", "eq", "ne"]
    if is_int(d) or d == "bool": ops += ["and", "or", "xor"] * 2
    if is_int(d): ops += ["floordiv", "mod", "idiv", "lshift", "rshift", "floordiv", "mod", "pow"]
    if is_float(d): ops += ["floordiv", "mod", "pow", "pow"]
    op = self.choice(ops)
    if op in ("lshift", "rshift"):
      bits = NP[d].itemsize * 8
      return self.emit(op, (a, int(self.rng.integers(0, bits))))
    if op == "pow":
      if is_int(d): return self.emit("pow", (a, self.choice([2, 3])))
      if self.chance(0.25): return self.emit("pow_rev", (self.choice([2.0, 0.5, 3.0]), a))
      return self.emit("pow", (a, self.choice([2, 3, 0.5, 1.5, -1, -2, 0, 1, 2.5, -0.5])))
    b = self.operand(a)
    if op in ("floordiv", "mod", "idiv") and not isinstance(b, str) and is_int(d):
      if self.special and self.chance(0.3): b = self.choice([0, -1])  # literal divisors: 0 too
      else: b = int(b) if isinstance(b, int) or (isinstance(b, float) and math.isfinite(b)) else 3
    if op in ("maximum", "minimum", "idiv") and not isinstance(b, str): pass
    if op == "idiv" and not is_int(d): return
    args = (b, a) if (not isinstance(b, str) and op not in ("maximum", "minimum", "idiv") and self.chance(0.3)) \
      else (a, b)
    if op in ("and", "or", "xor") and not isinstance(args[0], str) and isinstance(args[0], float): return
    return self.emit(op, args)

  def g_cast(self):
    a = self.pick()
    if a is None: return
    return self.emit("cast", (a,), dtype=self.dtype())

  def g_where(self):
    c = self.pick(lambda r: r.dtype == "bool") if self.chance(0.7) else self.pick()
    if c is None:
      a = self.pick()
      if a is None: return
      c = self.emit(self.choice(["lt", "gt", "ne"]), (a, self.operand(a)))
      if c is None: return
    x = self.operand(c) if not self.grad else self.pick(lambda r: r.dtype == "float32")
    y = self.operand(c) if not self.grad else self.pick(lambda r: r.dtype == "float32")
    if self.grad and (x is None or y is None): return
    if not isinstance(x, str) and not isinstance(y, str) and self.vals[c].dtype != "bool": return
    return self.emit("where", (c, x, y))

  def g_reduce(self):
    a = self.pick(lambda r: len(r.shape) > 0) or self.pick()
    if a is None: return
    r = self.vals[a]
    op = self.choice(["sum", "max", "min", "mean", "sum"] if self.grad else
                     ["sum", "sum", "max", "min", "prod", "mean", "any", "all", "softmax", "log_softmax", "cumsum"])
    nd = len(r.shape)
    if op in ("softmax", "log_softmax", "cumsum"):
      if nd == 0 or (op != "cumsum" and not is_float(r.dtype)): return
      return self.emit(op, (a,), axis=int(self.rng.integers(-nd, nd)))
    if op == "prod" and self.grad: return
    if nd == 0 or self.chance(0.25): axis = None
    elif self.chance(0.5): axis = int(self.rng.integers(-nd, nd))
    else: axis = tuple(sorted({int(x) for x in self.rng.integers(0, nd, size=int(self.rng.integers(1, nd + 1)))}))
    return self.emit(op, (a,), axis=axis, keepdim=self.chance(0.4))

  def g_matmul(self):
    d = self.dtype()
    if d == "bool": d = "float32"
    a = self.pick(lambda r: len(r.shape) in (1, 2, 3) and r.dtype != "bool" and 0 < r.shape[-1] <= 40)
    if a is None or self.chance(0.4):
      n, k = self.choice([1, 2, 3, 5, 7, 9, 13, 17]), self.choice([1, 2, 3, 4, 5, 7, 9, 16, 17, 33])
      a = self.input((n, k) if self.chance(0.8) else (k,), d)
    ra = self.vals[a]
    k, m = ra.shape[-1], self.choice([1, 2, 3, 4, 5, 6, 7, 9, 10, 17])
    bshape = (k, m) if self.chance(0.8) else (k,)
    if len(ra.shape) == 3 and self.chance(0.5): bshape = (ra.shape[0], k, m)
    b = self.input(bshape, ra.dtype if self.chance(0.8) else d)
    return self.emit("matmul", (a, b) if self.chance(0.85) else (b, a))

  def g_movement(self):
    a = self.pick()
    if a is None: return
    s = self.vals[a].shape
    nd = len(s)
    kind = self.choice(["reshape", "permute", "expand", "pad", "shrink", "flip", "transpose", "contiguous", "pad"])
    if kind == "reshape":
      n = math.prod(s)
      if n == 0: return self.emit("reshape", (a,), shape=(0,) + ((1,) if self.chance(0.5) else ()))
      f = _factor(n, self.rng)
      self.rng.shuffle(f)
      new = []
      for x in f:
        if new and self.chance(0.5): new[-1] *= x
        else: new.append(x)
      while self.chance(0.3): new.insert(int(self.rng.integers(len(new) + 1)), 1)
      if new and self.chance(0.2): new[int(self.rng.integers(len(new)))] = -1
      return self.emit("reshape", (a,), shape=tuple(new))
    if kind == "permute" and nd >= 2: return self.emit("permute", (a,), order=tuple(int(x) for x in self.rng.permutation(nd)))
    if kind == "transpose" and nd >= 2:
      d0, d1 = (int(x) for x in self.rng.choice(nd, 2, replace=False))
      return self.emit("transpose", (a,), d0=d0, d1=d1)
    if kind == "expand":
      if 1 in s and self.chance(0.7):
        new = tuple(self.choice([2, 3, 4]) if x == 1 and self.chance(0.7) else x for x in s)
      else: new = (self.choice([2, 3]),) + s
      return self.emit("expand", (a,), shape=new)
    if kind == "pad" and nd >= 1:
      pads = tuple((int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))) for _ in s)
      d = self.vals[a].dtype
      value = 0.0 if d == "bool" or self.chance(0.6) else self.scalar(d)
      if is_int(d) and not isinstance(value, int): value = 0
      return self.emit("pad", (a,), pads=pads, **({"value": value} if value else {}))
    if kind == "shrink" and nd >= 1:
      arg = []
      for x in s:
        lo = int(self.rng.integers(0, x + 1)) if x else 0
        hi = int(self.rng.integers(lo, x + 1)) if x else 0
        if hi == lo and x and not self.chance(0.1): lo, hi = 0, x
        arg.append((lo, hi))
      return self.emit("shrink", (a,), arg=tuple(arg))
    if kind == "flip" and nd >= 1:
      axis = tuple(sorted({int(x) for x in self.rng.integers(0, nd, size=int(self.rng.integers(1, nd + 1)))}))
      return self.emit("flip", (a,), axis=axis)
    if kind == "contiguous": return self.emit("contiguous", (a,))

  def g_index(self):
    a = self.pick(lambda r: len(r.shape) >= 1)
    if a is None: return
    s = self.vals[a].shape
    index, tensors = [], []
    for size in s:
      if self.chance(0.15): index.append(None)
      r = self.rng.random()
      if r < 0.3 and size: index.append(int(self.rng.integers(-size, size)))
      elif r < 0.75:
        step = self.choice([1, 1, 2, 3, -1, -2])
        start = self.choice([None, 0, 1, -1, int(self.rng.integers(-size - 1, size + 2))])
        stop = self.choice([None, None, size, -1, int(self.rng.integers(-size - 1, size + 2))])
        index.append(slice(start, stop, step if step != 1 else None))
      elif r < 0.9 and len(tensors) < 2 and size:
        hi = size if self.grad else size + 2
        ishape = self.choice([(), (2,), (3,), (2, 2), (1,)])
        vals = self.rng.integers(-size, hi, size=ishape).astype(np.int32 if self.chance(0.8) else np.int64)
        name = self.input(ishape, vals.dtype.name, values=vals)
        self.inputs[-1] = (name, vals, False)
        index.append(("T", len(tensors)))
        tensors.append(name)
      else: index.append(slice(None))
    while index and self.chance(0.4) and index[-1] == slice(None): index.pop()
    if self.chance(0.1) and index: index.insert(int(self.rng.integers(len(index) + 1)), Ellipsis)
    if not index: return
    return self.emit("getitem", (a, *tensors), index=tuple(index))

  def g_cat(self):
    a = self.pick(lambda r: len(r.shape) >= 1)
    if a is None: return
    r = self.vals[a]
    stack = self.chance(0.3)
    dim = int(self.rng.integers(0, len(r.shape) + (1 if stack else 0)))
    parts = [a]
    for _ in range(int(self.rng.integers(1, 3))):
      if self.chance(0.3): parts.append(a); continue
      s = list(r.shape)
      if not stack: s[dim] = self.choice([0, 1, 2, 3]) if not self.grad else self.choice([1, 2, 3])
      parts.append(self.input(tuple(s), r.dtype if self.chance(0.8) or self.grad else None))
    if stack: return self.emit("stack", tuple(parts), dim=dim)
    return self.emit("cat", tuple(parts), dim=dim)

  def g_const(self):
    "Constant tensors (no buffer: the compiler folds them) mixed into the program."
    shape = self.vals[self.pick()].shape if self.vals and self.chance(0.7) else self.shape()
    d = self.dtype()
    # a fill value must fit its dtype (tinylit refuses Tensor.full((2,), -1, dtype=dtypes.uint8), as torch does)
    value = as_const(self.scalar(d), d)
    if self.chance(0.3) and self.vals:
      a = self.pick(lambda r: r.dtype != "bool")
      if a is not None: return self.emit("full_like", (a,), value=as_const(self.scalar(self.vals[a].dtype), self.vals[a].dtype))
    return self.emit("full", (), shape=tuple(shape), value=value, dtype=d if self.chance(0.8) else None)

  def g_realize(self):
    a = self.pick()
    if a is not None: self.emit("realize", (a,))

  def g_assign(self):
    "Overwrite an input after values were derived from it: those must keep the old contents."
    used = [n for n, _, _ in self.inputs if self.uses[n]] or [n for n, _, _ in self.inputs]
    if not used: return
    t = self.choice(used)
    r = self.vals[t]
    same = [n for n in self.live(lambda x: x.shape == r.shape and x.dtype == r.dtype) if n != t]
    if same and self.chance(0.5): return self.emit("assign", (t, self.choice(same)))
    if r.dtype == "bool": return self.emit("iadd", (t, True))
    return self.emit(self.choice(["iadd", "isub", "imul"]), (t, self.scalar(r.dtype)))

  def g_many_inputs(self):
    "An elementwise expression of 11+ distinct inputs: one kernel with many buffers."
    shape = self.shape(max_rank=3)
    d = self.dtype() if self.chance(0.5) else "float32"
    names = [self.input(self.partner_shape(shape) if self.chance(0.3) else shape, d if self.chance(0.8) else None)
             for _ in range(int(self.rng.integers(11, 15)))]
    acc = names[0]
    for n in names[1:]:
      ops = ["add", "mul", "maximum", "minimum"] + (["sub"] if self.vals[acc].dtype != "bool" else [])
      acc = self.emit(self.choice(ops), (acc, n)) or acc
    if self.chance(0.5): acc = self.emit("sum", (acc,), axis=None) or acc

  def run(self, n_steps: int):
    families = [(self.g_unary, 22), (self.g_binary, 26), (self.g_cast, 7), (self.g_where, 6), (self.g_reduce, 10),
                (self.g_matmul, 4), (self.g_movement, 14), (self.g_index, 5), (self.g_cat, 4), (self.g_realize, 2),
                (self.g_assign, 2), (self.g_const, 4)]
    if self.grad: families = [(f, w) for f, w in families if f not in (self.g_cast, self.g_assign, self.g_const)]
    fns, ws = zip(*families)
    ws = np.array(ws, dtype=float) / sum(ws)
    for _ in range(n_steps):
      fn = fns[int(self.rng.choice(len(fns), p=ws))]
      try: fn()
      except (Invalid, ValueError, TypeError, OverflowError, IndexError, ZeroDivisionError): pass  # try another op


def _broadcastable(a, b) -> bool:
  try: np.broadcast_shapes(a, b); return True
  except ValueError: return False


def generate(seed: int, index: int, caps: dict | None = None) -> Program:
  "Program number `index` of `seed`: the same pair always gives the same program (for the same caps)."
  caps = caps or {}
  rng = np.random.default_rng([seed, index])
  grad = bool(rng.random() < 0.25)
  special = not grad and bool(rng.random() < 0.3)
  g = Gen(rng, caps, grad, special)
  if not grad and rng.random() < 0.12: g.g_many_inputs()
  else: g.input(g.shape())
  g.run(int(rng.integers(2, 10)))
  values = [st.out for st in g.steps if st.out is not None]
  if not values:
    g.g_unary() if grad else g.g_binary()
    values = [st.out for st in g.steps if st.out is not None]
    if not values: values = [g.inputs[0][0]]
  sinks = [v for v in values if not g.uses[v]][-3:]
  outputs = sinks if values[-1] in sinks else sinks + [values[-1]]
  prog = Program(g.inputs, g.steps, outputs, origin=f"seed={seed} index={index}")
  if grad:
    out = next((o for o in reversed(outputs) if g.vals[o].dtype == "float32"), None)
    if out is not None and any(rg for _, _, rg in g.inputs):
      prog.grad_out, prog.grad_w = out, rng.uniform(-1, 1, size=g.vals[out].shape).astype(np.float32)
  return prog


# ---------------------------------------------------------------------------------------------------------------
# comparing, and running a program on a device (in the worker process)

def compare(ref: RefVal, got: np.ndarray, got_dtype: str, loose_ulps: float = 0.0, ftz: bool = False) -> str | None:
  "None if `got` matches the reference, else a description of where it doesn't."
  if got_dtype != ref.dtype: return f"dtype {got_dtype}, expected {ref.dtype}"
  if got.shape != ref.shape: return f"shape {got.shape}, expected {ref.shape}"
  e = ref.e
  with np.errstate(all="ignore"):
    if is_float(ref.dtype):
      r, g = ref.f, got.astype(np.float64)
      tol = e + loose_ulps * ulp(ref.v)
      if ftz: tol = tol + float(np.finfo(ref.dtype).tiny)
      same = (r == g) | (np.isnan(r) & np.isnan(g))
      close = np.isfinite(r) & np.isfinite(g) & (np.abs(r - g) <= tol)
      ok = (e == np.inf) | same | close
    else: ok = (e == np.inf) | (ref.v == got)
  if ok.all(): return None
  bad = np.argwhere(~ok) if ref.shape else [()]
  shown = []
  for idx in bad[:4]:
    idx = tuple(int(i) for i in idx)
    exp = ref.v[idx].item() if ref.shape else ref.v.item()
    act = got[idx].item() if ref.shape else got.item()
    tol = f" ±{ref.e[idx]:.3g}" if ref.e[idx] else ""
    shown.append(f"at {idx}: expected {exp!r}{tol}, got {act!r}")
  return f"{int((~ok).sum())} of {ok.size} elements differ: " + "; ".join(shown)


def _torch_step(st: Step, env: dict, torch):
  "The torch form of a differentiable step (gradient programs only)."
  ins = [env[s] if isinstance(s, str) else s for s in st.srcs]
  a, op = st.args, st.op
  x = ins[0]
  def scal(v, like): return torch.full_like(like, v) if not isinstance(v, torch.Tensor) else v
  if op in ("add", "sub", "mul", "div", "pow", "pow_rev"):
    fn = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q, "div": lambda p, q: p / q,
          "pow": lambda p, q: p ** q, "pow_rev": lambda p, q: p ** q}[op]
    return fn(ins[0], ins[1])
  if op in ("lt", "gt", "le", "ge", "eq", "ne"):
    return {"lt": torch.lt, "gt": torch.gt, "le": torch.le, "ge": torch.ge, "eq": torch.eq, "ne": torch.ne}[op](
      ins[0] if isinstance(ins[0], torch.Tensor) else scal(ins[0], ins[1]),
      ins[1] if isinstance(ins[1], torch.Tensor) else scal(ins[1], ins[0]))
  if op in ("maximum", "minimum"): return getattr(torch, op)(x, scal(ins[1], x))
  if op == "neg": return -x
  if op == "square": return x * x
  if op in ("exp", "log", "sqrt", "sin", "cos", "relu", "sigmoid", "tanh", "abs", "reciprocal"): return getattr(torch, op)(x)
  if op == "clip":
    lo, hi = torch.full_like(x, a["lo"]), torch.full_like(x, a["hi"])
    return torch.minimum(torch.maximum(x, lo), hi)
  if op == "where":
    c = ins[0] if ins[0].dtype == torch.bool else ins[0] != 0
    p, q = ins[1], ins[2]
    if not isinstance(p, torch.Tensor): p = torch.tensor(p, dtype=q.dtype)
    if not isinstance(q, torch.Tensor): q = torch.tensor(q, dtype=p.dtype)
    return torch.where(c, p, q)
  if op in ("sum", "max", "min", "mean"):
    ax = a.get("axis")
    dims = tuple(range(x.ndim)) if ax is None else (ax if isinstance(ax, tuple) else (ax,))
    if x.ndim == 0: return x
    fn = {"sum": torch.sum, "max": torch.amax, "min": torch.amin, "mean": torch.mean}[op]
    return fn(x, dim=dims, keepdim=a.get("keepdim", False))
  if op == "softmax": return torch.softmax(x, a["axis"])
  if op == "log_softmax": return torch.log_softmax(x, a["axis"])
  if op == "cumsum": return torch.cumsum(x, a["axis"])
  if op == "matmul": return ins[0] @ ins[1]
  if op == "reshape": return x.reshape(a["shape"])
  if op == "permute": return x.permute(*a["order"])
  if op == "expand": return x.expand(*a["shape"])
  if op == "pad":
    flat = [p for pair in reversed(a["pads"]) for p in pair]
    return torch.nn.functional.pad(x, flat, value=float(a.get("value", 0.0)))
  if op == "shrink": return x[tuple(slice(lo, hi) for lo, hi in a["arg"])]
  if op == "flip": return torch.flip(x, a["axis"])
  if op == "transpose": return x.transpose(a["d0"], a["d1"])
  if op == "contiguous": return x
  if op == "getitem":  # torch has no negative steps: flip those axes first and take the same elements in order
    full = list(a["index"])
    consumed = sum(1 for i in full if i is not None and i is not Ellipsis)
    if Ellipsis in full:
      k = full.index(Ellipsis)
      full = full[:k] + [slice(None)] * (x.ndim - consumed) + full[k + 1:]
    idx, dim = [], 0
    for i in full:
      if i is None: idx.append(None); continue
      if isinstance(i, tuple): idx.append(ins[1 + i[1]].long())
      elif isinstance(i, slice) and (i.step or 1) < 0:
        n = x.shape[dim]
        r = range(*i.indices(n))
        x = torch.flip(x, (dim,))
        idx.append(slice(n - 1 - r[0], n - 1 - r[-1] + 1, -r.step) if len(r) else slice(0, 0))
      else: idx.append(i)
      dim += 1
    return x[tuple(idx)]
  if op == "cat": return torch.cat(ins, a["dim"])
  if op == "stack": return torch.stack(ins, a["dim"])
  raise KeyError(op)


def torch_grads(prog: Program, torch, dtype) -> dict[str, np.ndarray | None]:
  env = {}
  for n, arr, rg in prog.inputs:
    env[n] = torch.tensor(arr, dtype=dtype if arr.dtype.kind == "f" else None, requires_grad=rg and arr.dtype.kind == "f")
  leaves = dict(env)
  for st in prog.steps:
    if st.op == "realize": continue
    env[st.out] = _torch_step(st, env, torch)
  out = env[prog.grad_out]
  (out * torch.tensor(prog.grad_w, dtype=dtype)).sum().backward()
  return {n: (None if t.grad is None else t.grad.numpy().astype(np.float64)) for n, t in leaves.items()
          if t.requires_grad}


def run_program(prog: Program, device: str, opts: dict) -> dict:
  "Run one program with tinylit on `device` and compare; returns {'status': 'ok'|'fail', ...}."
  aliases: dict[int, list[str]] = {}
  res = _run_program(prog, device, opts, aliases)
  return {**res, "aliases": aliases}


def _refused(e: Exception) -> bool:
  "The device's own clear refusal of a dtype it can't compute (PoCL's CPU device has no float16): not a failure."
  return isinstance(e, RuntimeError) and "has no half precision" in str(e)


def _run_program(prog: Program, device: str, opts: dict, aliases: dict) -> dict:
  from tinylit import Tensor, dtypes
  ns: dict[str, Any] = {"Tensor": Tensor, "dtypes": dtypes, "np": np, "DEV": device}
  for n, arr, rg in prog.inputs: ns[n] = Tensor(arr, device=device, requires_grad=True if rg else None)
  names = [n for n, _, _ in prog.inputs]
  for i, (st, line) in enumerate(zip(prog.steps, prog.lines())):
    if st.out is None and st.op != "realize":
      same = [n for n in names if n != st.srcs[0] and ns[n] is ns[st.srcs[0]]]
      if same: aliases[i] = same
      # a view (reshape, transpose, expand, ...) shares the written tensor's memory (its Storage, chapter 1), as in
      # torch and numpy, and sees the update too; the reference doesn't model shared memory (tests/fuzz_state.py
      # does), so such a program is left out. A tensor that merely holds the same buffer keeps its old values.
      storage = ns[st.srcs[0]]._storage
      if any(ns[n]._storage is storage for n in names if n not in same and n != st.srcs[0]):
        return {"status": "ok", "note": "a view shares the memory an in-place step writes"}
    try: exec(line, ns)
    except Exception as e:
      if _refused(e): return {"status": "ok", "note": "refused by the device"}
      return {"status": "fail", "kind": "exception", "exc": type(e).__name__, "where": f"line {i + 1}: {line}",
              "detail": f"{type(e).__name__}: {str(e)[:500]}"}
    if st.out is not None: names.append(st.out)
  ref = prog.reference(aliases)
  for o in opts.get("only_outputs") or prog.outputs:
    t = ns[o]
    try: got, got_dtype = t.numpy(), repr(t.dtype).removeprefix("dtypes.")
    except Exception as e:
      if _refused(e): return {"status": "ok", "note": "refused by the device"}
      return {"status": "fail", "kind": "exception", "exc": type(e).__name__, "where": f"{o}.numpy()",
              "detail": f"{type(e).__name__}: {str(e)[:500]}", "output": o}
    if opts.get("crashes_only"): continue
    got_dtype = {"half": "float16", "float": "float32", "double": "float64"}.get(got_dtype, got_dtype)
    msg = compare(ref[o], got, got_dtype, ftz=opts.get("ftz", False))
    if msg is not None:
      return {"status": "fail", "kind": "dtype" if msg.startswith(("dtype", "shape")) else "value", "output": o,
              "detail": msg, "got": got, "got_dtype": got_dtype}
  if prog.grad_out is None or opts.get("crashes_only") or opts.get("no_grad"): return {"status": "ok"}
  if any((r.e == np.inf).any() for r in ref.values()): return {"status": "ok", "note": "grad skipped"}
  try:
    (ns[prog.grad_out] * Tensor(prog.grad_w, device=device)).sum().backward()
  except Exception as e:
    return {"status": "fail", "kind": "exception", "exc": type(e).__name__, "where": "backward()",
            "detail": f"{type(e).__name__}: {str(e)[:500]}"}
  import torch
  t32, t64 = torch_grads(prog, torch, torch.float32), torch_grads(prog, torch, torch.float64)
  for n, _, rg in prog.inputs:
    if not rg or n not in t64: continue
    tg = ns[n]
    if t64[n] is None: continue
    if tg.grad is None:
      return {"status": "fail", "kind": "grad", "output": f"{n}.grad", "detail": f"{n}.grad is None, torch has one"}
    try: g = tg.grad.numpy().astype(np.float64)
    except Exception as e:
      return {"status": "fail", "kind": "exception", "exc": type(e).__name__, "where": f"{n}.grad.numpy()",
              "detail": f"{type(e).__name__}: {str(e)[:500]}"}
    r64, r32 = t64[n], t32[n]
    if g.shape != r64.shape:
      return {"status": "fail", "kind": "grad", "output": f"{n}.grad", "detail": f"shape {g.shape} != {r64.shape}"}
    scale = np.abs(r64).max(initial=0)
    tol = 8 * np.abs(r32 - r64) + 1e-3 * np.abs(r64) + 1e-4 * scale + 1e-6
    ok = (np.abs(g - r64) <= tol) | (np.isnan(g) & np.isnan(r64)) | (g == r64)
    if not ok.all():
      bad = [tuple(int(i) for i in idx) for idx in np.argwhere(~ok)[:4]] if g.ndim else [()]
      shown = "; ".join(f"at {i}: torch {r64[i]:.7g}, got {g[i]:.7g}" for i in bad)
      return {"status": "fail", "kind": "grad", "output": f"{n}.grad",
              "detail": f"{int((~ok).sum())} of {ok.size} gradient elements differ: {shown}", "got": g}
  return {"status": "ok"}


def device_caps(device: str) -> dict:
  "Open the device and find what it can run: {'ok': bool, 'reason': str, 'float16': bool, 'float64': bool}."
  from tinylit import Tensor
  from tinylit.device import Device
  try: Device[device]
  except Exception as e: return {"ok": False, "reason": f"{type(e).__name__}: {e}"}
  caps = {"ok": True}
  for d in ("float16", "float64"):
    try: caps[d] = bool((Tensor(np.array([1.5, 2.0], dtype=d), device=device) * 2).numpy()[0] == 3)
    except Exception: caps[d] = False
  caps["ftz"] = False
  if device == "CL":  # OpenCL may flush float32 denormals to zero (the spec allows it without CL_FP_DENORM)
    tiny = np.array([1e-40, 1.0], dtype=np.float32)
    caps["ftz"] = bool((Tensor(tiny, device=device) * 1.0).numpy()[0] == 0)
  return caps


# ---------------------------------------------------------------------------------------------------------------
# the worker process and its client

def _send(f, obj) -> None:
  data = pickle.dumps(obj)
  f.write(struct.pack("<Q", len(data)) + data)
  f.flush()


def _recv(f):
  head = f.read(8)
  if len(head) < 8: raise EOFError
  n = struct.unpack("<Q", head)[0]
  data = f.read(n)
  if len(data) < n: raise EOFError
  return pickle.loads(data)


def worker_main() -> None:
  "The child's loop: read (command, payload), run it, write the result. stdout carries only our frames."
  inp, out = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
  os.dup2(2, 1)  # anything tinylit prints goes to stderr, never into the frame stream
  while True:
    try: cmd, payload = _recv(inp)
    except EOFError: return
    try:
      if cmd == "caps": res = device_caps(payload)
      elif cmd == "run":
        prog, device, opts = payload
        res = run_program(prog, device, opts)
      else: res = {"status": "error", "detail": f"unknown command {cmd}"}
    except Exception as e:
      res = {"status": "fail", "kind": "exception", "exc": type(e).__name__, "where": "fuzz harness",
             "detail": "".join(traceback.format_exception(e))[-1500:]}
    _send(out, res)


class Worker:
  "A child Python process that runs programs; when it dies, the program it was running is a 'crash' failure."

  def __init__(self, env: dict | None = None):
    self.env = {**os.environ, **(env or {})}
    self.proc = None
    self.errfile = None

  def start(self):
    self.errfile = tempfile.TemporaryFile()
    self.proc = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=self.errfile, env=self.env, bufsize=0)

  def _stderr_tail(self, n=3000) -> str:
    self.errfile.seek(0)
    data = self.errfile.read().decode(errors="replace")
    return data[-n:]

  def call(self, cmd: str, payload, timeout: float = 120.0) -> dict:
    if self.proc is None or self.proc.poll() is not None: self.start()
    self.errfile.seek(0); self.errfile.truncate()
    try:
      _send(self.proc.stdin, (cmd, payload))
      ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
      if not ready:
        self.kill()
        return {"status": "fail", "kind": "timeout", "detail": f"no answer within {timeout:.0f} s"}
      return _recv(self.proc.stdout)
    except (EOFError, BrokenPipeError, OSError):
      rc = self.proc.wait()
      err = self._stderr_tail()
      self.proc = None
      sig = -rc if rc < 0 else None
      name = f"signal {sig} ({_signame(sig)})" if sig else f"exit code {rc}"
      return {"status": "fail", "kind": "crash", "exc": name, "detail": f"the process died: {name}", "stderr": err}

  def kill(self):
    if self.proc is not None and self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()
    self.proc = None

  def close(self):
    if self.proc is not None and self.proc.poll() is None:
      self.proc.stdin.close()
      try: self.proc.wait(timeout=10)
      except subprocess.TimeoutExpired: self.kill()
    self.proc = None


def _signame(sig: int | None) -> str:
  import signal
  try: return signal.Signals(sig).name
  except (ValueError, TypeError): return "?"


# ---------------------------------------------------------------------------------------------------------------
# failures: same-kind test, minimizer, standalone repro

def same_failure(a: dict, b: dict) -> bool:
  "Does result b fail the way a did (same kind; same exception type or signal; same output checked)?"
  if b.get("status") != "fail" or a.get("kind") != b.get("kind"): return False
  if a["kind"] in ("exception", "crash"): return a.get("exc") == b.get("exc")
  if a["kind"] == "dtype": return b["detail"].split(",")[0] == a["detail"].split(",")[0]
  return True


def _dce(prog: Program, keep: list[str]) -> Program:
  "Drop steps and inputs the kept values don't depend on (statements on live values stay)."
  need = set(keep) | ({prog.grad_out} if prog.grad_out else set())
  steps = []
  for st in reversed(prog.steps):
    target = st.out if st.out is not None else st.srcs[0]
    if target in need or (st.out is None and st.srcs[0] in need):
      steps.append(st)
      need.update(s for s in st.srcs if isinstance(s, str))
  steps.reverse()
  inputs = [(n, a, rg) for n, a, rg in prog.inputs if n in need]
  return replace(prog, inputs=inputs, steps=steps, outputs=[o for o in prog.outputs if o in keep])


def _valid(prog: Program) -> bool:
  try:
    prog.reference()
    return True
  except Exception: return False


def _candidates(prog: Program, failure: dict):
  "Smaller programs to try, most promising first."
  outs = prog.outputs
  fo = failure.get("output")
  if fo in outs and len(outs) > 1: yield _dce(replace(prog, outputs=[fo]), [fo])
  if len(outs) > 1:  # (a crash doesn't say which output it was computing)
    for o in outs:
      rest = [x for x in outs if x != o]
      yield _dce(replace(prog, outputs=rest), rest)
  # an earlier value as the only output (the smallest prefix that still fails)
  if prog.grad_out is None and failure.get("kind") not in ("grad",):
    for st in prog.steps:
      if st.out is not None and st.out not in outs: yield _dce(replace(prog, outputs=[st.out]), [st.out])
  # bypass one step: its users read one of its operands instead (same shape and dtype), or drop a statement
  ref = prog.reference()
  for i in reversed(range(len(prog.steps))):
    st = prog.steps[i]
    if st.out is None:
      yield replace(prog, steps=prog.steps[:i] + prog.steps[i + 1:])
      continue
    for s in st.srcs:
      if not isinstance(s, str) or s not in ref or st.out not in ref: continue
      if ref[s].shape != ref[st.out].shape or ref[s].dtype != ref[st.out].dtype: continue
      def sub(x, s=s, out=st.out): return s if x == out else x
      steps = [replace(t, srcs=tuple(sub(x) for x in t.srcs)) for t in prog.steps[i + 1:]]
      outputs = [sub(o) for o in prog.outputs]
      yield _dce(replace(prog, steps=prog.steps[:i] + steps, outputs=outputs,
                         grad_out=sub(prog.grad_out) if prog.grad_out else None), outputs)
  # simpler input values: fewer digits
  for k, (n, arr, rg) in enumerate(prog.inputs):
    if arr.dtype.kind == "f" and arr.size:
      with np.errstate(all="ignore"):
        simple = np.where(np.isfinite(arr), np.round(arr.astype(np.float64), 1), arr).astype(arr.dtype)
      if not np.array_equal(simple, arr, equal_nan=True):
        yield replace(prog, inputs=prog.inputs[:k] + [(n, simple, rg)] + prog.inputs[k + 1:])


def _size(prog: Program) -> tuple[int, int, int]:
  return (len(prog.steps), sum(a.size for _, a, _ in prog.inputs), len(prog.inputs))


def minimize(prog: Program, failure: dict, run: Callable[[Program], dict], budget_s: float = 30.0,
             max_runs: int = 150) -> tuple[Program, dict]:
  "Greedy shrinking: accept any smaller candidate that still fails the same way, until nothing helps."
  deadline, runs = time.monotonic() + budget_s, 0
  improved = True
  while improved and time.monotonic() < deadline and runs < max_runs:
    improved = False
    for cand in _candidates(prog, failure):
      if time.monotonic() > deadline or runs >= max_runs: break
      if not cand.outputs or not _valid(cand): continue
      if _size(cand) >= _size(prog) and cand.inputs is prog.inputs: continue
      runs += 1
      res = run(cand)
      if same_failure(failure, res):
        prog, failure, improved = cand, res, True
        break
  return prog, failure


def np_literal(arr: np.ndarray) -> str:
  "Exact Python source for a numpy array."
  def one(x):
    if arr.dtype == np.bool_: return repr(bool(x))
    if arr.dtype.kind in "iu": return repr(int(x))
    x = arr.dtype.type(x)
    if np.isnan(x): return "np.nan"
    if np.isinf(x): return "np.inf" if x > 0 else "-np.inf"
    s = str(x)
    return s if arr.dtype.type(float(s)) == x else repr(float(x))
  flat = ", ".join(one(x) for x in arr.reshape(-1))
  dt = f"np.{arr.dtype.name}" if arr.dtype != np.bool_ else "bool"
  if arr.ndim == 0: return f"np.array({one(arr.item())}, dtype={dt})"
  text = f"np.array([{flat}], dtype={dt})"
  return text if arr.ndim == 1 else f"{text}.reshape{arr.shape}"


def repro(prog: Program, device: str, res: dict) -> str:
  "A standalone snippet that shows the failure, with what the reference expects."
  lines = ["from tinylit import Tensor, dtypes", "import numpy as np", f'DEV = "{device}"']
  for n, arr, rg in prog.inputs:
    lines.append(f"{n} = Tensor({np_literal(arr)}, device=DEV{', requires_grad=True' if rg else ''})")
  lines += prog.lines()
  ref = prog.reference(res.get("aliases"))
  if res.get("kind") == "grad" or (prog.grad_out and res.get("where") in ("backward()",)):
    lines.append(f"({prog.grad_out} * Tensor({np_literal(prog.grad_w)}, device=DEV)).sum().backward()")
    g = res.get("output", "")
    if g: lines.append(f"print({g}.numpy())  # compare: torch.autograd on the same program")
  else:
    outs = [res["output"]] if res.get("output") in prog.outputs else prog.outputs
    for o in outs:
      r = ref[o]
      lines.append(f"print({o}.dtype, {o}.numpy())")
      exp = np.array2string(r.v, threshold=40, precision=8, separator=", ")
      lines.append(f"# expected dtypes.{r.dtype} {exp.replace(chr(10), ' ')}" +
                   ("  (some elements: don't care)" if (r.e == np.inf).any() else ""))
  return "\n".join(lines)


@dataclass
class Failure:
  device: str
  origin: str
  program: Program
  result: dict
  count: int = 1

  def signature(self) -> str:
    r = self.result
    ops = sorted({st.op for st in self.program.steps})
    head = r.get("exc") if r["kind"] in ("exception", "crash") else r["kind"]
    return f"{r['kind']}:{head}:{','.join(ops)}"

  def report(self) -> str:
    r = self.result
    text = [f"--- {self.device}: {r['kind']} ({self.origin}; {self.count} program(s) of this kind)",
            f"{r.get('where', '') + ': ' if r.get('where') else ''}{r['detail']}"]
    if r.get("stderr"):
      err = r["stderr"]
      m = re.search(r"ERROR: AddressSanitizer|runtime error:|Fatal Python error|double free|corrupted", err)
      text.append("stderr:\n" + (err[max(0, m.start() - 300):m.start() + 1500] if m else err[-1500:]))
    text.append(repro(self.program, self.device, r))
    return "\n".join(text)


# ---------------------------------------------------------------------------------------------------------------
# a fuzz run: programs start..stop of a seed on one device

def fuzz(device: str, seed: int, start: int, stop: int, env: dict | None = None, minimize_budget_s: float = 20.0,
         max_minimize: int = 3, timeout: float = 120.0, opts: dict | None = None, log=None) -> dict:
  """Run programs [start, stop) of `seed` on `device` in a worker process. Returns {'caps', 'skipped', 'ran',
  'failures': [Failure]} (one entry per distinct signature, minimized for the first few), or 'unavailable'."""
  opts = dict(opts or {})
  w = Worker(env)
  try:
    caps = w.call("caps", device, timeout=timeout)
    if caps.get("status") == "fail": return {"unavailable": f"opening {device} failed: {caps['detail']}"}
    if not caps.get("ok"): return {"unavailable": caps.get("reason", "?")}
    opts.setdefault("ftz", caps.get("ftz", False))
    groups: dict[str, Failure] = {}
    ran = 0
    for i in range(start, stop):
      prog = generate(seed, i, caps)
      res = w.call("run", (prog, device, opts), timeout=timeout)
      ran += 1
      if res["status"] != "fail": continue
      if opts.get("crashes_only") and res["kind"] not in ("crash", "timeout"): continue
      f = Failure(device, prog.origin, prog, res)
      key = f"{res['kind']}:{res.get('exc', '')}:{res.get('detail', '')[:0]}"
      sig = key + ":" + ",".join(sorted({st.op for st in prog.steps}))
      groups.setdefault(sig, f)
      if groups[sig] is not f: groups[sig].count += 1
      if log: log(f"[{device} {prog.origin}] {res['kind']}: {res.get('detail', '')[:200]}")
    # minimize the first few distinct failures, and group again by their minimized signature
    final: dict[str, Failure] = {}
    for k, f in enumerate(groups.values()):
      if k < max_minimize:
        def run(p, device=device): return w.call("run", (p, device, opts), timeout=timeout)
        f.program, f.result = minimize(f.program, f.result, run, budget_s=minimize_budget_s)
      sig = f.signature()
      if sig in final: final[sig].count += f.count
      else: final[sig] = f
    notes = [] if caps.get("float16", True) else [f"{device} has no float16: programs were generated without half"]
    return {"caps": caps, "ran": ran, "failures": list(final.values()), "notes": notes}
  finally:
    w.close()


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  ap.add_argument("--device", default="CPU")
  ap.add_argument("-n", type=int, default=100, help="programs")
  ap.add_argument("--start", type=int, default=0)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--minimize", type=int, default=30, help="distinct failures to minimize")
  ap.add_argument("--minimize-budget", type=float, default=30.0, help="seconds per minimized failure")
  ap.add_argument("--crashes-only", action="store_true", help="report only crashes and timeouts (sanitizer job)")
  ap.add_argument("--show", type=int, help="print program INDEX of the seed as a repro and exit")
  ap.add_argument("-v", action="store_true")
  args = ap.parse_args(argv)
  if args.worker:
    worker_main()
    return 0
  if args.show is not None:
    print(repro(generate(args.seed, args.show), args.device, {"kind": "value"}))
    return 0
  t0 = time.monotonic()
  out = fuzz(args.device, args.seed, args.start, args.start + args.n, max_minimize=args.minimize,
             minimize_budget_s=args.minimize_budget, opts={"crashes_only": args.crashes_only},
             log=(lambda s: print(s, file=sys.stderr)) if args.v else None)
  if "unavailable" in out:
    print(f"{args.device} unavailable: {out['unavailable']}")
    return 2
  fails = out["failures"]
  print(f"{args.device}: {out['ran']} programs (seed {args.seed}, from {args.start}) in {time.monotonic() - t0:.1f} s, "
        f"{sum(f.count for f in fails)} failing, {len(fails)} distinct")
  for note in out["notes"]: print("note:", note)
  for f in sorted(fails, key=lambda f: -f.count): print("\n" + f.report())
  return 1 if fails else 0


if __name__ == "__main__":
  sys.exit(main())
