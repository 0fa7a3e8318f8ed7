# tinylit: developer and CI entry points. `make help` lists them.
# Every target first makes sure .venv is up to date (`setup`); that is quick once it exists.
# CI runs `make test` (via .ci/run) in a fresh clone: nothing may rely on a hand-made install.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.NOTPARALLEL:

PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
LIB      := tinylit
# The editable install maps tinylit/ only if it exists at install time, so the stamp's name
# says whether it did: once tinylit/ appears, `setup` installs again.
STAMP    := $(VENV)/.installed$(if $(wildcard $(LIB)/__init__.py),-with-$(LIB))
# every package's exact version, checked together with `pip check`; `make lock` rewrites it
LOCK     := constraints.txt
SANITIZE := tests/nbval_sanitize.cfg
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
# notebooks for `make nbs` (default: the whole course), e.g. make nbs NB=nbs/01_tensor.ipynb
NB       ?=
# the course: every notebook in nbs/ but nbdev's private ones (`_`), index first
COURSE_NBS := nbs/index.ipynb $(filter-out nbs/index.ipynb nbs/_%,$(sort $(wildcard nbs/*.ipynb)))
# extra arguments for `make course`, e.g. LAB_ARGS="--no-browser --port 8899"
LAB_ARGS ?=
export CHROMIUM ?= /usr/bin/chromium
# Debian's PoCL registers itself here; its presence says the apt step below has run
POCL_ICD := /etc/OpenCL/vendors/pocl.icd
# the venv's kernel spec wins over one of the same name in ~/.local (notebooks ask for "python3")
export JUPYTER_PREFER_ENV_PATH := 1
# quiet the debugger warning every IPython kernel prints under nbval and nbclient
export PYDEVD_DISABLE_FILE_VALIDATION := 1

NBVAL := --nbval --nbval-current-env --nbval-sanitize-with $(SANITIZE)
# The notebooks' stored outputs show CPU kernels built with 16-float vectors (the course's AVX-512 machines). The CPU
# device picks its width from the CPU (chapter 8a: 8 without AVX-512), which would change the printed kernels on a CI
# runner without it: `test` and `nbs` pin the width (still correct anywhere; only slower where registers are narrower).
test nbs: export CPU_VECTOR_WIDTH ?= 16
# Likewise the L2 cache the rules fit blocks of a matmul into (chapter 6bb): the stored plans are those of a 1 MiB L2,
# and a CPU with less (sysfs says 512 KiB on some runners) would block the 512x512 matmul the chapters walk through.
test nbs: export CPU_L2_SIZE ?= 1048576

.PHONY: help setup course course-run learn test check-export docs nbs readme dist lint bench lock clean distclean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  make \1\t/' | expand -t 22

setup: $(STAMP) $(CHROMIUM) $(POCL_ICD) ## create/update .venv (pip install -e ".[dev]"), its Jupyter kernel, Chromium, Debian's PoCL

# (Re)install when the package's settings or pins change (or tinylit/ first appears, see STAMP).
# --use-pep517: setuptools' own editable install (without a pyproject.toml, pip would otherwise
# fall back to the deprecated `setup.py develop`).
$(STAMP): setup.py settings.ini $(wildcard $(LOCK))
	@test -x $(BIN)/python || { echo "+ $(PYTHON) -m venv $(VENV)"; $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -qq --progress-bar off --disable-pip-version-check --use-pep517 \
	  $(if $(wildcard $(LOCK)),-c $(LOCK)) -e ".[dev]"
	$(BIN)/python -m pip check
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (tinylit .venv)"
	@rm -f $(VENV)/.installed*
	@touch $@

# Debian's Chromium, for the docs site's browser test; needs root (or sudo) for apt-get.
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "warning: no $(CHROMIUM) and no root: the docs browser test will skip (and fail under CI=true)"; exit 0; fi; \
	echo "+ apt-get install chromium"; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

# Debian's PoCL (OpenCL on the CPU) for the CL device, beside the one pyopencl gets from PyPI: that PoCL 3.0's
# LLVM 14 builds no kernel on CPUs newer than it (AMD Zen 5: "unknown target CPU 'generic'"), while Debian's
# targets a fixed CPU variant (skylake-avx512 on such a CPU). The CL device opens whichever builds a probe kernel.
# Without apt-get or root, CL runs on PyPI's PoCL where it can, and is skipped, saying why, where it can't.
$(POCL_ICD):
	@if ! command -v apt-get >/dev/null; then echo "warning: no apt-get for Debian's PoCL: CL has PyPI's only"; exit 0; \
	elif [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "warning: no root for apt-get install pocl-opencl-icd: CL has PyPI's PoCL only"; exit 0; fi; \
	echo "+ apt-get install pocl-opencl-icd"; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends pocl-opencl-icd >/dev/null \
	  || echo "warning: apt-get install pocl-opencl-icd failed: CL has PyPI's PoCL only"

course: setup ## open the course: JupyterLab on nbs/ with the .venv kernel
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)/nbs" $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The learner track: the workspace is made once (your code lives there; `make learn` again reopens it). Its package comes
# first on the kernels' path, so `from tinylit import Tensor` runs your code; JupyterLab's terminals find tinylit-learn.
learn: setup ## build it yourself: a workspace in learn/ (tinylit-learn init, once), then JupyterLab on it
	@test -d learn || { echo "+ tinylit-learn init learn"; $(BIN)/tinylit-learn init learn; }
	cd learn && PYTHONPATH="$(CURDIR)/learn" PATH="$(CURDIR)/$(BIN):$$PATH" $(CURDIR)/$(BIN)/jupyter lab \
	  --ServerApp.root_dir="$(CURDIR)/learn" $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

course-run: setup ## run every course notebook top to bottom (nbclient's `jupyter execute`; nbs/ untouched), then build the docs
	$(BIN)/jupyter execute $(COURSE_NBS)
	$(BIN)/python tools/build_docs.py site

# A failed docs build does not stop the run: tests/test_docs_site.py then fails and says why,
# beside the notebook results, in one pytest summary.
test: setup check-export ## the CI test: export in sync, nbval over nbs/ + tests/ (incl. the docs site in Chromium)
	$(BIN)/python tools/build_docs.py site || echo "docs build failed: tests/test_docs_site.py will report it"
	@echo "+ pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder $(NBVAL) nbs tests"
	@$(BIN)/python -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder $(NBVAL) nbs tests || { rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; fi; exit $$rc; }

check-export: setup ## nbdev_export must leave tinylit/ as committed (notebooks are the source)
	$(BIN)/nbdev_export
	@if ! git diff --quiet -- $(LIB) || [ -n "$$(git ls-files --others --exclude-standard -- $(LIB))" ]; then \
	  echo "nbdev_export changed $(LIB)/: the library is out of sync with the notebooks."; \
	  git status --short -- $(LIB); git --no-pager diff --stat -- $(LIB); \
	  echo "Review the change, then commit it (or fix the notebook)."; exit 1; fi
	@echo "nbdev_export: $(LIB)/ is in sync with the notebooks"

docs: setup ## build the offline docs site into _docs/ (nbdev processing + Sphinx/MyST-NB; no Quarto)
	$(BIN)/python tools/build_docs.py site

nbs: setup ## re-execute notebooks in place (`jupyter execute --inplace`), storing outputs (NB=... for some), then nbdev_clean and fold
	$(BIN)/jupyter execute --inplace $(or $(NB),$(COURSE_NBS))
	$(BIN)/nbdev_clean
	$(BIN)/python tools/course.py fold $(notdir $(NB))

readme: setup ## write README.md from nbs/index.ipynb (without Quarto)
	$(BIN)/python tools/build_docs.py readme

# A release's archives. `python -m build` makes the sdist, then the wheel from the unpacked sdist (so the sdist is
# shown to be complete); --no-isolation builds with .venv's setuptools instead of downloading one. The smoke test
# runs outside the repository's reach: a new venv holding the wheel and what pip resolves for it (numpy), nothing else.
SMOKE_VENV := build/smoke-venv
dist: setup ## build the sdist and the wheel into dist/, check them (tools/release.py), smoke-test the wheel in a fresh venv
	rm -rf dist $(SMOKE_VENV)
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/python tools/release.py dist dist
	$(PYTHON) -m venv $(SMOKE_VENV)
	$(SMOKE_VENV)/bin/python -m pip install -q --progress-bar off --disable-pip-version-check dist/*.whl
	$(SMOKE_VENV)/bin/python tools/smoke_test.py

bench: setup ## speed against numpy, ratios measured in one run (QUICK=1 for small sizes); on a GPU, CUDA against torch; memory of training steps with and without the memory planner, and peak RSS beside torch's; nanoGPT's CPU run against torch
	$(BIN)/python benchmarks/bench.py $(if $(QUICK),--quick)
	$(BIN)/python benchmarks/bench_cuda.py
	$(BIN)/python benchmarks/bench_memory.py $(if $(QUICK),--no-rss)
	$(BIN)/python benchmarks/bench_gpt.py $(if $(QUICK),--quick)
	$(BIN)/python benchmarks/bench_nanogpt.py $(if $(QUICK),--quick)

lint: setup ## ruff over the whole repo (config: ruff.toml)
	$(BIN)/ruff check .

lock: ## re-resolve .[dev] in a scratch venv and write every version to constraints.txt
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/python -m pip install -q --progress-bar off --disable-pip-version-check --use-pep517 -e ".[dev]"
	build/lock-venv/bin/python -m pip check
	{ echo "# Exact versions of everything .[dev] installs, checked together (pip check). Regenerate: make lock"; \
	  build/lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^-e '; } > $(LOCK)
	rm -rf build/lock-venv
	@echo "wrote $(LOCK)"

clean: ## remove generated files (_docs, _proc, build, caches); keeps .venv
	rm -rf _docs _proc build .pytest_cache .ruff_cache

distclean: clean ## clean, and remove .venv too
	rm -rf $(VENV)
