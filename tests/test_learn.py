"""The learner track's grader is honest (issue 30). Each check builds a workspace the way `tinylit-learn init` does and
grades it in child processes, as the command line does:

- every task is marked in its chapter's notebook and has a statement, a hint and a check, and its functions exist;
- with every chapter started (all task bodies blank), every task fails, each saying that it is not written yet;
- with every task revealed, every task passes, and the learner's package is again exactly the repository's;
- a planted wrong answer per task (an off-by-one, a missing case: `PLANTED` below) fails that task, naming the case;
- grading imports the workspace's package, never the repository's: a workspace whose package is broken fails;
- a syntax error names its line, and an endless loop fails its own task after a time limit;
- the commands' interface (`test --json`, `status --json`) and, for chapter 05, the downstream checks: the chapter's
  notebook top to bottom and a few fuzzer programs, on the learner's package (every chapter's: test_learn_downstream.py).
"""
import json, os, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tinylit_learn import cli, notebook  # noqa: E402
from tinylit_learn.tasks import CHAPTERS, tasks  # noqa: E402

ALL = [t.id for ch in CHAPTERS for t in tasks(ch)]
# task: (function, its reference's text, a wrong version of it, words the failure must contain)
PLANTED = {
  "01b.1": ("Div.backward", "-(grad * self.ret) / self.y", "(grad * self.ret) / self.y", "Div.backward, both inputs"),
  "01b.2": ("Maximum.backward", "tie = self.x.ne(self.y).where(0, grad * 0.5)", "tie = grad.const_like(0)", "at a tie"),
  "02.1": ("fold_alu", "for a, b in ((x, y), (y, x)):", "for a, b in ((x, y),):", "an identity: 0 + x"),
  "02.2": ("fold_reduce", "exec_alu(Ops.MUL, dtype, [value, n])", "exec_alu(Ops.MUL, dtype, [value, n - 1])",
           "sum of 5 copies of 7"),
  "03.1": ("_trunc_div", "q + 1, q)", "q, q)", "_trunc_div: [7, -7, 7, -7, 0, 5, 6] // [2, 2, -2, -2, 3, 0, 3]"),
  "03.2": ("_float_to_int", "if dtype != dtypes.uint64: return truncate(x).astype(dtype.np)",
           "return truncate(x).astype(dtype.np)", "to uint64"),
  "03a.1": ("View.shrink", "(max(0, mlo - lo), max(0, min(mhi - lo, hi - lo)))", "(mlo, mhi)", "of a padded view"),
  "03a.2": ("View.pad", "mask = tuple((b, s + b) for", "mask = tuple((b, s + b - 1) for",
            "pad((1, 2), (0, 1)) of a contiguous"),
  "04.1": ("order", "if i != j and not any(o in d.after[a] for o in kernels[i])", "if i != j",
           "a kernel that reads a write's result and its target runs after the write"),
  "04.2": ("Decider.realizes", "if self.read_too_late(b, kernels): return True", "if False: return True",
           "old = x + 1; x.assign(x * 2); old * x (rule 6"),
  "04a.1": ("internal_memory_planner", "if device == unit.device and last[tenant] < i]", "if device == unit.device and last[tenant] <= i]",
            "A and B are both used at step 1"),
  "04a.2": ("memory_planner", "{b for si in schedule for b in si.bufs} - temps", "set()", "left alone"),
  "05.1": ("UPat.match", "if bound is not uop: return []", "pass",
           "a name used twice"),
  "05.2": ("graph_rewrite", "else rewrite(rw)", "else rw", "rewritten again"),
  "05a.1": ("div_mod_fold", "if rem.vmin >= 0 and rem.vmax < d and", "if rem.vmin >= 0 and rem.vmax <= d and",
            "(a*8 + b8) // 8, b8 in [0, 8]"),
  "05a.2": ("fold_by_bounds", "x.vmin == x.vmax", "x.vmin <= x.vmax", "fold_by_bounds: a + 1 with a in [0, 5]"),
  "06.1": ("_thread_dims", "shared = max(n - max_dims + 1, 1)", "shared = max(n - max_dims, 1)", "loops of sizes [2, 3, 4, 5]"),
  "06.2": ("linearize", "(u.src[:1] if u.op is Ops.DEFINE_ACC else u.src)", "u.src", "the kernels of a.sum()"),
  "07.1": ("_render_const", 'if dt == dtypes.int32 and v == dtypes.min(dt): return f"({v + 1}-1)"', "pass",
           "the dtypes.int32 constant -2147483648"),
  "07.2": ("CStyleLanguage.render_int_div", "return zero if d.arg == 0 else (", "return (", "dtypes.int32 7 / 0 (a constant divisor)"),
  "08.1": ("LRUAllocator.free_cache", "blocks.clear()", "pass", "free_cache gives every cached block back"),
  "08d.1": ("PythonProgram._address", "idx[..., None] + np.arange(count)", "idx[..., None] + np.arange(1, count + 1)",
            "a vector of 4 floats"),
  "08d.2": ("PythonProgram._bitcast", "if src_dt == dtypes.bfloat16 else x.astype(src_dt.np)",
            "if False else x.astype(src_dt.np)", "bfloat16 values (held as float32) as uint16"),
  "09.1": ("_returned_tensors", "if id(ret) in seen: return []", "if False: return []", "the same tensor returned twice"),
  "09.2": ("_map_tensors", "if id(ret) not in done: done[id(ret)] = fn(ret)", "done[id(ret)] = fn(ret)",
           "the same tensor returned twice"),
  "08.2": ("Compiler.cache_get", "if data[:32] == key and hashlib.sha256(data[64:]).digest() == data[32:64] else None",
           "if data[:32] == key else None", "a damaged file"),
}


