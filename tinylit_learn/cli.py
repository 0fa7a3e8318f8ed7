"""`tinylit-learn`: the learner track's command line (issue 30's interface).

  tinylit-learn init DIR        a workspace: the course's notebooks, a copy of the package they import, the references
  tinylit-learn start CH        (in DIR) blank chapter CH's tasks: its notebook's task bodies raise NotImplementedError
  tinylit-learn test CH         export the chapter's notebook into the workspace's package, grade its tasks, then run
                                the downstream checks (the chapter's notebook, and the fuzzer for compiler chapters)
  tinylit-learn reveal CH.N     write task CH.N's reference into the learner's notebook
  tinylit-learn status          chapters started and passed, tasks done, milestones

This module never imports `tinylit`: grading runs in a child process whose `tinylit` is the workspace's."""
from __future__ import annotations

import argparse, json, os, shutil, subprocess, sys, textwrap
from pathlib import Path

from tinylit_learn import notebook
from tinylit_learn.tasks import CHAPTERS, COMPILER_CHAPTERS, tasks

STATE_DIR = ".tinylit-learn"    # in a workspace: state.json, the reference notebooks, the fuzzer
REPO = Path(__file__).resolve().parents[1]
FUZZ_PROGRAMS = 6               # the downstream fuzz run: a few programs, a few seconds
# A milestone is reached when every core chapter under it runs on the learner's code: started, every task passed.
# (the scheduler's core chapter is 4, its three phases; 4a's memory planner, like 5a's rules, is not needed for one)
CORE = ["01b", "02", "03a", "04", "05", "06", "07", "08", "09"]
MILESTONES = {"your compiler trains the digits CNN (nbs/11_capstone_digits.ipynb)": CORE,
              "your compiler trains and samples the GPT (nbs/12_capstone_gpt.ipynb)": CORE}


class UsageError(Exception): pass


# ---- the workspace
def find_workspace(start: Path | None = None) -> Path:
  for d in [(start or Path.cwd()).resolve(), *(start or Path.cwd()).resolve().parents]:
    if (d / STATE_DIR / "state.json").exists(): return d
  raise UsageError("not in a workspace: run `tinylit-learn init DIR`, then run the commands inside DIR")


def load_state(ws: Path) -> dict:
  return json.loads((ws / STATE_DIR / "state.json").read_text())


def save_state(ws: Path, state: dict) -> None:
  (ws / STATE_DIR / "state.json").write_text(json.dumps(state, indent=1) + "\n")


def chapter_notebook(ws: Path, chapter: str, reference: bool = False) -> Path:
  folder = ws / STATE_DIR / "reference" if reference else ws / "nbs"
  found = sorted(folder.glob(f"{chapter}_*.ipynb"))
  if chapter not in CHAPTERS or len(found) != 1:
    raise UsageError(f"no chapter {chapter!r} with tasks; chapters with tasks: {' '.join(CHAPTERS)}")
  return found[0]


def init(target: Path) -> Path:
  "Copy the course into a new workspace: learner notebooks, the learner's package, and what grading needs."
  if not (REPO / "nbs").is_dir() or not (REPO / "tinylit" / "__init__.py").exists():
    raise UsageError(f"the course's notebooks are not beside {Path(__file__).parent}: init needs a clone of the "
                     "repository (`make learn` in it), not an installed wheel")
  if target.exists() and any(target.iterdir()): raise UsageError(f"{target} exists and is not empty")
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".quarto", "sidebar.yml")
  shutil.copytree(REPO / "nbs", target / "nbs", ignore=ignore, dirs_exist_ok=True)
  shutil.copytree(REPO / "tinylit", target / "tinylit", ignore=ignore)
  shutil.copytree(REPO / "nbs", target / STATE_DIR / "reference", ignore=ignore)
  shutil.copy(REPO / "tests" / "fuzz.py", target / STATE_DIR / "fuzz.py")
  save_state(target, {"started": [], "passed": {}})
  (target / "README.md").write_text(textwrap.dedent("""\
    # Your tinylit workspace

    The notebooks in nbs/ import the package in tinylit/ beside them: yours. `tinylit-learn start 05` blanks chapter
    5's tasks in nbs/05_pattern.ipynb (look for `raise NotImplementedError("task 05.1 ...")`); write them, then
    `tinylit-learn test 05`. `tinylit-learn status` shows where you are; `tinylit-learn reveal 05.1` writes a task's
    reference into your notebook. Chapters you have not started run the course's own code.
    """))
  return target


def export(ws: Path, chapter: str) -> None:
  "nbdev's export of the learner's notebook into the workspace's package: that chapter's module only."
  from nbdev.export import nb_export
  # nbdev writes the notebook's path relative to the package (`../nbs/05_pattern.ipynb`), as in the repository
  nb_export(chapter_notebook(ws, chapter), ws / "tinylit")


