"""`parley serve`, `parley worker` and `parley keys`: the service, its workers, its keys.

`parley worker` runs only run workers (no HTTP): the same settings, agents and database as
`parley serve`, taking queued runs, and taking over the runs of replicas that died.

`parley serve` passes its options on as `PARLEY_*` environment variables and starts uvicorn
on the app factory, so every worker process builds the same app from the same settings.
uvicorn's own reading of `X-Forwarded-For` is off: the app reads it, from the proxies
`PARLEY_TRUSTED_PROXIES` names only (`parley.service.local.client_address`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from parley.errors import ConfigurationError

if TYPE_CHECKING:
    from parley.service.settings import ServiceSettings

__all__ = ["add_commands", "keys", "serve", "uvicorn_options", "worker"]

# CLI option → settings variable; only options given on the command line are passed on.
_SERVE_OPTIONS = {
    "host": "PARLEY_HOST",
    "port": "PARLEY_PORT",
    "workers": "PARLEY_WORKERS",
    "database_url": "PARLEY_DATABASE_URL",
    "model": "PARLEY_MODEL",
    "agents_file": "PARLEY_AGENTS_FILE",
    "default_agent": "PARLEY_DEFAULT_AGENT",
    "log_level": "PARLEY_LOG_LEVEL",
    "docs_index": "PARLEY_DOCS_INDEX",
    "docs_embedding": "PARLEY_DOCS_EMBEDDING",
    "tts": "PARLEY_TTS",
    "tracing": "PARLEY_TRACING",
    "run_concurrency": "PARLEY_RUN_CONCURRENCY",
}


def add_commands(commands: Any) -> None:
    """Add `serve` and `keys` to the `parley` command's subparsers."""
    serve_parser = commands.add_parser(
        "serve", help="serve agents over HTTP (the toolkit's API, threads, a web page)"
    )
    serve_parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve_parser.add_argument("--port", type=int, help="port (default 8080)")
    serve_parser.add_argument("--workers", type=int, help="worker processes (PostgreSQL only)")
    serve_parser.add_argument(
        "--database-url",
        help="sqlite+aiosqlite:///file.db (default parley.db) or "
        "postgresql+asyncpg://user:password@host/db",
    )
    serve_parser.add_argument(
        "--model",
        help="the built-in agent's model, provider[:model] (default: a provider key's, an "
        "Ollama server's, the largest pulled, else the embedded local one)",
    )
    serve_parser.add_argument(
        "--serve-model",
        dest="served_models",
        action="append",
        metavar="[NAME=]SPEC",
        help="a model /v1/chat/completions serves as itself, client tools passed through "
        "(repeatable): a spec such as local or openai:gpt-4o-mini, named by itself or NAME",
    )
    _add_agents_and_logs(serve_parser)
    serve_parser.add_argument(
        "--docs",
        action="append",
        metavar="PATH",
        help="serve an assistant (`documents`, the default agent) answering from these files, "
        "folders or URLs with citations; indexed at start-up, kept current (repeatable)",
    )
    serve_parser.add_argument(
        "--docs-index", help="the documents' index: an SQLite file or a PostgreSQL URL"
    )
    serve_parser.add_argument(
        "--docs-embedding",
        metavar="SPEC",
        help="the documents' embedding model, provider[:model] (default local) or 'none'",
    )
    serve_parser.add_argument("--default-agent", help="the agent /invoke and /stream use")
    serve_parser.add_argument(
        "--trusted-proxies",
        metavar="ADDRESSES",
        help="the reverse proxies in front of the service, comma-separated addresses or "
        "networks ('' for none): their requests are judged by X-Forwarded-For",
    )
    serve_parser.add_argument(
        "--tts",
        metavar="SPEC",
        help="the voice for requests asking for speech, provider[:model] (default local)",
    )
    serve_parser.add_argument(
        "--tracing",
        action="store_true",
        default=None,
        help="trace requests, runs, model calls and tools with OpenTelemetry (OTLP/HTTP to "
        "OTEL_EXPORTER_OTLP_ENDPOINT; see docs/tracing.md)",
    )
    serve_parser.add_argument(
        "--run-concurrency",
        type=int,
        help="runs this process takes from the queue at once (default 16; 0: none, leave "
        "them to `parley worker` processes)",
    )
    serve_parser.set_defaults(run=serve)
    _add_worker(commands)

    keys_parser = commands.add_parser("keys", help="create, list and revoke API keys")
    keys_parser.add_argument("--database-url", help="the service's database (default: settings)")
    actions = keys_parser.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="make a key for a user (printed once)")
    create.add_argument("user", help="the user the key acts as")
    create.add_argument("--name", default="", help="a label for the key")
    listing = actions.add_parser("list", help="list keys (never the keys themselves)")
    listing.add_argument("--user", help="only this user's keys")
    revoke = actions.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id", help="the id `keys list` shows")
    keys_parser.set_defaults(run=keys)


