# Two commands set everything up on a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTHON ?= python3

.PHONY: install system-deps demo test test-load test-quick lint coverage bench docs clean

# editable_mode=compat: the checkout goes on sys.path through a plain .pth line. setuptools' default
# editable finder is imported by every Python start in the venv (each `ledger` call, each test's
# subprocess): 15-25 ms here (`.venv/bin/python -X importtime -c pass`), which an installed ledger
# does not pay.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plot]' --config-settings editable_mode=compat
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

# Three pytest-xdist workers by default (TEST_WORKERS=0: one process), a module on one worker
# (`--dist loadfile`), the longest modules first (LONGEST_FIRST in tests/conftest.py). Three on two
# cores because the Ray-cluster module (~200 s, tests/test_ray_cluster.py) mostly waits on its
# cluster: its worker leaves a core to the other two. Its two clusters are fixtures of two classes,
# so no worker ever runs two clusters side by side. (xdist's `loadgroup` could keep modules apart,
# but it does not group under pytest 9: it renames `item._nodeid`, which pytest 9 no longer reads.)
# Measured on the idle 2-core machine, December 4 2026: 243 s on three workers (docs/development.md).
TEST_WORKERS ?= 3
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# Every failure is shown (no -x: one flaky test must not hide the rest), each named again in the
# short summary at the end (-rfE), then pytest's last line says how many failed.
TEST_ENV = LEDGER_TEST_DEBS=$(abspath $(VENV))/debs
PYTEST = $(PY) -m pytest -q -rfEs -p no:cacheprovider $(XDIST)
test: install system-deps
	$(TEST_ENV) $(PYTEST)

# The suite on a busy machine: a busy loop per core for the whole run, LOAD_RUNS runs in a row
# (stops at the first failure). docs/development.md has the figures.
LOAD_RUNS ?= 1
test-load: install system-deps
	$(TEST_ENV) bash tools/test_load.sh $(LOAD_RUNS) $(PYTEST)

# The suite without the tests marked slow (pyproject's markers): for iterating; CI runs `make test`.
test-quick: install
	LEDGER_TEST_DEBS=$(abspath $(VENV))/debs $(PY) -m pytest -q -x -rs -p no:cacheprovider $(XDIST) -m "not slow"

# What the style guide asks: ruff (lint and format), strict mypy, the import contracts of
# pyproject.toml ([tool.importlinter]: layers, no cycles) and the import graph's cycles listed.
lint: install
	$(VENV)/bin/ruff check ledger tests examples bench tools
	$(VENV)/bin/ruff format --check ledger tests examples bench tools
	$(VENV)/bin/mypy ledger tools/import_cycles.py
	$(VENV)/bin/lint-imports
	$(PY) tools/import_cycles.py
	$(PY) tools/gen_docs.py --check

# The whole suite under coverage, subprocesses included ([tool.coverage.run] in pyproject.toml).
# COVERAGE_FLOOR: the figure measured, rounded down (92.2% of 13,807 statements, the whole suite on
# three workers, December 2026: 320 s on the 2-core machine, against 217 s for `make test`); raise it
# whenever coverage goes up, never lower it.
COVERAGE_FLOOR := 92
coverage: install system-deps
	rm -f .coverage .coverage.*
	LEDGER_TEST_DEBS=$(abspath $(VENV))/debs $(PY) -m coverage run -m pytest -q -x -p no:cacheprovider $(XDIST)
	$(PY) -m coverage combine -q
	$(PY) -m coverage report --fail-under=$(COVERAGE_FLOOR)

# The CLI and config references in docs/ are generated from the code (tests check they are current).
docs: install
	$(PY) tools/gen_docs.py

bench: install
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache bench-out .coverage .coverage.*
