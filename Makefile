# One entry point for every gate, used alike by people and CI.
# `make check` sets up a fresh machine (virtualenv, packages) and runs lint, types and tests.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install lint format typecheck test check bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	$(PY) -m pip install --quiet --disable-pip-version-check -e . --group dev
	touch $(STAMP)

lint: install
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m ruff format --check src tests benchmarks

format: install
	$(PY) -m ruff check --fix src tests benchmarks
	$(PY) -m ruff format src tests benchmarks

typecheck: install
	$(PY) -m mypy

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

check: lint typecheck test

# Peer libraries are installed for benchmarks only, into their own virtualenv, so their pins
# never touch parley's environment.
BENCH_VENV ?= .venv-bench
bench: install
	bash benchmarks/setup.sh $(BENCH_VENV)
	$(BENCH_VENV)/bin/python benchmarks/messages.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
