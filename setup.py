"""Packaging for tinylit, nbdev 2 style: every setting lives in settings.ini."""

from configparser import ConfigParser
from pathlib import Path

import setuptools

here = Path(__file__).resolve().parent
parser = ConfigParser(delimiters=["="])
parser.read(here / "settings.ini", encoding="utf-8")
cfg = parser["DEFAULT"]

for key in "lib_name lib_path version description author author_email license min_python".split():
    assert key in cfg, f"settings.ini is missing {key!r}"

# nbdev's license names as SPDX identifiers (license classifiers are deprecated in setuptools)
licenses = {
    "apache2": "Apache-2.0",
    "mit": "MIT",
    "gpl2": "GPL-2.0-only",
    "gpl3": "GPL-3.0-only",
    "bsd3": "BSD-3-Clause",
}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable", "6 - Mature"]
py_versions = "3.10 3.11 3.12 3.13".split()


def reqs(key: str) -> list[str]:
    "Space-separated requirement list `key` from settings.ini."
    return cfg.get(key, "").split()


min_python = cfg["min_python"]
lib_path = cfg["lib_path"]
readme = here / "README.md"

test_requirements = reqs("test_requirements")
docs_requirements = reqs("docs_requirements")

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else cfg["description"],
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license=licenses.get(cfg["license"].lower(), cfg["license"]),
    url=cfg.get("git_url"),
    keywords=cfg.get("keywords", "").split(),
    classifiers=[
        "Development Status :: " + statuses[int(cfg.get("status", "2")) - 1],
        "Intended Audience :: " + cfg.get("audience", "Developers").title(),
        "Natural Language :: " + cfg.get("language", "English").title(),
    ]
    + [f"Programming Language :: Python :: {v}" for v in py_versions[py_versions.index(min_python) :]],
    python_requires=">=" + min_python,
    # the library, and the learner track's command line (`tinylit-learn`, course tooling that never imports it)
    packages=setuptools.find_packages(include=[lib_path, lib_path + ".*", "tinylit_learn", "tinylit_learn.*"]),
    include_package_data=True,
    install_requires=reqs("requirements"),
    extras_require={
        "test": test_requirements,
        "docs": docs_requirements,
        "cuda": reqs("cuda_requirements"),
        "ci": reqs("ci_requirements"),
        # everything a course author needs: the course tools, the tests and the docs site
        "dev": reqs("dev_requirements") + test_requirements + docs_requirements,
    },
    zip_safe=False,
    entry_points={
        "console_scripts": cfg.get("console_scripts", "").split(),
        # lets nbdev (show_doc, doc links) find this library's symbol index
        "nbdev": [f"{lib_path}={lib_path}._modidx:d"],
    },
)
