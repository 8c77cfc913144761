# The report: `make serve` reads it from committed data, `make collect` measures on a GPU.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    ?= .venv
VPY     := $(VENV)/bin/python
# `make collect` uses the Python that already has torch and triton (a GPU box often has no package index).
PYTHON  ?= python3
PROFILE ?= quick
RUN_ID  ?=
RESUME  ?=
PHASES  ?=
# Extra `python -m collect` options, e.g. COLLECT_ARGS="--force-portable --max-memory 15GiB".
COLLECT_ARGS ?=
HOST    ?= 127.0.0.1:8000
# make diff A=<run> B=<run> [DIFF_ARGS="--all --json -"]; make noise [RUNS="<run> <run> <run>"]
A       ?=
B       ?=
DIFF_ARGS ?=
RUNS    ?=
# TORCH=cpu: `make test` installs torch's CPU-only wheel from PyTorch's index first (the wheel alone:
# its dependencies come from PyPI with the rest). Without it pip takes PyPI's Linux wheel, which is
# the CUDA build and pulls the NVIDIA libraries with it.
TORCH   ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' pyproject.toml)
OFFLINE_ZIP ?= report-offline.zip
# The test tiers (tests/conftest.py): `make test` runs the tests in none of them; .ci/run runs all.
TIERS   := aot or site or browser or slow
# One worker per core; a test file stays on one worker, so its module-scoped fixtures are built once.
PYTEST  = $(VPY) -m pytest -q -n auto --dist loadfile
export NO_MKDOCS_2_WARNING := 1

.PHONY: help serve build offline collect diff noise compact stamp test test-slow test-range publish clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=quick|full  RUN_ID=<id>  PHASES='env bench'  RESUME=1  PYTHON=<python with torch>"
	@echo "             COLLECT_ARGS='--force-portable --max-memory 15GiB'  TORCH=cpu (make test*)  HOST=$(HOST)"

$(VENV)/bin/activate:
	@python3 -c 'import ensurepip' 2>/dev/null || { echo "make: this python3 cannot create a virtual environment; on Debian or Ubuntu run: sudo apt-get install python3-venv" >&2; exit 1; }
	python3 -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

$(VENV)/.report: pyproject.toml | $(VENV)/bin/activate
	$(VPY) -m pip install -q -e '.[report]'
	@touch $@

$(VENV)/.test: pyproject.toml | $(VENV)/bin/activate
	$(if $(filter cpu,$(TORCH)),$(VPY) -m pip install -q '$(TORCH_PIN)' --index-url $(TORCH_CPU_INDEX) --no-deps)
	$(VPY) -m pip install -q -e '.[test]'
	@touch $@ $(VENV)/.report

serve: $(VENV)/.report ## serve the report from data/ at http://127.0.0.1:8000 (HOST=...; rebuilds when data/ changes)
	SITE_URL=http://$(HOST)/ $(VENV)/bin/mkdocs serve --dev-addr $(HOST)

build: $(VENV)/.report ## build the static site into site/ (mkdocs build --strict), as Pages publishes it
	$(VENV)/bin/mkdocs build --strict --site-dir site

offline: $(VENV)/.report ## build a copy that works opened from disk (file://) and zip it into report-offline.zip
	rm -rf site-offline $(OFFLINE_ZIP)
	OFFLINE=true $(VENV)/bin/mkdocs build --strict --site-dir site-offline
	cd site-offline && $(abspath $(VPY)) -m zipfile -c $(abspath $(OFFLINE_ZIP)) .
	@echo "offline: $(OFFLINE_ZIP) (unzip it and open index.html)"

collect: ## on a GPU: run the phases into data/runs/<run-id>/ (PROFILE=quick|full)
	$(PYTHON) -m collect $(PHASES) --profile $(PROFILE) $(if $(RUN_ID),--run-id $(RUN_ID)) $(if $(RESUME),--resume) $(COLLECT_ARGS)

stamp: ## before handing the tree to a GPU box: write .collect-commit (the commit and its files' ids, which the collect checks the tree against)
	@$(PYTHON) -m collect.stamp

diff: ## compare two runs case by case: make diff A=<run-id> B=<run-id> (ratio B/A, interval, verdict; no GPU needed)
	@if [ -z "$(A)" ] || [ -z "$(B)" ]; then echo "diff: name both runs, e.g. make diff A=h200-20261130d B=h200-20261203a" >&2; exit 2; fi
	$(PYTHON) -m collect diff $(A) $(B) $(DIFF_ARGS)

noise: ## measure the noise floor from repeat runs of one commit: make noise RUNS='<id> <id> <id>' (default: every repeat set in data/runs)
	$(PYTHON) -m collect noise $(RUNS)

compact: ## keep finished runs' phase files gzip-compressed before committing them: make compact RUNS='<id> ...' (default: every run in data/runs)
	$(PYTHON) -m collect compact $(RUNS)

test: $(VENV)/.test ## the fast tests, in parallel: every module, a strict site build, kernels under the interpreter
	$(PYTEST) -m "not ($(TIERS))"

test-slow: $(VENV)/.test ## the tiers `make test` leaves out: ahead-of-time compiles, more site builds, browser, long runs
	$(PYTEST) -m "$(TIERS)"

test-range: $(VENV)/.test ## the kernels' tests and compiles on every Triton of the supported range (kernels/supported.py)
	$(VPY) scripts/check_triton_range.py

publish: $(VENV)/.report ## push the built site to the gh-pages branch (mkdocs gh-deploy), for Pages served from that branch
	@if grep -q "example.github.io" mkdocs.yml && [ -z "$$SITE_URL" ]; then \
	  echo "publish: set site_url in mkdocs.yml to your Pages address (or export SITE_URL) first; see README, Publish" >&2; exit 1; fi
	@if command -v gh >/dev/null 2>&1 && [ "$$(gh api 'repos/{owner}/{repo}/pages' --jq .build_type 2>/dev/null)" = workflow ]; then \
	  echo "publish: this repository's Pages source is GitHub Actions: the pages workflow publishes every push to main," >&2; \
	  echo "and Pages would ignore a gh-pages branch. Push to main instead, or set Settings > Pages > Source to" >&2; \
	  echo "'Deploy from a branch' (gh-pages, / (root)) to publish with make publish. See README, Publish." >&2; exit 1; fi
	$(VENV)/bin/mkdocs gh-deploy --strict --force

clean: ## remove the built sites and the offline zip
	rm -rf site site-offline $(OFFLINE_ZIP)
