"""Desk tool: a long fuzz batch, every failure minimized and sorted into the failure classes known so far (by
simple rules on the minimized program), so the new kinds stand out. Not a test (pytest doesn't collect it).

  python tests/fuzz_triage.py --device CPU -n 2000 --seed 11 > triage.txt

The rules name today's classes (the numbers of the issue "No silent wrong answers"); a failure no rule explains
is printed in full under "unexplained". Rules are heuristics: read a class's example before trusting its count."""
import argparse, re, sys, time
from collections import defaultdict

import fuzz


def _ops(prog) -> set[str]: return {st.op for st in prog.steps}


def _dtypes(prog) -> set[str]:
  ref = prog.reference()
  return {r.dtype for r in ref.values()}


def _text(prog) -> str: return "\n".join(prog.lines())


def classify(prog, res, device) -> str:
  "The first class whose rule matches the minimized failing program (or 'unexplained')."
  ops, text, detail, kind = _ops(prog), _text(prog), res.get("detail", ""), res.get("kind")
  used_inputs = {n for n, _, _ in prog.inputs if re.search(rf"\b{n}\b", text)}
  dts = _dtypes(prog)
  if kind == "crash" and ops & {"floordiv", "mod", "idiv"}: return "5 integer division crash"
  if kind == "crash": return "crash (other)"
  if "no gradient reached" in detail: return "10 where with a float condition that requires grad"
  if kind == "exception" and "doesn't require grad and has no graph" in detail: return "backward of a graph-less output"
  if kind == "exception" and "invalid ELF header" in detail: return "15 damaged compile cache (another process)"
  if len(used_inputs) >= 10: return "1 >= 11 buffers: argument order"
  if re.search(r"\.where\((\w+), \1\)", text) or "Buffer slice must be a slice object" in detail:
    return "2 dropped buffer (where(x, x), all-padding view)"
  if ops & {"assign", "iadd", "isub", "imul"}: return "11 read after in-place update"
  if "pad" in ops and ops & {"getitem", "shrink"} and kind == "value" and re.search(r"^1 of \d+ elements", detail):
    return "8 padding mask dropped (a size-1 view of padding)"
  if kind == "dtype" and "getitem" in ops and re.search(r"\[[^\]]*\ba\d+", text): return "9 tensor index changes dtype"
  if kind == "dtype" and "pad" in ops and "value=" in text: return "pad(value=...) changes the dtype"
  if kind == "dtype" and ops & {"pow", "pow_rev"} and "float16" in detail: return "pow on float16 returns float32"
  if kind == "dtype": return "dtype (other)"
  if "expected nan" in detail and ops & {"maximum", "minimum", "clip", "relu", "max", "min", "sign", "softmax",
                                         "log_softmax", "cumsum"}:
    return "6 NaN lost (max/min/clip/relu/sign)"
  if ops & {"ge", "le"} and re.search(r"expected (True|False), got (True|False)", detail): return "nan >= x is True"
  if "pad" in ops and "value=" in text and kind == "value": return "pad(value=...) through float32"
  if "float16" in dts and device == "CPU": return "17 half precision rounds late on CPU"
  if "full" in ops and "cast" in ops: return "constant cast folded without rounding"
  if ops & {"div", "mean", "floordiv", "mod", "reciprocal", "softmax", "log_softmax"} and kind in ("value", "grad"):
    return "7 inexact division"
  if ops <= {"add", "sub", "realize", "contiguous", "expand", "reshape", "permute", "cat"} and kind == "value":
    return "float additions reassociated"
  if dts & {"int8", "uint8", "int16", "uint16"} and kind == "value": return "3 narrow ints don't wrap (?)"
  if dts & {"int32", "int64"} and kind == "value" and ops & {"add", "mul", "sub", "neg"}: return "4 signed overflow (?)"
  return "unexplained"


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--device", default="CPU")
  ap.add_argument("-n", type=int, default=500)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--start", type=int, default=0)
  ap.add_argument("--budget", type=float, default=10.0, help="seconds of minimizing per failure")
  args = ap.parse_args(argv)
  t0 = time.monotonic()
  w = fuzz.Worker()
  caps = w.call("caps", args.device)
  if not caps.get("ok"):
    print(f"{args.device} unavailable: {caps}")
    return 2
  opts = {"ftz": caps.get("ftz", False)}
  classes: dict[str, list] = defaultdict(list)
  ran = 0
  for i in range(args.start, args.start + args.n):
    prog = fuzz.generate(args.seed, i, caps)
    res = w.call("run", (prog, args.device, opts))
    ran += 1
    if res["status"] != "fail": continue
    def run(p): return w.call("run", (p, args.device, opts))
    small, sres = fuzz.minimize(prog, res, run, budget_s=args.budget)
    cls = classify(small, sres, args.device)
    classes[cls].append(fuzz.Failure(args.device, prog.origin, small, sres))
    print(f"[{i}] {cls}: {sres.get('detail', '')[:120]}", file=sys.stderr, flush=True)
  w.close()
  total = sum(len(v) for v in classes.values())
  print(f"{args.device}: {ran} programs (seed {args.seed}, from {args.start}) in {time.monotonic() - t0:.0f} s, "
        f"{total} failing")
  for cls, fs in sorted(classes.items(), key=lambda kv: -len(kv[1])):
    print(f"  {len(fs):5d}  {cls}")
  for cls, fs in sorted(classes.items(), key=lambda kv: -len(kv[1])):
    shown = fs if cls in ("unexplained", "crash (other)", "dtype (other)") else sorted(fs, key=lambda f: fuzz._size(f.program))[:2]
    print(f"\n==================== {cls}: {len(fs)} ({', '.join(f.origin.split()[-1] for f in fs[:30])})")
    for f in shown: print("\n" + f.report())
  return 0


if __name__ == "__main__":
  sys.exit(main())
