"""The tasks' statements and checks, one module per chapter (`ch05.py` for nbs/05_pattern.ipynb).

A chapter module lists its tasks as `TASKS`; a task's `check` runs in the grading process (`tinylit_learn.grade`),
imports `tinylit` itself (the learner's package) and raises `Fail` with the first case that went wrong. The modules
import nothing of tinylit at the top, so the command line can read statements without loading any compiler.

Adding a chapter's tasks (chapter 06b next):
1. in its notebook, mark each task's exported cell(s) with `#| task CH.N name [Class.method ...]` after `#| export`
   (nbdev drops the line from the module: `nbdev_export` must leave tinylit/ unchanged);
2. write `chCH.py` here: a check per task that calls the task's own functions first (a blank body then fails with
   its own message), on inputs built without other tasks where it can, then the real pipeline; `TASKS` at the end;
3. add CH to CHAPTERS below (and to COMPILER_CHAPTERS if the fuzzer exercises it);
4. give each task a planted wrong answer in tests/test_learn.py's PLANTED;
5. point the chapter's `## Exercises` cell to its tasks, and update the list in nbs/index.ipynb (then `make readme`)."""
from __future__ import annotations

import importlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

# the chapters with tasks, in course order (06b gets its own once its rework lands)
CHAPTERS = ["01b", "02", "03", "03a", "04", "04a", "05", "05a", "06", "07", "08", "08d", "09"]
# chapters whose downstream check also runs the differential fuzzer (tests/fuzz.py) on a few programs
COMPILER_CHAPTERS = {"02", "03", "03a", "04", "04a", "05", "05a", "06", "07", "08", "08d"}


@dataclass(frozen=True)
class Task:
  id: str            # "05.2": chapter, then its number
  statement: str     # what to write, and what the chapter already taught that it needs
  hint: str
  check: Callable[[], None]


class Fail(AssertionError):
  "A check's verdict, in words for the learner: which case, what was expected, what came instead."


def expect(ok: bool, message: str) -> None:
  if not ok: raise Fail(message)


@contextmanager
def case(name: str):
  "Name the case being checked: a failure or crash inside becomes `Fail('name: what went wrong')`."
  try:
    yield
  except NotImplementedError:
    raise  # the grader says which task is not written yet
  except Fail as e:
    raise Fail(f"{name}: {e}") from None
  except Exception as e:
    raise Fail(f"{name}: raised {type(e).__name__}: {e}") from e


def tasks(chapter: str) -> list[Task]:
  return importlib.import_module(f"{__name__}.ch{chapter}").TASKS


def all_tasks() -> dict[str, Task]:
  return {t.id: t for ch in CHAPTERS for t in tasks(ch)}