def _add_agents_and_logs(parser: argparse.ArgumentParser) -> None:
    """The options `serve` and `worker` share: which agents, and how much to log."""
    parser.add_argument(
        "--agent",
        dest="agents",
        action="append",
        metavar="MODULE:ATTR",
        help="an agent (repeatable): an Agent, a factory, a list or a registry",
    )
    parser.add_argument("--agents-file", help="a TOML or YAML file listing agents")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])


def _add_worker(commands: Any) -> None:
    worker_parser = commands.add_parser(
        "worker",
        help="run queued runs only (no HTTP), beside `parley serve` replicas on one database",
    )
    worker_parser.add_argument(
        "--database-url", help="the service's database (PostgreSQL for several processes)"
    )
    _add_agents_and_logs(worker_parser)
    worker_parser.add_argument(
        "--model", help="the built-in agent's model (default: chosen as `parley serve` does)"
    )
    worker_parser.add_argument("--default-agent", help="the default agent")
    worker_parser.add_argument(
        "--run-concurrency", type=int, help="runs taken at once (default 16)"
    )
    worker_parser.set_defaults(run=worker, docs=None)


def worker(args: argparse.Namespace) -> int:
    """`parley worker`: take and run queued runs until SIGTERM or Ctrl-C (no HTTP)."""
    from parley.service.settings import ServiceSettings  # noqa: PLC0415

    _export(args)
    settings = ServiceSettings()
    if settings.run_concurrency < 1:
        raise ConfigurationError(
            "a worker with PARLEY_RUN_CONCURRENCY=0 would run nothing; give it 1 or more"
        )
    _show_parley_logs()
    _choose_model(settings)
    print(
        f"parley: worker taking up to {settings.run_concurrency} runs at once from "
        f"{_shown(settings.database_url)}",
        file=sys.stderr,
    )
    asyncio.run(_work(settings))
    return 0


