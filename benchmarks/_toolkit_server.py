"""agent-service-toolkit's own service, as its `run_service.py` starts it, for `service.py`.

Run with the toolkit's virtualenv (`benchmarks/setup.sh` makes it, `VENV_DIR/toolkit`):

    .venv-bench/toolkit/bin/python benchmarks/_toolkit_server.py --database FILE

Its settings come from the environment, as in its Docker image and its smoke test: its fake
model (`USE_FAKE_MODEL=true`, which makes `fake` the default model: `FakeListChatModel`
answering one sentence, forever) and its SQLite checkpointer (`DATABASE_TYPE=sqlite`,
LangGraph's `AsyncSqliteSaver` on `--database`). Then as `run_service.py`: the root logger
at its `LOG_LEVEL` (WARNING), and `uvicorn.run("service:app")` with uvicorn's defaults (its
access log on; uvloop and httptools, which the toolkit's dependencies install, picked by
uvicorn's `auto`). Only the socket differs: 127.0.0.1 on a free port, announced (`_serve`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from _serve import serve

# This folder's service.py would shadow the toolkit's `service` package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--database", required=True, help="the checkpointer's SQLite file")
    args = parser.parse_args()
    os.environ.update(USE_FAKE_MODEL="true", DATABASE_TYPE="sqlite", SQLITE_DB_PATH=args.database)
    from core import settings  # noqa: PLC0415 - reads the environment set above

    logging.basicConfig(level=settings.LOG_LEVEL.to_logging_level())
    serve("service:app", timeout_graceful_shutdown=settings.GRACEFUL_SHUTDOWN_TIMEOUT)


if __name__ == "__main__":
    main()
