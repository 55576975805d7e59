# One entry point for every gate, used alike by people and CI.
# `make check` sets up a fresh machine (virtualenv, packages) and runs lint, types and tests.

PYTHON ?= python3
VENV ?= .venv
# Every extra: the suite exercises them all, and checks what each pulls in (tests/test_packaging.py).
EXTRAS ?= all
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# .venv is installed from uv.lock, which pins every package (with its hashes) for every extra
# and the dev group, so a fresh machine and CI install exactly what was tested. uv is itself
# pinned, with its hashes, in scripts/uv-requirements.txt, and pip installs it into a folder of
# its own: a fresh machine needs only python3 and pip. uv reads no pip configuration (pip.conf,
# PIP_*): it installs from the lock's own URLs on PyPI, and it never downloads a Python.
TOOLS ?= .tools
UV := $(TOOLS)/bin/uv
UV_RUN := UV_PROJECT_ENVIRONMENT=$(VENV) UV_PYTHON_DOWNLOADS=never $(UV)
comma := ,
UV_EXTRAS := $(foreach extra,$(subst $(comma), ,$(EXTRAS)),--extra $(extra))

.PHONY: install lock upgrade system lint imports format typecheck test docs check release-check bench \
	chat serve clean

install: $(STAMP)

# --target: uv's wheel holds one binary and needs no environment of its own (pip then checks
# no EXTERNALLY-MANAGED marker either, so a system's python3 will do).
$(UV): scripts/uv-requirements.txt
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action ignore \
		--upgrade --target $(TOOLS) --require-hashes --only-binary :all: \
		-r scripts/uv-requirements.txt
	touch $(UV)

# `--locked`: a uv.lock that no longer matches pyproject.toml is an error (`make lock` renews
# it), never silently re-resolved. The sync is exact: what the lock does not name is removed.
# llama.cpp is built for a CPU baseline, not this machine's (see the script for why), at the
# version uv.lock pins: uv leaves it out, and the script installs it after the sync.
# Bytecode compiled once here, parley's own sources too: where PYTHONDONTWRITEBYTECODE is set
# (as on this project's machines) no process writes it, and each compiled every module it imported
# again (a service's start, and each test that runs a process of its own, took twice as long).
$(STAMP): pyproject.toml uv.lock Makefile scripts/install-llama.sh $(UV)
	$(UV_RUN) sync --quiet --locked --python $(PYTHON) $(UV_EXTRAS) --group dev \
		--no-install-package llama-cpp-python --compile-bytecode
	$(PY) -m compileall -q src
	case ",$(EXTRAS)," in *,local,* | *,all,*) bash scripts/install-llama.sh $(PY) ;; esac
	touch $(STAMP)

# uv.lock again after pyproject.toml changed (a dependency added, a bound moved): the packages
# it already pins keep their versions where the new requirements allow. Commit the new lock.
lock: $(UV)
	$(UV_RUN) lock --python $(PYTHON)

# The newest releases: uv itself, then every package pyproject.toml allows, installed into .venv
# and run through every gate. When it passes, commit uv.lock and scripts/uv-requirements.txt;
# when it fails, the failure is a newer release's (`git diff uv.lock` names them).
upgrade: $(UV)
	echo uv | $(UV_RUN) pip compile --quiet --upgrade --universal --generate-hashes \
		--custom-compile-command "make upgrade" -o scripts/uv-requirements.txt -
	$(MAKE) $(UV)
	$(UV_RUN) lock --upgrade --python $(PYTHON)
	$(MAKE) check

# The system packages the tests drive for real: bubblewrap, PostgreSQL, Chromium. It runs apt
# only as root and only for what is missing; otherwise it is a no-op, so every run can call it.
system:
	bash scripts/setup-system.sh

lint: install
	$(PY) -m ruff check src tests benchmarks scripts
	$(PY) -m ruff format --check src tests benchmarks scripts

# The floors and the providers' independence (.importlinter; docs/architecture.md, "Layout"):
# a package that imports a floor above its own, or another provider, fails here.
imports: install
	$(VENV)/bin/lint-imports

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

check: system lint imports typecheck test docs

# The release build, checked as a user meets it: the sdist and the wheel (into dist/, the
# version from git tags), the wheel installed with its `local` and `service` extras into a
# clean virtualenv, and the README's quick start run against it (`parley chat`, `parley
# serve` answering /info and /invoke). See scripts/release-check.sh.
release-check: install
	bash scripts/release-check.sh $(PY) $(UV) $(PYTHON)

# The main job on the embedded defaults: the service with its web page, the model the user
# already has (a provider key's, Ollama's, the largest pulled, else the embedded one: its first
# line says which) and its code interpreter, threads in an SQLite file (parley.db). Ctrl+C stops it.
PORT ?= 8080
serve: install
	$(VENV)/bin/parley serve --port $(PORT)

# One question to the same model, in the terminal.
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
	rm -rf $(VENV) $(TOOLS) $(BENCH_VENV) site dist .mypy_cache .pytest_cache .ruff_cache .hypothesis
