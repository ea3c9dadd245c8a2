# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: install system-deps demo test lint bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plot]'
	touch $(STAMP)

# Compiled bytecode left in place: with an editable install and PYTHONDONTWRITEBYTECODE=1 every
# `ledger` call would otherwise recompile ledger's own modules (~70 ms). Cheap when nothing changed.
install: $(STAMP)
	$(PY) -m compileall -q ledger

# What the tests need beyond pip (a Docker engine, .debs for a registry and a tiny image):
# installed here, never by a test; tolerant, so a machine without root only skips those tests.
system-deps:
	bash tools/system-deps.sh $(VENV)/debs

demo: install
	PATH="$(abspath $(VENV))/bin:$$PATH" bash examples/demo.sh

test: install system-deps
	LEDGER_TEST_DEBS=$(abspath $(VENV))/debs $(PY) -m pytest -q -x -rs -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check ledger tests examples bench
	$(VENV)/bin/mypy ledger

# The CLI and config references in docs/ are generated from the code (tests check they are current).
docs: install
	$(PY) tools/gen_docs.py

bench: install
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache bench-out
