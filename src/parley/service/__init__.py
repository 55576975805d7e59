"""parley's HTTP service: agent-service-toolkit's protocol and more (see docs/service-protocol.md).

`create_app()` builds the FastAPI app; `parley serve` runs it with uvicorn. The parts:
`settings` (PARLEY_* variables), `registry` (the agents served), `store` (threads, messages,
runs on SQLite or PostgreSQL), `runs` (one run per thread, cancellable), `auth` (API keys,
the toolkit's shared secret), the routes (`routes_toolkit`, `routes_threads`,
`openai_compat`) and the web page in `static/`.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import sqlalchemy  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from parley.errors import MissingDependencyError

    raise MissingDependencyError(exc.name or "fastapi", "service") from exc

from parley.service.app import build_registry, create_app
from parley.service.registry import AgentEntry, AgentRegistry, builtin_agent
from parley.service.settings import ServiceSettings

__all__ = [
    "AgentEntry",
    "AgentRegistry",
    "ServiceSettings",
    "build_registry",
    "builtin_agent",
    "create_app",
]
