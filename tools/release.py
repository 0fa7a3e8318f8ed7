"""What a release must be, checked in one place: `make dist` and .github/workflows/release.yaml run it from the command
line, tests/test_workflows.py calls its functions.

    python tools/release.py tag v0.0.1   # the tag names settings.ini's version, and CHANGELOG.md has an entry for it
    python tools/release.py dist dist    # twine check --strict, and what the sdist and the wheel in dist/ hold

The version is settings.ini's: setup.py reads it for the packages' metadata, and nbdev_export writes it into
tinylit/__init__.py (settings.ini's put_version_in_init), where `tinylit.__version__` reads it. It writes it over the
`__version__` line that nbs/index.ipynb exports; that line says the same number, so that the notebook shows no stale
one (tests/test_workflows.py checks that the three agree). To release X.Y.Z:

    1. set `version = X.Y.Z` in settings.ini and `__version__ = "X.Y.Z"` in nbs/index.ipynb, then nbdev_export;
    2. add `## X.Y.Z` to the top of CHANGELOG.md: what learners and users notice;
    3. `make test` and `make dist` pass; commit, then `git tag vX.Y.Z && git push origin vX.Y.Z`:
       .github/workflows/release.yaml checks the tag, tests, builds and publishes to PyPI.

`tag` needs the standard library only (the workflow runs it before anything is installed); `dist` runs twine.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import zipfile
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def version() -> str:
    "settings.ini's version: the release's number."
    cfg = ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini", encoding="utf-8")
    return cfg["DEFAULT"]["version"]


def changelog_versions(text: str) -> list[str]:
    "The versions a changelog has entries for: the first word of each `## ` heading (`## 0.0.1 (first release)`)."
    return re.findall(r"^## (\S+)", text, re.MULTILINE)


def tag_problems(tag: str) -> list[str]:
    "What stops `tag` from being released: a tag that doesn't name settings.ini's version, a version without a changelog entry."
    v, problems = version(), []
    if tag != f"v{v}": problems.append(f"the tag {tag!r} does not name settings.ini's version: that would be 'v{v}'")
    if v not in changelog_versions((ROOT / "CHANGELOG.md").read_text(encoding="utf-8")):
        problems.append(f"CHANGELOG.md has no entry for {v}: add a '## {v}' heading and what learners and users notice")
    return problems


def dist_problems(folder: Path) -> list[str]:
    """What is wrong with the sdist and the wheel in `folder`: twine check --strict's complaints, and the contents.
    The sdist holds the package and its source: settings.ini, the license, the changelog, every notebook of nbs/.
    The wheel holds the library only (tinylit/, every module of it, the version settings.ini gives), the learner track's
    command line (tinylit_learn/) and its metadata."""
    name, v = "tinylit", version()
    sdist, wheel = folder / f"{name}-{v}.tar.gz", folder / f"{name}-{v}-py3-none-any.whl"
    missing = [p.name for p in (sdist, wheel) if not p.exists()]
    if missing: return [f"{folder} has no {' or '.join(missing)} (it has {sorted(p.name for p in folder.iterdir())})"]
    twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], capture_output=True, text=True)
    problems = [f"twine check --strict failed:\n{twine.stdout}{twine.stderr}"] if twine.returncode else []

    with tarfile.open(sdist) as tar: in_sdist = {n.removeprefix(f"{name}-{v}/") for n in tar.getnames()}
    source = ["settings.ini", "setup.py", "LICENSE", "CHANGELOG.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "nbs").glob("*.ipynb"))
    problems += [f"the sdist lacks {f}" for f in source if f not in in_sdist]

    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
        init = whl.read(f"{name}/__init__.py").decode() if f"{name}/__init__.py" in in_wheel else ""
    # the library, and the learner track's command line (tinylit-learn), which never imports it
    packages = (name, "tinylit_learn")
    modules = sorted(str(p.relative_to(ROOT)) for pkg in packages for p in (ROOT / pkg).rglob("*.py"))
    problems += [f"the wheel lacks {m}" for m in modules if m not in in_wheel]
    problems += [f"the wheel holds {n}, which is not the library" for n in sorted(in_wheel)
                 if not n.startswith((*(f"{pkg}/" for pkg in packages), f"{name}-{v}.dist-info/"))]
    if f'__version__ = "{v}"' not in init: problems.append(f"the wheel's {name}/__init__.py does not set __version__ = \"{v}\"")
    if not any(n.startswith(f"{name}-{v}.dist-info/") and n.endswith("/LICENSE") for n in in_wheel):
        problems.append("the wheel's metadata lacks the license")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("tag", help="check a release tag (v1.2.3) against settings.ini and CHANGELOG.md").add_argument("tag")
    sub.add_parser("dist", help="check the sdist and wheel in a folder").add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    problems = tag_problems(args.tag) if args.what == "tag" else dist_problems(args.folder)
    for p in problems: print(f"release.py {args.what}: {p}", file=sys.stderr)
    if not problems: print(f"release.py {args.what}: tinylit {version()} ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
