# Two entry points for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export ANONYMIZED_TELEMETRY := False
# Python keeps its compiled modules (__pycache__) also where the environment sets PYTHONDONTWRITEBYTECODE, as
# these machines do: compiling DocMind's ~120 modules again at every start is ~0.25 s of the server's head start,
# which the first page waits for (bench/RESULTS.md, "Page speed"), and of every CLI command and test process.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: run test test-fast install install-test browser-deps demo bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.base: pyproject.toml | $(PY)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $@

# torch is pinned to the CPU build so pip never pulls a multi-GB CUDA build.
$(VENV)/.test: pyproject.toml | $(PY)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) -e ".[test,models]"
	touch $(VENV)/.base $@

install: $(VENV)/.base
install-test: $(VENV)/.test

# The demo files (including the generated PDF and DOCX) are committed; scripts/make_demo_docs.py
# regenerates them byte for byte (it needs the test extras) and a test checks they are current.
demo: install
	$(VENV)/bin/docmind ingest data/demo --kb demo --description "Demo corpus: the fictional Aurora and Nimbus products" --if-missing
	$(VENV)/bin/docmind kb share demo --visibility public
	$(VENV)/bin/docmind dataset import data/demo_labelled.jsonl --name demo --kb demo --if-missing
	$(VENV)/bin/docmind dataset share demo --visibility public

run: demo
	$(VENV)/bin/docmind serve --server.address 127.0.0.1 --server.port 8501

browser-deps:
	@bash scripts/browser_deps.sh

# Both tiers run on two workers (pytest-xdist; the machines have two cores), a test file per worker: the
# browser tests of one file are one scenario on one page, in order.
test: install-test browser-deps
	$(PY) -m pytest -q -n 2 --dist loadfile

# The fast tier: no browser, no whole-app (AppTest) runs, no demo-KB ingestion, no subprocesses, no torch
# model builds: the tests that need them are marked slow.
test-fast: install-test
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow and not browser"

# The routing and evidence regression bench (bench/routing.py) reads the shared eval sets in place when they are
# there; without them it prints its routing rows only.
DOCMIND_EVAL_DIR ?= $(wildcard ../shared/eval)

bench: install-test
	$(PY) bench/retrieval_latency.py
	$(PY) bench/answer_latency.py
	$(PY) bench/routing.py $(DOCMIND_EVAL_DIR)

clean:
	rm -rf $(VENV) data/docmind.db* data/chroma data/cache artifacts
