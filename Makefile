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
HOST    ?= 127.0.0.1:8000
export NO_MKDOCS_2_WARNING := 1

.PHONY: help serve build collect test publish clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=quick|full  RUN_ID=<id>  PHASES='env bench'  RESUME=1  PYTHON=<python with torch>  HOST=$(HOST)"

$(VENV)/bin/activate:
	python3 -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

$(VENV)/.report: pyproject.toml | $(VENV)/bin/activate
	$(VPY) -m pip install -q -e '.[report]'
	@touch $@

$(VENV)/.test: pyproject.toml | $(VENV)/bin/activate
	$(VPY) -m pip install -q -e '.[test]'
	@touch $@ $(VENV)/.report

serve: $(VENV)/.report ## serve the report from data/ at http://127.0.0.1:8000 (HOST=...; rebuilds when data/ changes)
	SITE_URL=http://$(HOST)/ $(VENV)/bin/mkdocs serve --dev-addr $(HOST)

build: $(VENV)/.report ## build the static site into site/ (mkdocs build --strict)
	$(VENV)/bin/mkdocs build --strict --site-dir site

collect: ## on a GPU: run the phases into data/runs/<run-id>/ (PROFILE=quick|full)
	$(PYTHON) -m collect $(PHASES) --profile $(PROFILE) $(if $(RUN_ID),--run-id $(RUN_ID)) $(if $(RESUME),--resume)

test: $(VENV)/.test ## run the test suite (CPU only; kernels under TRITON_INTERPRET=1)
	$(VPY) -m pytest -q

publish: $(VENV)/.report ## deploy the built site to GitHub Pages (mkdocs gh-deploy)
	$(VENV)/bin/mkdocs gh-deploy --strict --force

clean: ## remove the built site
	rm -rf site
