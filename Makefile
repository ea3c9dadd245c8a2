# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plot]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	PATH="$(abspath $(VENV))/bin:$$PATH" bash examples/demo.sh

test: install
	$(PY) -m pytest -q -x -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check ledger tests examples bench
	$(VENV)/bin/mypy ledger

bench: install
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache bench-out
