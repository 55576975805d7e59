# One entry point for every gate, used alike by people and CI.
# `make check` sets up a fresh machine (virtualenv, packages) and runs lint, types and tests.

PYTHON ?= python3
VENV ?= .venv
# Every extra: the suite exercises them all, and checks what each pulls in (tests/test_packaging.py).
# llama-cpp-python compiles once, then pip's cache serves it.
EXTRAS ?= all
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install system lint format typecheck test docs check release-check bench chat serve clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile scripts/install-llama.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
	# llama.cpp built for a CPU baseline, not this machine's (see the script for why).
	case ",$(EXTRAS)," in *,local,* | *,all,*) bash scripts/install-llama.sh $(PY) ;; esac
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[$(EXTRAS)]" --group dev
	touch $(STAMP)

# The system packages the tests drive for real: bubblewrap, PostgreSQL, Chromium. It runs apt
# only as root and only for what is missing; otherwise it is a no-op, so every run can call it.
system:
	bash scripts/setup-system.sh

lint: install
	$(PY) -m ruff check src tests benchmarks scripts
	$(PY) -m ruff format --check src tests benchmarks scripts

format: install
	$(PY) -m ruff check --fix src tests benchmarks scripts
	$(PY) -m ruff format src tests benchmarks scripts

typecheck: install
	$(PY) -m mypy

test: install system
	$(PY) -m pytest $(PYTEST_ARGS)

# The documentation site (mkdocs.yml, docs/) into site/. --strict: a broken link, a missing
# page or a docstring the API reference cannot read fails it. Its examples run in the tests
# (tests/test_docs.py). `$(VENV)/bin/mkdocs serve` shows the site while you edit it.
docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

check: system lint typecheck test docs

# The release build, checked as a user meets it: the sdist and the wheel (into dist/, the
# version from git tags), the wheel installed with its `local` and `service` extras into a
# clean virtualenv, and the README's quick start run against it (`parley chat`, `parley
# serve` answering /info and /invoke). See scripts/release-check.sh.
release-check: install
	bash scripts/release-check.sh $(PY) $(PYTHON)

# The main job on the embedded defaults: the service with its web page, the local model and
# its code interpreter, threads in an SQLite file (parley.db), no keys. Ctrl+C stops it.
PORT ?= 8080
serve: install
	$(VENV)/bin/parley serve --port $(PORT)

# One question to the local model, in the terminal.
Q ?= What is the capital of France?
chat: install
	$(VENV)/bin/parley chat "$(Q)"

# Peer libraries are installed for benchmarks only, into their own virtualenv, so their pins
# never touch parley's environment. models.py compares parley with its own extras (the openai
# SDK, llama-cpp-python), which parley's environment has; service.py needs the `service` extra
# (and PostgreSQL's binaries, or BENCH_SERVICE_ARGS=--postgres-url=... or --skip-postgres), and
# serves its peer, agent-service-toolkit, from the virtualenv setup.sh makes for it (Python 3.12+).
# rag.py runs in .venv-bench beside Qwen-Agent's keyword search (setup.sh installs parley's
# `embeddings`, `rag` and `rag-postgres` extras there, and starts a throwaway PostgreSQL with
# pgvector, or BENCH_RAG_ARGS=--postgres-url=... or --skip-postgres); --quick for a short run.
BENCH_VENV ?= .venv-bench
bench: install
	bash benchmarks/setup.sh $(BENCH_VENV)
	$(BENCH_VENV)/bin/python benchmarks/messages.py
	$(BENCH_VENV)/bin/python benchmarks/rag.py $(BENCH_RAG_ARGS)
	$(PY) benchmarks/models.py $(BENCH_MODELS_ARGS)
	$(PY) benchmarks/agents.py $(BENCH_AGENTS_ARGS)
	$(PY) benchmarks/service.py --toolkit-python $(BENCH_VENV)/toolkit/bin/python $(BENCH_SERVICE_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) site dist .mypy_cache .pytest_cache .ruff_cache .hypothesis