def start(ws: Path, chapter: str) -> list[str]:
  state = load_state(ws)
  path = chapter_notebook(ws, chapter)
  if chapter in state["started"]: raise UsageError(f"chapter {chapter} is started already (your code stays as it is)")
  nb = notebook.read(path)
  statements = {t.id: t for t in tasks(chapter)}
  for tid, places in notebook.find_tasks(nb).items():
    task, first = statements[tid], places[0][1][0]
    for cell_index, targets in places:
      cell = nb["cells"][cell_index]
      src = notebook.source(cell)
      for target in targets:
        words = textwrap.wrap(f"task {tid}: {task.statement}", 100) + textwrap.wrap(f"hint: {task.hint}", 100) \
          if target == first else [f"task {tid}, continued (its statement is at {first})"]
        src = notebook.blank(src, target, f"task {tid}: write {target}", words)
      notebook.set_source(cell, src)
      cell["outputs"], cell["execution_count"] = [], None
  notebook.write(path, nb)
  export(ws, chapter)
  state["started"].append(chapter)
  save_state(ws, state)
  return [t.id for t in tasks(chapter)]


def reveal(ws: Path, task_id: str) -> str:
  chapter = task_id.split(".")[0]
  ref = notebook.read(chapter_notebook(ws, chapter, reference=True))
  path = chapter_notebook(ws, chapter)
  nb = notebook.read(path)
  ref_tasks = notebook.find_tasks(ref)
  if task_id not in ref_tasks: raise UsageError(f"no task {task_id}; chapter {chapter}'s: {' '.join(ref_tasks)}")
  # the learner's cells are the reference's (the same notebook, bodies changed): the same indices
  written = []
  for cell_index, targets in ref_tasks[task_id]:
    cell, ref_src = nb["cells"][cell_index], notebook.source(ref["cells"][cell_index])
    src = notebook.source(cell)
    for target in targets:
      src = notebook.replace_definition(src, target, notebook.definition(ref_src, target))
    notebook.set_source(cell, src)
    written += targets
  notebook.write(path, nb)
  export(ws, chapter)   # the package follows the notebook at once: other chapters' tests run this code too
  return f"wrote the reference of task {task_id} ({', '.join(written)}) into nbs/{path.name} and exported it"


# ---- grading
def child_env(ws: Path) -> dict:
  "The environment of grading processes: the workspace's package first on the path, the kernel width of the course."
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([str(ws), *filter(None, [env.get("PYTHONPATH")])])
  env.setdefault("CPU_VECTOR_WIDTH", "16")
  return env


def grade_tasks(ws: Path, ids: list[str]) -> dict[str, dict]:
  """Run the checks in child processes; one whose process dies or hangs fails alone, and a new process runs the rest.
  (The child stops a check that runs past TASK_SECONDS itself; the limit here catches a hang inside compiled code.)"""
  from tinylit_learn.grade import TASK_SECONDS
  results: dict[str, dict] = {}
  while pending := [t for t in ids if t not in results]:
    try:
      proc = subprocess.run([sys.executable, "-m", "tinylit_learn.grade", str(ws), *pending], cwd=ws, env=child_env(ws),
                            capture_output=True, text=True, timeout=TASK_SECONDS * len(pending) + 60)
      out, err, died = proc.stdout, proc.stderr, proc.returncode != 0
      why = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired as e:
      out, err, died, why = e.stdout or "", "", True, "it hung"
      out = out.decode() if isinstance(out, bytes) else out
    for line in out.splitlines():
      if line.startswith('{"task"'):
        r = json.loads(line)
        results[r["task"]] = {"passed": r["passed"], "message": r["message"]}
    if died and (left := [t for t in ids if t not in results]):
      tail = (err.strip().splitlines() or [""])[-1]
      results[left[0]] = {"passed": False, "message": f"the grading process died ({why}) {tail}".strip()}
  return {t: results[t] for t in ids}


