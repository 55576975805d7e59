"""agent-service-toolkit's own service, as its `run_service.py` starts it, for `service.py`.

Run with the toolkit's virtualenv (`benchmarks/setup.sh` makes it, `VENV_DIR/toolkit`):

    .venv-bench/toolkit/bin/python benchmarks/_toolkit_server.py --database FILE
    .venv-bench/toolkit/bin/python benchmarks/_toolkit_server.py --postgres-url URL

Its settings come from the environment, as in its Docker image and its smoke test: its fake
model (`USE_FAKE_MODEL=true`, which makes `fake` the default model: `FakeListChatModel`
answering one sentence, forever) and its SQLite checkpointer (`DATABASE_TYPE=sqlite`,
LangGraph's `AsyncSqliteSaver` and `AsyncSqliteStore` on `--database`), or with
`--postgres-url` its PostgreSQL ones (`DATABASE_TYPE=postgres` and the URL's parts as its
`POSTGRES_*` settings: LangGraph's `AsyncPostgresSaver` and `AsyncPostgresStore`, each on a
psycopg pool of the toolkit's default size, `POSTGRES_MAX_CONNECTIONS_PER_POOL`, unless the
environment sets it). Then as `run_service.py`: the root logger
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
from urllib.parse import unquote, urlsplit

from _serve import serve

# This folder's service.py would shadow the toolkit's `service` package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]


def postgres_settings(url: str) -> dict[str, str]:
    """The toolkit's `POSTGRES_*` settings naming the database at `url`."""
    parts = urlsplit(url)
    return {
        "POSTGRES_USER": unquote(parts.username or ""),
        "POSTGRES_PASSWORD": unquote(parts.password or ""),
        "POSTGRES_HOST": parts.hostname or "127.0.0.1",
        "POSTGRES_PORT": str(parts.port or 5432),
        "POSTGRES_DB": parts.path.lstrip("/"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--database", help="the checkpointer's SQLite file")
    where.add_argument("--postgres-url", help="the checkpointer's PostgreSQL database (a URL)")
    args = parser.parse_args()
    os.environ["USE_FAKE_MODEL"] = "true"
    if args.database:
        os.environ.update(DATABASE_TYPE="sqlite", SQLITE_DB_PATH=args.database)
    else:
        os.environ.update(DATABASE_TYPE="postgres", **postgres_settings(args.postgres_url))
    from core import settings  # noqa: PLC0415 - reads the environment set above

    logging.basicConfig(level=settings.LOG_LEVEL.to_logging_level())
    serve("service:app", timeout_graceful_shutdown=settings.GRACEFUL_SHUTDOWN_TIMEOUT)


if __name__ == "__main__":
    main()