def make_workspace(path: Path, reveal: bool) -> Path:
  ws = cli.init(path)
  for ch in CHAPTERS: cli.start(ws, ch)
  if reveal:
    for tid in ALL: cli.reveal(ws, tid)
  return ws


@pytest.fixture(scope="module")
def revealed(tmp_path_factory) -> Path:
  return make_workspace(tmp_path_factory.mktemp("learn") / "revealed", reveal=True)


def test_tasks_are_marked_and_stated():
  assert len(CHAPTERS) == len(set(CHAPTERS))
  for ch in CHAPTERS:
    nb = notebook.read(next((ROOT / "nbs").glob(f"{ch}_*.ipynb")))
    marked = notebook.find_tasks(nb)
    stated = [t.id for t in tasks(ch)]
    assert len(stated) >= 2 and sorted(marked) == sorted(stated), (ch, sorted(marked), stated)
    for places in marked.values():
      for cell, targets in places:
        for target in targets: assert notebook.definition(notebook.source(nb["cells"][cell]), target).startswith("def ")
    for t in tasks(ch): assert len(t.statement) > 80 and t.hint, t.id
  assert set(PLANTED) == set(ALL), "every task needs a planted wrong answer"


def test_blank_fails_every_task(tmp_path):
  ws = make_workspace(tmp_path / "blank", reveal=False)
  results = cli.grade_tasks(ws, ALL)
  for tid, r in results.items():
    assert not r["passed"] and r["message"] == f"not written yet: task {tid} raises NotImplementedError", (tid, r)


def test_revealed_passes_every_task(revealed):
  results = cli.grade_tasks(revealed, ALL)
  assert all(r["passed"] for r in results.values()), {t: r for t, r in results.items() if not r["passed"]}
  for path in (ROOT / "tinylit").rglob("*.py"):   # revealing gives back the reference, byte for byte
    assert (revealed / path.relative_to(ROOT)).read_text() == path.read_text(), path


