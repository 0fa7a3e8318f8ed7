"""Tasks in the course's notebooks: where they are, and how a task's code is blanked or put back.

A task is marked by a directive at the top of an exported cell, `#| task 05.2 graph_rewrite` (its id, then the
functions or methods, as `Class.method`, whose bodies the learner writes). nbdev drops `#|` lines without a colon
from what it exports, so the marks never reach `tinylit/`. Bodies are found with `ast`, so a task may be any
function of its cell, one-liner or not, and a learner's own code is put back or blanked by the same means."""
from __future__ import annotations

import ast, json, re, textwrap
from pathlib import Path

TASK_DIRECTIVE = re.compile(r"^#\|\s*task\s+(?P<id>\d+[a-z]?\.\d+)\s+(?P<targets>[\w. ]+?)\s*$", re.M)


def read(path: Path) -> dict:
  return json.loads(Path(path).read_text(encoding="utf-8"))


def write(path: Path, nb: dict) -> None:
  "The repository's notebook format: one-space indent, UTF-8 as is, a trailing newline."
  Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def source(cell: dict) -> str:
  src = cell["source"]
  return src if isinstance(src, str) else "".join(src)


def set_source(cell: dict, text: str) -> None:
  cell["source"] = text.splitlines(keepends=True)


def find_tasks(nb: dict) -> dict[str, list[tuple[int, list[str]]]]:
  "Each task of a notebook: the cells it is in (a task may span a few), each with the functions it asks for there."
  found: dict[str, list[tuple[int, list[str]]]] = {}
  for i, cell in enumerate(nb["cells"]):
    if cell["cell_type"] != "code": continue
    for m in TASK_DIRECTIVE.finditer(source(cell)):
      found.setdefault(m["id"], []).append((i, m["targets"].split()))
  return found


def _find_def(tree: ast.Module, target: str) -> ast.FunctionDef:
  "The definition of `name` or `Class.name` at the top level of a cell."
  *outer, name = target.split(".")
  body = tree.body
  for cls in outer:
    body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if body is None: raise KeyError(f"no class {cls} in the cell")
  node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)
  if node is None: raise KeyError(f"no function {target} in the cell")
  return node


def _has_docstring(node: ast.FunctionDef) -> bool:
  first = node.body[0]
  return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def blank(src: str, target: str, message: str, comments: list[str]) -> str:
  """`src` with the body of `target` (its docstring kept) replaced by `comments` and a `raise NotImplementedError`.
  Everything the reference wrote after the docstring goes, its comments too: they would give the answer away."""
  lines = src.splitlines(keepends=True)
  node = _find_def(ast.parse(src), target)
  code = node.body[1:] if _has_docstring(node) and len(node.body) > 1 else node.body
  if _has_docstring(node) and len(node.body) == 1: code = []
  first_line = (code[0].lineno if code else node.body[0].end_lineno + 1) - 1
  if code and lines[first_line][: _col(lines[first_line], code[0].col_offset)].strip():
    # a one-liner, `def f(x): return x`: its new body goes on lines of its own
    head = lines[first_line][: _col(lines[first_line], code[0].col_offset)].rstrip() + "\n"
    indent = " " * (len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip()) + 2)
    before, after = lines[:first_line] + [head], lines[node.end_lineno:]
  else:
    indent = " " * (code[0].col_offset if code else node.body[0].col_offset)
    before, after = lines[:first_line], lines[node.end_lineno:]
  # a comment after the signature (`def backward(self, grad):   # d(x/y) = ...`) is part of the answer too
  for i in range(node.lineno - 1, min(node.body[0].lineno - 1, len(before))):
    before[i] = re.sub(r":[ \t]*#.*$", ":", before[i])
  body = [indent + "# " + c + "\n" for c in comments] + [f"{indent}raise NotImplementedError({message!r})\n"]
  return "".join(before + _ending_as(lines[node.end_lineno - 1], body) + after)


def _ending_as(old_last: str, new: list[str]) -> list[str]:
  "`new`, its last line ending as `old_last` did: the last line of a cell has no newline."
  if new and not old_last.endswith("\n"): new[-1] = new[-1].rstrip("\n")
  return new


def _col(line: str, col_offset: int) -> int:
  "ast's col_offset counts UTF-8 bytes; the index into the str."
  return len(line.encode("utf-8")[:col_offset].decode("utf-8"))


def definition(src: str, target: str) -> str:
  "The whole text of `target`'s definition in `src`, from its `def` line on (decorators stay where they are)."
  lines = src.splitlines(keepends=True)
  node = _find_def(ast.parse(src), target)
  return textwrap.dedent("".join(lines[node.lineno - 1 : node.end_lineno]))


def replace_definition(src: str, target: str, new: str) -> str:
  "`src` with `target`'s definition replaced by `new` (a definition as `definition` returns it), at its indent."
  lines = src.splitlines(keepends=True)
  node = _find_def(ast.parse(src), target)
  indent = " " * node.col_offset
  new_lines = [indent + ln if ln.strip() else ln for ln in new.splitlines(keepends=True)]
  if new_lines and not new_lines[-1].endswith("\n"): new_lines[-1] += "\n"
  return "".join(lines[: node.lineno - 1] + _ending_as(lines[node.end_lineno - 1], new_lines) + lines[node.end_lineno :])