async def _work(settings: Any) -> None:
    """Run the service's start-up (store, agents, run worker), then wait for a signal."""
    import signal  # noqa: PLC0415

    from parley.service.app import create_app  # noqa: PLC0415

    app = create_app(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    async with app.router.lifespan_context(app):
        print("parley: worker ready", file=sys.stderr, flush=True)
        await stop.wait()
        print("parley: worker stopping (its runs end interrupted)", file=sys.stderr, flush=True)


def _served_models(given: list[str]) -> list[str] | dict[str, str]:
    """`--serve-model` values as the setting takes them: specs, or names mapped to specs."""
    pairs = [item.partition("=") for item in given]
    if not any(sep for _, sep, _ in pairs):
        return given
    return {name: spec if sep else name for name, sep, spec in pairs}


def _export(args: argparse.Namespace) -> None:
    for option, variable in _SERVE_OPTIONS.items():
        value = getattr(args, option, None)
        if value is not None:
            os.environ[variable] = str(value)
    import json  # noqa: PLC0415

    if args.agents:
        os.environ["PARLEY_AGENTS"] = json.dumps(args.agents)
    if getattr(args, "served_models", None):
        os.environ["PARLEY_SERVED_MODELS"] = json.dumps(_served_models(args.served_models))
    trusted = getattr(args, "trusted_proxies", None)
    if trusted is not None:
        proxies = [p.strip() for p in trusted.split(",") if p.strip()]
        os.environ["PARLEY_TRUSTED_PROXIES"] = json.dumps(proxies)
    if args.docs:
        # Resolved here: uvicorn's workers may start elsewhere than the working directory.
        docs = [d if "://" in d else os.path.abspath(d) for d in args.docs]
        os.environ["PARLEY_DOCS"] = json.dumps(docs)


def serve(args: argparse.Namespace) -> int:
    """`parley serve`: run the service with uvicorn until interrupted."""
    import uvicorn  # noqa: PLC0415

    from parley.service.settings import ServiceSettings  # noqa: PLC0415

    _export(args)
    settings = ServiceSettings()
    if settings.workers > 1 and settings.is_sqlite:
        raise ConfigurationError(
            "an SQLite store is served by one process; use PostgreSQL "
            "(--database-url postgresql+asyncpg://...) for --workers above 1"
        )
    host = settings.bind_host()
    if host != settings.host:
        print(
            f"parley: no auth configured, so binding {host} instead of {settings.host}",
            file=sys.stderr,
        )
    _show_parley_logs()
    _choose_model(settings)
    where = "localhost" if host in ("127.0.0.1", "0.0.0.0", "::") else host
    print(
        f"parley: the web page is at http://{where}:{settings.port}/ "
        f"(API docs at /docs; database {_shown(settings.database_url)})",
        file=sys.stderr,
    )
    uvicorn.run(
        "parley.service.app:create_app",
        factory=True,
        host=host,
        port=settings.port,
        workers=settings.workers,
        **uvicorn_options(settings),
    )
    return 0


def uvicorn_options(settings: ServiceSettings) -> dict[str, Any]:
    """How `parley serve` runs uvicorn (`uvicorn.Config`'s options), but for where and how many.

    The access log is the app's (`parley.service.access_log`), written after each response
    where uvicorn wrote its own line, which is off: uvicorn writes it before the response.
    """
    from parley.service.access_log import uvicorn_log_config  # noqa: PLC0415

    loop, http = _server_parts()
    return {
        "log_level": settings.log_level,
        "log_config": uvicorn_log_config(settings.log_level),
        "access_log": False,
        "timeout_graceful_shutdown": 10,
        "loop": loop,
        "http": http,
        # The app reads X-Forwarded-For itself, from the proxies the settings name only; left
        # on, uvicorn would take it from any client on 127.0.0.1 before the app saw the peer.
        "proxy_headers": False,
    }


def _choose_model(settings: Any) -> None:
    """Choose the built-in agent's model once, say which, and hand it to the app's processes.

    uvicorn's worker processes build the app from the environment: they take this choice
    (`MODEL_CHOICE_VARIABLE`) instead of looking around again, so all run the one said here.
    """
    import dataclasses  # noqa: PLC0415
    import json  # noqa: PLC0415

    from parley.service.app import MODEL_CHOICE_VARIABLE, model_choice  # noqa: PLC0415

    os.environ.pop(MODEL_CHOICE_VARIABLE, None)  # a choice of another run's is not this one
    choice = model_choice(settings)
    if choice is None:
        return  # the served agents bring their own models
    if settings.model is None:
        os.environ[MODEL_CHOICE_VARIABLE] = json.dumps(dataclasses.asdict(choice))
    print(f"parley: {choice.describe()}", file=sys.stderr)


def _server_parts() -> tuple[str, str]:
    """The event loop and HTTP parser for uvicorn: uvloop and httptools when installed.

    As uvicorn's `auto` picks them, said aloud: without them (the `service-fast` extra) a
    request costs more CPU, on asyncio's loop and h11's parser, both mostly Python.
    """
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    http = "httptools" if find_spec("httptools") else "h11"
    if (loop, http) != ("uvloop", "httptools"):
        print(
            f"parley: serving on {loop} and {http}; pip install 'parley[service-fast]' for "
            "uvloop and httptools, a faster event loop and HTTP parser",
            file=sys.stderr,
        )
    return loop, http


def _show_parley_logs() -> None:
    """Show the log lines of parley (INFO and up) on standard error, as uvicorn shows its own.

    Among them, at start-up, which sandbox the code interpreter runs in.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    parley_logger = logging.getLogger("parley")
    parley_logger.addHandler(handler)
    parley_logger.setLevel(logging.INFO)


def _shown(url: str) -> str:
    """A database URL without its password."""
    from sqlalchemy.engine import make_url  # noqa: PLC0415

    return make_url(url).render_as_string(hide_password=True)


def keys(args: argparse.Namespace) -> int:
    """`parley keys`: create, list or revoke API keys in the service's database."""
    from parley.service.settings import ServiceSettings  # noqa: PLC0415
    from parley.service.store import Store  # noqa: PLC0415

    overrides = {"database_url": args.database_url} if args.database_url else {}
    settings = ServiceSettings(**overrides)

    async def run() -> int:
        store = await Store.open(settings.database_url)
        try:
            return await _key_action(store, args)
        finally:
            await store.close()

    return asyncio.run(run())


async def _key_action(store: Any, args: argparse.Namespace) -> int:
    if args.action == "create":
        key, record = await store.create_api_key(args.user, args.name)
        print(key)
        print(
            f"key {record.key_id} for user {record.user_id!r}: shown once, stored hashed",
            file=sys.stderr,
        )
        return 0
    if args.action == "list":
        for record in await store.list_api_keys(args.user):
            state = f"revoked {record.revoked_at:%Y-%m-%d}" if record.revoked_at else "live"
            print(f"{record.key_id}\t{record.user_id}\t{record.name}\t{state}")
        return 0
    if not await store.revoke_api_key(args.key_id):
        print(f"parley: no live key with id {args.key_id!r}", file=sys.stderr)
        return 1
    print(f"revoked {args.key_id}", file=sys.stderr)
    return 0
