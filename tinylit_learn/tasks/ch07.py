"""Chapter 7, the C renderer (nbs/07_render.ipynb): constants (`_render_const`) and integer division
(`CStyleLanguage.render_int_div`). The checks compile what the renderer writes with the system C compiler and run it:
what counts is the value and type C gives the text, not the text."""
import os, subprocess, tempfile
from pathlib import Path

from tinylit_learn.tasks import Fail, Task, case, expect


def run_c(cases: list[tuple[str, str]]) -> list[str]:
  """Compile and run one C program made of `cases` (name, statements that print one line); one output line per case.
  A case that kills the program (x86 traps INT_MIN/-1) is named by the first line that did not come."""
  body = "\n".join(f"  {{ {stmts} fflush(stdout); }}" for _, stmts in cases)
  src = f"#include <math.h>\n#include <stdio.h>\nint main(void) {{\n{body}\n  return 0;\n}}\n"
  with tempfile.TemporaryDirectory() as tmp:
    exe = Path(tmp) / "check"
    cc = subprocess.run([os.getenv("CC", "cc"), "-O1", "-x", "c", "-", "-o", str(exe), "-lm"], input=src, capture_output=True, text=True)
    if cc.returncode != 0:
      first = next((ln for ln in cc.stderr.splitlines() if "error" in ln), cc.stderr.strip()[:300])
      raise Fail(f"the C compiler rejects what was rendered: {first}")
    proc = subprocess.run([str(exe)], capture_output=True, text=True)
  lines = proc.stdout.splitlines()
  if proc.returncode != 0 and len(lines) < len(cases):
    how = f"signal {-proc.returncode}" + (" (SIGFPE: a division trapped)" if proc.returncode == -8 else "") if proc.returncode < 0 \
      else f"exit code {proc.returncode}"
    raise Fail(f"{cases[len(lines)][0]}: the compiled program died ({how})")
  return lines


def check_render_const():
  import math
  import numpy as np
  from tinylit.dtype import dtypes
  from tinylit.ops import UOp
  from tinylit.renderer import ClangRenderer, _render_const
  r = ClangRenderer()
  f32 = float(np.float32(0.1))
  values = [(dtypes.float32, 1.5), (dtypes.float32, f32), (dtypes.float32, -0.0), (dtypes.float32, math.nan),
            (dtypes.float32, math.inf), (dtypes.float32, -math.inf), (dtypes.float64, 0.1), (dtypes.float64, -math.inf),
            (dtypes.float16, 0.5), (dtypes.float16, math.inf), (dtypes.float16, math.nan), (dtypes.bool, True),
            (dtypes.bool, False), (dtypes.int8, -128), (dtypes.uint8, 255), (dtypes.int16, -300), (dtypes.int32, 5),
            (dtypes.int32, -2**31), (dtypes.uint32, 2**32 - 1), (dtypes.int64, 2**40), (dtypes.int64, -2**63),
            (dtypes.uint64, 2**64 - 1)]
  cases = []
  for dt, v in values:
    name = f"the {dt} constant {v!r}"
    with case(name):
      text = _render_const(r, UOp.const(dt, v))
      expect(isinstance(text, str), f"expected a str of C, got {text!r}")
    t = r.render_dtype(dt)
    if dtypes.is_float(dt):
      show = f'printf("%a %d %d %d\\n", (double)v, isnan((double)v) != 0, signbit((double)v) != 0, (int)sizeof({text}));'
    elif dtypes.is_unsigned(dt): show = f'printf("%llu %d\\n", (unsigned long long)v, (int)sizeof({text}));'
    else: show = f'printf("%lld %d %d\\n", (long long)v, (int)sizeof({text}), ({text}) < 0);'
    cases.append((name, f"{t} v = {text}; {show}"))
  with case("compiling the constants"):
    lines = run_c(cases)
  for (dt, v), (name, _), line in zip(values, cases, lines):
    with case(f"{name}, rendered as {_render_const(r, UOp.const(dt, v))}"):
      got = line.split()
      if dtypes.is_float(dt):
        want = np.asarray(v, dtype=dt.np)
        expect(got[1] == "1" if math.isnan(v) else float.fromhex(got[0]) == float(want) and got[2] == str(int(math.copysign(1, v) < 0)),
               f"C reads it as {got[0]}{' (NaN)' if got[1] == '1' else ''}, expected {float(want)!r}")
        expect(int(got[3]) == dt.itemsize, f"its C type has {got[3]} bytes: expected a {dt.name} ({dt.itemsize}), so that "
               "arithmetic with it stays in that type")
      else:
        expect(int(got[0]) == int(v), f"C reads it as {got[0]}, expected {int(v)}")
        if dt in (dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64):
          expect(int(got[1]) == dt.itemsize, f"its C type has {got[1]} bytes, expected {dt.itemsize}")
        if not dtypes.is_unsigned(dt) and dt != dtypes.bool:
          expect(got[2] == str(int(v < 0)), f"C thinks ({'it'}) < 0 is {got[2] == '1'}: the literal's type is unsigned "
                 "(a negative literal is minus a positive one, which must fit the signed type)")


