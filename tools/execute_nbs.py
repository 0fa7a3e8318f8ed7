"""Run course notebooks top to bottom in a fresh kernel and store their outputs.

    python tools/execute_nbs.py [NOTEBOOK ...] [--out DIR]

With no notebooks it runs every course notebook (nbs/index.ipynb and the chapters; nbdev's rule:
names starting with `_` or `.` are left out). Outputs are written back in place (`make nbs`, run
`nbdev_clean` afterwards), or with `--out DIR` into copies under DIR (`make course-run`, a check
that the course runs, leaving nbs/ untouched).

Cells marked `#| eval: false` are not run and keep what they had, as under nbdev_test and nbval.
Widget state is kept in the notebook metadata so the docs can show widgets. On the first error
the notebook is not written and the run stops (or, with --keep-going, goes on to the next
notebook), naming the notebook and the cell.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from build_docs import course_notebooks  # tools/ is on sys.path: this script's own folder
from nbclient import NotebookClient
from nbclient.exceptions import CellControlSignal, CellExecutionError, CellTimeoutError, DeadKernelError
from nbdev.process import extract_directives

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"


def evaluated(cell) -> bool:
    "False for code cells marked `#| eval: false`."
    directives = extract_directives(cell, remove=False)
    return directives.get("eval:", [""])[0].lower() != "false"


class CourseClient(NotebookClient):
    "A NotebookClient that leaves `#| eval: false` cells alone and reports progress."

    def __init__(self, nb, label: str, **kwargs):
        super().__init__(nb, **kwargs)
        self.label = label
        self.code_indices = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        self.current = None

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not evaluated(cell):
            return cell
        self.current = cell_index
        done = self.code_indices.index(cell_index) + 1
        if sys.stdout.isatty():
            print(f"\r  {self.label}: code cell {done}/{len(self.code_indices)}", end="", flush=True)
        return await super().async_execute_cell(cell, cell_index, execution_count, store_history)


def shown(path: Path) -> str:
    "`path` relative to the repo when it is inside it."
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def describe_failure(path: Path, nb, index: int | None, error: Exception) -> str:
    "Which notebook and cell failed, the cell's first lines and the error."
    lines = [f"FAILED: {shown(path)}"]
    if index is not None:
        cell = nb.cells[index]
        code_no = sum(c.cell_type == "code" for c in nb.cells[: index + 1])
        lines.append(f"  cell {index} (code cell {code_no}, id {cell.get('id', '?')}):")
        lines += ["    " + ln for ln in cell.source.splitlines()[:8]]
    if isinstance(error, CellExecutionError):
        lines.append(f"  {error.ename}: {error.evalue}")
        lines.append(str(error))
    else:
        lines.append(f"  {type(error).__name__}: {error}")
    return "\n".join(lines)


def run(path: Path, out: Path | None, timeout: int) -> bool:
    "Execute one notebook; write it (in place or under `out`) only if every cell ran."
    nb = nbformat.read(path, as_version=4)
    label = shown(path)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
    client = CourseClient(
        nb,
        label,
        timeout=timeout,
        kernel_name=kernel,
        record_timing=False,
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # not its startup warnings
    )
    print(f"  {label}: running {len(client.code_indices)} code cells", flush=True)
    start = time.perf_counter()
    try:
        client.execute()
    except (CellControlSignal, CellTimeoutError, DeadKernelError, RuntimeError) as error:
        print()
        print(describe_failure(path, nb, client.current, error), file=sys.stderr)
        return False
    if out is None:
        target = path
    else:
        target = out / (path.relative_to(NBS) if path.is_relative_to(NBS) else path.name)
        target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    print(f"\r  {label}: ran in {time.perf_counter() - start:.1f}s -> {shown(target)}")
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: the whole course")
    parser.add_argument("--out", type=Path, help="write executed copies here instead of in place")
    parser.add_argument("--timeout", type=int, default=900, help="seconds one cell may take (default 900)")
    parser.add_argument("--keep-going", action="store_true", help="run the other notebooks after a failure")
    args = parser.parse_args(argv)
    notebooks = [p.resolve() for p in args.notebooks]
    out = args.out.resolve() if args.out else None
    os.chdir(ROOT)  # nbdev finds settings.ini from here
    # index.ipynb first, then the chapters in name order
    notebooks = notebooks or [
        NBS / p for p in sorted(course_notebooks(), key=lambda p: (p.name != "index.ipynb", p))
    ]
    if not notebooks:
        print(f"no notebooks found under {NBS}", file=sys.stderr)
        return 1
    print(f"Executing {len(notebooks)} notebook(s)" + (f" into {out}" if out else " in place"))
    failed = []
    for path in notebooks:
        if not run(path, out, args.timeout):
            failed.append(shown(path))
            if not args.keep_going:
                break
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
