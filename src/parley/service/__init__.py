"""parley's HTTP service: agent-service-toolkit's protocol and more (see docs/service-protocol.md).

`create_app()` builds the FastAPI app; `parley serve` runs it with uvicorn. The parts:
`settings` (PARLEY_* variables), `registry` (the agents served), `served_models` (the models
`/v1` serves as themselves), `store` (threads, messages,
runs on SQLite or PostgreSQL), `runs` (one run per thread, cancellable), `auth` (API keys,
the toolkit's shared secret), the routes (`routes_toolkit`, `routes_threads`,
`openai_compat`) and the web page in `static/`.

The names below load on first use, so `parley.service.schema` (which the client reads) does
not pull in FastAPI and SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parley.service.app import build_registry, create_app
    from parley.service.registry import AgentEntry, AgentRegistry, builtin_agent
    from parley.service.served_models import ModelRegistry
    from parley.service.settings import ServiceSettings

__all__ = [
    "AgentEntry",
    "AgentRegistry",
    "ModelRegistry",
    "ServiceSettings",
    "build_registry",
    "builtin_agent",
    "create_app",
]

_HOMES = {
    "AgentEntry": "parley.service.registry",
    "AgentRegistry": "parley.service.registry",
    "ModelRegistry": "parley.service.served_models",
    "ServiceSettings": "parley.service.settings",
    "build_registry": "parley.service.app",
    "builtin_agent": "parley.service.registry",
    "create_app": "parley.service.app",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'parley.service' has no attribute {name!r}")
    try:
        module = importlib.import_module(home)
    except ImportError as exc:
        from parley.errors import MissingDependencyError  # noqa: PLC0415

        raise MissingDependencyError(exc.name or "fastapi", "service") from exc
    return getattr(module, name)