def _trunc_div(a: int, b: int, idiv: bool, bits: int, signed: bool) -> int:
  "What tinylit defines (chapter 3): C's division toward zero, x/0 = x%0 = 0, wrapped to the type (INT_MIN/-1 is INT_MIN)."
  if b == 0: return 0
  q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
  out = q if idiv else a - q * b
  out %= 2 ** bits
  return out - 2 ** bits if signed and out >= 2 ** (bits - 1) else out


def check_render_int_div():
  from tinylit.dtype import dtypes
  from tinylit.ops import Ops, UOp
  from tinylit.renderer import ClangRenderer
  r = ClangRenderer()
  cases, want = [], []
  for dt in (dtypes.int32, dtypes.int64, dtypes.int8, dtypes.uint32):
    bits, signed = 8 * dt.itemsize, not dtypes.is_unsigned(dt)
    lo = -(2 ** (bits - 1)) if signed else 0
    pairs = [(7, 2), (7, 0), (0, 0), (lo + 5, 3)] + ([(-7, 2), (7, -2), (-7, -2), (lo, -1), (lo, 1)] if signed else [(2 ** bits - 1, 2)])
    for op in (Ops.IDIV, Ops.MOD):
      sym = "/" if op is Ops.IDIV else "%"
      for a, b in pairs:
        for const_divisor in (False, True):
          name = f"{dt} {a} {sym} {b}" + (" (a constant divisor)" if const_divisor else " (a divisor known at run time)")
          av = UOp(Ops.DEFINE_VAR, dt, (), ("a", lo, 2 ** (bits - 1) - 1))
          bv = UOp.const(dt, b) if const_divisor else UOp(Ops.DEFINE_VAR, dt, (), ("b", lo, 2 ** (bits - 1) - 1))
          with case(name):
            b_text = _literal(b, dt) if const_divisor else "b"
            text = r.render_int_div(UOp(op, dt, (av, bv), None), "a", b_text)
            expect(isinstance(text, str), f"expected a str of C, got {text!r}")
          t, fmt = r.render_dtype(dt), ("%llu", "unsigned long long") if not signed else ("%lld", "long long")
          cases.append((name, f"volatile {t} a = {_literal(a, dt)}; volatile {t} b = {_literal(b, dt)}; {t} r = {text}; "
                              f'printf("{fmt[0]}\\n", ({fmt[1]})r); (void)b;'))
          want.append(_trunc_div(a, b, op is Ops.IDIV, bits, signed))
  with case("compiling the divisions"):
    lines = run_c(cases)
  for (name, _), w, line in zip(cases, want, lines):
    with case(name):
      expect(int(line) == w, f"gives {line}, expected {w}")


def _literal(v: int, dt) -> str:
  "A C literal of `v` in the type of `dt`, written here (not by the renderer being checked)."
  from tinylit.dtype import dtypes
  t = {dtypes.int32: "int", dtypes.int64: "long long", dtypes.int8: "signed char", dtypes.uint32: "unsigned int"}[dt]
  return f"(({t})({v + 1}LL-1))" if v < 0 else f"(({t}){v}ULL)"


TASKS = [
  Task("07.1", "write _render_const: the C text of a constant UOp (x.arg, x.dtype) that C reads as exactly that value, "
       "in that type: a float32 literal with f (repr() gives the shortest exact digits), NAN and INFINITY from math.h, "
       "narrow types through a cast, a suffix for 64-bit and unsigned ints, and the minimum of int32/int64 written so "
       "that no literal overflows. Vectors (dt.count > 1) and bfloat16 are given at the top; ctx.render_dtype names a type.",
       "C has no negative literals: -2147483648 is -(2147483648), which does not fit an int; (-2147483647-1) is an int.",
       check_render_const),
  Task("07.2", "write CStyleLanguage.render_int_div: C text for integer a/b or a%b (x.op IDIV or MOD) as chapter 3 defines "
       "them: toward zero, x/0 and x%0 are 0, and INT_MIN/-1 wraps to INT_MIN (INT_MIN%-1 is 0). C leaves both undefined "
       "and x86 traps, so test the divisor first; a constant divisor (x.src[1].op is Ops.CONST) needs no test at run time.",
       "int8/int16 divide as int in C (no trap); int32/int64 by -1: negate through the unsigned type, which wraps.",
       check_render_int_div),
]
