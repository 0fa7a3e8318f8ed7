"""The grading process: `python -m tinylit_learn.grade WORKSPACE TASK...` runs the tasks' checks against the
workspace's `tinylit` (never the repository's: it is first on sys.path, and checked) and prints one JSON line per task,
`{"task": "05.2", "passed": false, "message": "..."}`, as soon as it is known, so that a learner's code that kills the
process (a segfault in a kernel) costs only the task that ran it: the command line starts a new process for the rest.
`python -m tinylit_learn.grade WORKSPACE --notebook PATH` runs a learner notebook top to bottom instead."""
from __future__ import annotations

import json, os, re, signal, sys, traceback
from pathlib import Path

# a check that runs longer is stopped (an endless loop in the learner's code, most likely)
TASK_SECONDS = int(os.getenv("TINYLIT_LEARN_TASK_SECONDS", "120"))


def import_learner_package(workspace: Path):
  sys.path.insert(0, str(workspace))
  import tinylit
  where = Path(tinylit.__file__).resolve()
  if not where.is_relative_to(workspace.resolve()):
    raise RuntimeError(f"imported tinylit from {where}, not from the workspace {workspace}")
  return tinylit


def where_it_broke(e: BaseException, workspace: Path) -> str:
  "The innermost line of the learner's package in the traceback, as `tinylit/pattern.py line 40`."
  if isinstance(e, SyntaxError) and e.filename and Path(e.filename).is_relative_to(workspace):
    return f" (at {Path(e.filename).relative_to(workspace)} line {e.lineno})"
  for frame in reversed(traceback.extract_tb(e.__traceback__)):
    path = Path(frame.filename)
    if path.is_relative_to(workspace / "tinylit"): return f" (at {path.relative_to(workspace)} line {frame.lineno})"
  return ""


def verdict(task, workspace: Path) -> tuple[bool, str]:
  from tinylit_learn.tasks import Fail
  def too_long(*_): raise TimeoutError(f"the check ran for more than {TASK_SECONDS} s: an endless loop?")
  signal.signal(signal.SIGALRM, too_long)
  signal.alarm(TASK_SECONDS)
  try:
    task.check()
  except NotImplementedError as e:
    m = re.match(r"task (\S+?):", str(e))
    if m and m[1] == task.id: return False, f"not written yet: task {task.id} raises NotImplementedError"
    if m: return False, f"needs task {m[1]} first (it raises NotImplementedError){where_it_broke(e, workspace)}"
    return False, f"raised NotImplementedError: {e}{where_it_broke(e, workspace)}"
  except Fail as e:
    return False, str(e) + where_it_broke(e.__cause__ or e, workspace)
  except Exception as e:
    return False, f"raised {type(e).__name__}: {e}{where_it_broke(e, workspace)}"
  finally:
    signal.alarm(0)
  return True, "passed"


def grade(workspace: Path, ids: list[str]) -> None:
  from tinylit_learn.tasks import tasks
  try:
    import_learner_package(workspace)
  except Exception as e:
    for tid in ids: print(json.dumps({"task": tid, "passed": False, "message": f"`import tinylit` fails: "
                                      f"{type(e).__name__}: {e}{where_it_broke(e, workspace)}"}), flush=True)
    return
  known = {t.id: t for ch in sorted({i.split(".")[0] for i in ids}) for t in tasks(ch)}
  for tid in ids:
    passed, message = verdict(known[tid], workspace)
    print(json.dumps({"task": tid, "passed": passed, "message": message}), flush=True)


def run_notebook(workspace: Path, path: Path) -> None:
  "Execute a notebook top to bottom (the cells `make test` runs), stopping at the first error, which it prints."
  import nbformat
  from nbclient import NotebookClient
  from nbclient.exceptions import CellExecutionError
  nb = nbformat.read(path, as_version=4)
  # what nbval skips (conftest.py): nbdev_export() calls, `#| eval: false`, `#| notest`
  skip = re.compile(r"^#\|\s*(eval:\s*false|notest)\b", re.M | re.I)
  nb.cells = [c for c in nb.cells if c.cell_type != "code" or not (skip.search(c.source) or "nbdev_export(" in c.source)]
  # first, that the kernel imports the workspace's package (it inherits this process's PYTHONPATH)
  nb.cells.insert(0, nbformat.v4.new_code_cell(f"import tinylit\nassert tinylit.__file__.startswith({str(workspace)!r}), "
                                               f"f'the kernel imports {{tinylit.__file__}}, not the workspace\\'s package'"))
  client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
  try:
    client.execute()
  except CellExecutionError as e:
    print(str(e).strip().splitlines()[-1] if str(e).strip() else repr(e))
    raise SystemExit(1) from None


if __name__ == "__main__":
  ws = Path(sys.argv[1]).resolve()
  if sys.argv[2] == "--notebook": run_notebook(ws, Path(sys.argv[3]))
  else: grade(ws, sys.argv[2:])
