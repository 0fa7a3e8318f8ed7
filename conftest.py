"""pytest glue that lets nbval check nbdev notebooks.

nbval reads each notebook with `nbformat.read`; we hand it a prepared copy instead:

- `nbdev_clean` sets every `execution_count` to null but keeps the outputs, and nbval fails such
  cells with "Unrun reference cell has outputs". Code cells with outputs get a dummy count.
- nbval knows nothing of nbdev's directives. Cells that nbdev_test would not run (`#| eval: false`,
  the `tst_flags` of settings.ini such as `#| notest`, and `nbdev_export()` calls, which would
  rewrite the library while other tests import it) are tagged `nbval-skip`.

The notebook files on disk are never changed.
"""

import functools
from configparser import ConfigParser
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

try:
    import nbval.plugin
    from nbdev.process import extract_directives
except ImportError:  # plain `pytest tests/...` without the dev extras: nothing to patch
    nbval = None

ROOT = Path(__file__).resolve().parent


def _skip_flags() -> set[str]:
    "The `tst_flags` of settings.ini (`notest`): cells carrying one are not run by tests."
    cfg = ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return set(cfg["DEFAULT"].get("tst_flags", "").split())


SKIP_FLAGS = _skip_flags()


def _skip_reason(cell) -> str | None:
    "Why nbdev_test would leave this code cell out, or None if it runs it."
    if "nbdev_export(" in cell.source:
        return "calls nbdev_export()"
    directives = extract_directives(cell, remove=False)
    if directives.get("eval:", [""])[0].lower() == "false":
        return "#| eval: false"
    flags = sorted(SKIP_FLAGS & directives.keys())
    return f"#| {flags[0]}" if flags else None


def prepare_for_nbval(nb):
    "Give output-bearing cells an execution count and tag skipped cells `nbval-skip`."
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("outputs") and cell.get("execution_count") is None:
            cell.execution_count = 1
        if reason := _skip_reason(cell):
            tags = cell.metadata.setdefault("tags", [])
            if "nbval-skip" not in tags:
                tags.append("nbval-skip")
            cell.metadata["nbval_skip_reason"] = reason
    return nb


class _NbformatForNbval(ModuleType):
    "`nbformat` as nbval sees it: the same module, except that `read` prepares the notebook."

    def __getattr__(self, name):
        return getattr(nbformat, name)

    @staticmethod
    def read(*args, **kwargs):
        return prepare_for_nbval(nbformat.read(*args, **kwargs))


if nbval is not None and not isinstance(nbval.plugin.nbformat, _NbformatForNbval):
    nbval.plugin.nbformat = _NbformatForNbval("nbformat")


# A device's chapter runs that device in every cell: where this machine can't open it, the whole notebook is
# skipped, with the device's own reason (the device's tests in tests/ skip the same way, see tests/devices.py).
CHAPTER_DEVICE = {"08e_cl.ipynb": "CL"}


@functools.cache
def _device_missing(name: str) -> str | None:
    "Why this machine can't open the device, or None if it can."
    from tinylit.device import Device

    try:
        Device[name]
    except Exception as e:
        return f"{name} unavailable here: {e}"
    return None


# Files that take minutes, started first and the longest first: under `make test` (`-n 2 --dist loadfile
# --no-loadscope-reorder`) a worker takes whole files in collection order, so a long file collected late finishes alone
# while the other worker idles. (Without --no-loadscope-reorder, pytest-xdist orders files by their number of tests,
# and test_learn_downstream's one test of 90 s ran last.)
# The order follows the items of two cold CI runs on 2 cores (2026-11-29, `--durations`): test_opts.py's random-opts
# chunks (about 25-30 s each on CPU, 15-20 on CL and PYTHON), test_fuzz.py's (CL 55-60 s), test_learn_downstream's one
# test (87-95 s), test_symbolic.py (CL 52-57 s), chapter 12 (45-48 s for one cell), the sanitizer (60-64 s),
# test_cuda.py's op suite in a child process (39-52 s cold, 2026-11-29 evening), ...
LONG_FIRST = ("test_opts.py", "test_fuzz.py", "test_learn_downstream.py", "test_symbolic.py", "12_capstone_gpt.ipynb",
              "test_sanitize.py", "test_cuda.py", "test_gpt.py", "test_fuzz_state.py", "test_accumulate.py",
              "test_heuristic2.py", "11_capstone_digits.ipynb", "test_docs_site.py", "06bb_machine.ipynb")


def pytest_collection_modifyitems(items):
    """Report why a notebook cell is skipped (nbval itself says only 'Skipped'); skip a missing device's chapter; put
    the long files first (`LONG_FIRST`), each file's items still together and in order."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(LONG_FIRST)))
    for item in items:
        reason = getattr(getattr(item, "cell", None), "metadata", {}).get("nbval_skip_reason")
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"nbdev: {reason}"))
        elif (dev := CHAPTER_DEVICE.get(Path(str(item.fspath)).name)) and (why := _device_missing(dev)):
            item.add_marker(pytest.mark.skip(reason=why))