def downstream(ws: Path, chapter: str) -> dict[str, dict]:
  "The chapter's notebook top to bottom on the learner's package; for compiler chapters, a few fuzzer programs too."
  out = {}
  nb = ws / "nbs" / chapter_notebook(ws, chapter).name
  proc = subprocess.run([sys.executable, "-m", "tinylit_learn.grade", str(ws), "--notebook", str(nb)], cwd=ws,
                        env=child_env(ws), capture_output=True, text=True)
  out["notebook"] = {"passed": proc.returncode == 0, "message": f"nbs/{nb.name} runs top to bottom" if proc.returncode == 0
                     else f"nbs/{nb.name} fails: {(proc.stdout.strip() or proc.stderr.strip()).splitlines()[-1:]}"}
  if chapter in COMPILER_CHAPTERS:
    proc = subprocess.run([sys.executable, str(ws / STATE_DIR / "fuzz.py"), "--device", "CPU", "-n", str(FUZZ_PROGRAMS),
                           "--minimize", "0"], cwd=ws, env=child_env(ws), capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    out["fuzz"] = {"passed": proc.returncode == 0, "message": (lines[0] if proc.returncode == 0 else " ".join(lines[:3])) if lines
                   else proc.stderr.strip()[-300:]}
  return out


def test(ws: Path, chapter: str, run_downstream: bool = True) -> dict:
  chapter_notebook(ws, chapter)   # a chapter with tasks, or a clear error
  export(ws, chapter)
  results = {"tasks": grade_tasks(ws, [t.id for t in tasks(chapter)])}
  if run_downstream and all(r["passed"] for r in results["tasks"].values()):
    results["downstream"] = downstream(ws, chapter)
  state = load_state(ws)
  state["passed"][chapter] = [t for t, r in results["tasks"].items() if r["passed"]]
  save_state(ws, state)
  return results


def status(ws: Path) -> dict:
  state = load_state(ws)
  chapters = {ch: {"tasks": [t.id for t in tasks(ch)], "started": ch in state["started"],
                   "passed": state["passed"].get(ch, [])} for ch in CHAPTERS}
  def done(ch: str) -> bool:   # a core chapter without tasks yet runs the course's code: not the learner's
    return ch in chapters and chapters[ch]["started"] and set(chapters[ch]["passed"]) == set(chapters[ch]["tasks"])
  return {"chapters": chapters, "milestones": {name: all(map(done, needs)) for name, needs in MILESTONES.items()}}


# ---- the command line
def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="tinylit-learn", description="Build tinylit yourself: the learner track.")
  sub = ap.add_subparsers(dest="command", required=True)
  sub.add_parser("init", help="make a workspace in DIR").add_argument("dir", type=Path)
  sub.add_parser("start", help="blank chapter CH's tasks in your notebook and package").add_argument("chapter")
  t = sub.add_parser("test", help="grade chapter CH's tasks on your package, then its downstream checks")
  t.add_argument("chapter")
  t.add_argument("--json", action="store_true")
  t.add_argument("--no-downstream", action="store_true", help="grade the tasks only")
  sub.add_parser("reveal", help="write task CH.N's reference into your notebook").add_argument("task")
  sub.add_parser("status", help="chapters started and passed, milestones").add_argument("--json", action="store_true")
  args = ap.parse_args(argv)
  try:
    if args.command == "init":
      ws = init(args.dir.resolve())
      print(f"workspace ready in {ws}: cd there, then `tinylit-learn start {CHAPTERS[0]}` (chapters with tasks: "
            f"{' '.join(CHAPTERS)})")
      return 0
    ws = find_workspace()
    if args.command == "start":
      ids = start(ws, args.chapter)
      print(f"chapter {args.chapter} started: tasks {' '.join(ids)} now raise NotImplementedError in "
            f"nbs/{chapter_notebook(ws, args.chapter).name}; write them, then `tinylit-learn test {args.chapter}`")
    elif args.command == "reveal":
      print(reveal(ws, args.task))
    elif args.command == "test":
      res = test(ws, args.chapter, run_downstream=not args.no_downstream)
      ok = all(r["passed"] for part in ("tasks", "downstream") for r in res.get(part, {}).values())
      if args.json: print(json.dumps(res, indent=1))
      else:
        for name, r in [*res["tasks"].items(), *res.get("downstream", {}).items()]:
          print(f"{name:9} {'pass' if r['passed'] else 'FAIL'}  {'' if r['passed'] and name in res['tasks'] else r['message']}".rstrip())
        if "downstream" not in res and not args.no_downstream: print("(the downstream checks run once every task passes)")
      return 0 if ok and (args.no_downstream or "downstream" in res) else 1
    elif args.command == "status":
      st = status(ws)
      if args.json: print(json.dumps(st, indent=1))
      else:
        for ch, c in st["chapters"].items():
          print(f"{ch:4} {'started' if c['started'] else 'not started':12} {len(c['passed'])}/{len(c['tasks'])} tasks passed")
        for name, reached in st["milestones"].items():
          missing = [ch for ch in MILESTONES[name] if ch not in CHAPTERS]
          print(f"{'[x]' if reached else '[ ]'} {name}" + (f" (once chapters {', '.join(missing)} have tasks)" if missing else ""))
    return 0
  except UsageError as e:
    print(f"tinylit-learn: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