def test_planted_wrong_answers_fail_and_name_the_case(tmp_path):
  "One chapter at a time (a wrong symbolic rule would break the linearizer's kernels too); its tasks' checks are apart."
  ws = make_workspace(tmp_path / "planted", reveal=True)
  for ch in CHAPTERS:
    planted = {tid: p for tid, p in PLANTED.items() if tid.split(".")[0] == ch}
    path = cli.chapter_notebook(ws, ch)
    nb = notebook.read(path)
    for tid, (target, right, wrong, _) in planted.items():
      cell = next(nb["cells"][i] for i, targets in notebook.find_tasks(nb)[tid] if target in targets)
      src = notebook.source(cell)
      old = notebook.definition(src, target)
      assert old.count(right) == 1, (tid, right)
      notebook.set_source(cell, notebook.replace_definition(src, target, old.replace(right, wrong)))
    notebook.write(path, nb)
    cli.export(ws, ch)
    results = cli.grade_tasks(ws, list(planted))
    for tid, (_, _, _, words) in planted.items():
      assert not results[tid]["passed"] and words in results[tid]["message"], (tid, results[tid])
    for tid in planted: cli.reveal(ws, tid)


def test_grading_never_imports_the_repository_package(tmp_path):
  ws = cli.init(tmp_path / "broken")
  (ws / "tinylit" / "__init__.py").write_text('raise ImportError("this is the workspace\'s package")\n')
  results = cli.grade_tasks(ws, ALL[:2])
  assert all("`import tinylit` fails" in r["message"] and "workspace's package" in r["message"] for r in results.values())
  # nor does the command line, which reads every statement
  code = ("import sys, tinylit_learn.cli as c, tinylit_learn.tasks as t; [t.tasks(ch) for ch in t.CHAPTERS]; "
          "assert 'tinylit' not in sys.modules, sys.modules['tinylit']")
  subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)


def test_broken_code_fails_with_a_useful_message(tmp_path, monkeypatch):
  "A syntax error names its file and line; an endless loop fails its task alone, after the time limit."
  ws = cli.init(tmp_path / "broken")
  cli.start(ws, "05")
  path = cli.chapter_notebook(ws, "05")
  nb = notebook.read(path)
  cell_index = notebook.find_tasks(nb)["05.2"][0][0]
  blank = notebook.blank(notebook.source(nb["cells"][cell_index]), "graph_rewrite", "unused", [])
  def write_graph_rewrite(body: str):
    notebook.set_source(nb["cells"][cell_index], blank.replace("raise NotImplementedError('unused')", body))
    notebook.write(path, nb)
    cli.export(ws, "05")
  write_graph_rewrite("return (")
  for r in cli.grade_tasks(ws, ["05.1", "05.2"]).values():
    assert "`import tinylit` fails: SyntaxError" in r["message"] and "(at tinylit/pattern.py line" in r["message"], r
  monkeypatch.setenv("TINYLIT_LEARN_TASK_SECONDS", "2")
  write_graph_rewrite("while True: pass")
  results = cli.grade_tasks(ws, ["05.1", "05.2"])
  assert results["05.1"]["message"] == "not written yet: task 05.1 raises NotImplementedError"
  assert "an endless loop?" in results["05.2"]["message"], results["05.2"]


def run(ws: Path, *args: str) -> subprocess.CompletedProcess:
  "The command line, as `tinylit-learn ARGS` inside the workspace."
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  return subprocess.run([sys.executable, "-m", "tinylit_learn", *args], cwd=ws, env=env, capture_output=True, text=True)


def test_commands_and_chapter_05_downstream(revealed):
  proc = run(revealed, "test", "05", "--json")
  assert proc.returncode == 0, proc.stdout + proc.stderr
  res = json.loads(proc.stdout)
  assert set(res["tasks"]) == {t.id for t in tasks("05")} and all(r["passed"] for r in res["tasks"].values())
  assert res["downstream"]["notebook"]["passed"] and res["downstream"]["fuzz"]["passed"], res["downstream"]
  status = json.loads(run(revealed, "status", "--json").stdout)
  assert status["chapters"]["05"] == {"tasks": [t.id for t in tasks("05")], "started": True,
                                      "passed": [t.id for t in tasks("05")]}
  assert not any(status["milestones"].values()), "only chapter 05 passed: no milestone is reached"
  again = run(revealed, "start", "05")
  assert again.returncode == 2 and "started already" in again.stderr
  assert run(revealed, "reveal", "05.9").returncode == 2
  assert run(revealed, "test", "01b", "--no-downstream").returncode == 0
