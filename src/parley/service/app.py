"""`create_app`: the FastAPI application, its start-up and shut-down, and its error answers.

```python
from parley.service import create_app
app = create_app()                           # settings from PARLEY_* and .env
app = create_app(ServiceSettings(database_url=...), agents=[my_agent])
app = create_app(agents=[my_agent], models={"qwen": "dashscope:qwen-plus"})  # also a model
```

Errors are JSON `{"detail": ...}`: parley's `ServiceError`s with their status, a usage
mistake as 422, and anything unexpected as a bare 500 (logged here, never a stack trace in
the answer). On `/v1/...` the same answers come in OpenAI's error shape (`openai_compat`).

Every request's body is bounded (`max_body_bytes`: 413 as it arrives) and every stream's
client must keep up (`send_timeout`, `stream_buffer_bytes`): `parley.service.bounds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from parley import tracing
from parley.agents import Agent
from parley.errors import ConfigurationError, ParleyError, ServiceError, UserError
from parley.models.base import ChatModel
from parley.models.spec import DEFAULT_MODEL_SPEC, model_from_spec
from parley.providers.auto import ModelChoice, choose_model, is_embedded
from parley.service import (
    langgraph,
    openai_compat,
    routes_agui,
    routes_events,
    routes_runs,
    routes_threads,
    routes_toolkit,
)
from parley.service.access_log import AccessLogged
from parley.service.auth import local_only_tools
from parley.service.bounds import CONNECTION, ClientConnection, limit_body
from parley.service.documents import DOCUMENTS_KEY, DocumentsService
from parley.service.events import StoreEventLog
from parley.service.registry import (
    BUILTIN_DESCRIPTION,
    TINY_DESCRIPTION,
    AgentRegistry,
    builtin_agent,
)
from parley.service.runs import RunManager
from parley.service.served_models import ModelRegistry, ModelsInput, served_models
from parley.service.settings import ServiceSettings
from parley.service.state import ServiceState
from parley.service.store import Store, thread_locks
from parley.service.store.runners import DATABASE_DOWN, is_database_down
from parley.service.worker import RunWorker

__all__ = ["MODEL_CHOICE_VARIABLE", "build_registry", "create_app", "model_choice"]

log = logging.getLogger("parley.service")

MODEL_CHOICE_VARIABLE = "PARLEY_MODEL_CHOICE"
"""Where `parley serve` hands its worker processes the model it chose (JSON of a
`ModelChoice`), so that the model is chosen once and every process runs the same one."""

NO_AUTH_WARNING = (
    "parley: no auth configured (PARLEY_API_KEYS / AUTH_SECRET): every request is user "
    "'local', and the service listens on 127.0.0.1 only"
)


def model_choice(settings: ServiceSettings) -> ModelChoice | None:
    """The model the settings' agents run on, and why; None when the agents bring their own.

    The settings' `model` when set; unset, the one `parley serve` chose and handed down
    (`MODEL_CHOICE_VARIABLE`), else the one the user already has (`choose_model`): asked
    only when the built-in agent or the documents' assistant runs on it.
    """
    if settings.model:
        return choose_model(settings.model)
    if (settings.agents or settings.agents_file is not None) and not settings.docs:
        return None  # the settings' own agents: their models are theirs
    handed = os.environ.get(MODEL_CHOICE_VARIABLE)
    if handed:
        try:
            return ModelChoice(**json.loads(handed))
        except (TypeError, ValueError):
            log.warning("parley: ignoring %s, which is not a model choice", MODEL_CHOICE_VARIABLE)
    return choose_model()


def _settle_model(
    settings: ServiceSettings, own_agents: bool
) -> tuple[ServiceSettings, ModelChoice | None]:
    """The settings with their model chosen (once, at start-up: the rest sees a spec)."""
    choice = model_choice(settings) if own_agents else None
    if choice is not None and settings.model != choice.spec:
        settings = settings.model_copy(update={"model": choice.spec})
    return settings, choice


class _OwnedModels:
    """Builds models from specs for the service's own agents, and closes them at shut-down.

    A hosted or Ollama model holds a connection pool: left open, its sockets outlive the app.
    """

    def __init__(self) -> None:
        self.models: list[ChatModel] = []

    def __call__(self, spec: str) -> ChatModel:
        model = model_from_spec(spec)
        self.models.append(model)
        return model

    async def aclose(self) -> None:
        for model in self.models:
            close = getattr(model, "aclose", None)
            if callable(close):
                with contextlib.suppress(Exception):  # one failing close stops no other
                    await close()


def build_registry(
    settings: ServiceSettings,
    documents: DocumentsService | None = None,
    build_model: Callable[[str], ChatModel] = model_from_spec,
) -> AgentRegistry:
    """The agents the settings name; the built-in agent when they name none.

    With `documents` (the settings' `docs`), its assistant is served too, as the default
    agent unless the settings name another. `build_model` makes the built-in agent's model.
    """
    registry = AgentRegistry()
    for target in settings.agents:
        registry.load(target)
    if settings.agents_file is not None:
        registry.load_file(settings.agents_file)
    if documents is not None:
        registry.register(
            documents.agent,
            key=DOCUMENTS_KEY,
            description="Answers from the documents it was given, citing file and page.",
            default=True,
        )
    if not len(registry):
        spec = settings.model or DEFAULT_MODEL_SPEC  # create_app chose it; `local` if called alone
        # Said without building the model: the embedded one is offered no tool (`builtin_agent`).
        described = TINY_DESCRIPTION if is_embedded(spec) else BUILTIN_DESCRIPTION
        registry.register(
            lambda: builtin_agent(build_model(spec)), key="assistant", description=described
        )
    if settings.default_agent is not None:
        registry.default = settings.default_agent
    return registry


def _registry(
    agents: AgentRegistry | Iterable[Agent] | None,
    settings: ServiceSettings,
    documents: DocumentsService | None,
    build_model: Callable[[str], ChatModel],
) -> AgentRegistry:
    if agents is None:
        return build_registry(settings, documents, build_model)
    registry = agents if isinstance(agents, AgentRegistry) else AgentRegistry(agents)
    if not len(registry):
        raise ConfigurationError("no agent to serve: pass agents, or None for the settings'")
    if settings.default_agent is not None and not isinstance(agents, AgentRegistry):
        registry.default = settings.default_agent
    return registry


def _served(
    models: ModelRegistry | ModelsInput | None,
    settings: ServiceSettings,
    agents: AgentRegistry,
    *,
    builtin: bool,
) -> ModelRegistry:
    if models is None:
        # The settings' model is served by default only beside the built-in agent, which
        # runs on it: a service of one's own agents serves a model when told to.
        builtin_agent = builtin and not settings.agents and settings.agents_file is None
        served = served_models(settings, builtin_agent=builtin_agent and not settings.docs)
    else:
        served = models if isinstance(models, ModelRegistry) else ModelRegistry(models)
    clashes = [entry.key for entry in served if entry.key in agents]
    if clashes:
        raise ConfigurationError(
            f"{clashes[0]!r} names an agent and a served model; `model` on /v1 must name one "
            "of them: rename the model (served_models as a mapping) or the agent"
        )
    return served


@contextlib.contextmanager
def _frozen_heap(freeze: bool) -> Iterator[None]:
    """With `freeze`: the heap the service starts with kept out of every later full collection.

    A full collection scans every object the collector tracks, and a started service holds
    hundreds of thousands (its modules, the app and its routes, the agents, SQLAlchemy's
    tables): one took 100 ms and more here, under load several times a second, and was most
    of a request's p99 (`benchmarks/service.py`: p99 at 16 clients 146-187 ms, 56-62 ms with
    it frozen). What is garbage now is collected first; what is frozen is what the process
    holds anyway, and it is given back to the collector at shutdown (an app made and dropped,
    as tests do, leaks nothing).
    """
    if not freeze:
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def create_app(
    settings: ServiceSettings | None = None,
    agents: AgentRegistry | Iterable[Agent] | None = None,
    models: ModelRegistry | ModelsInput | None = None,
) -> FastAPI:
    """The service as an ASGI app (serve it with `parley serve`, or uvicorn).

    Args:
        settings: How to run; read from `PARLEY_*` variables and `.env` when None.
        agents: The agents to serve; the settings' agents (or the built-in one) when None.
        models: The models `/v1/chat/completions` serves as themselves (names mapped to
            specs or models, or specs); the settings' `served_models` when None.

    Raises:
        ConfigurationError: No agent to serve, or a served model's name is an agent's too.
    """
    settings, choice = _settle_model(settings or ServiceSettings(), agents is None)
    owned = _OwnedModels()
    documents = DocumentsService(settings, owned) if settings.docs and agents is None else None
    registry = _registry(agents, settings, documents, owned)
    served = _served(models, settings, registry, builtin=agents is None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _tell_access(settings)
        store = await Store.open(settings.database_url)
        locks = thread_locks(settings.database_url)
        events = await StoreEventLog.open(
            store,
            retention=settings.event_retention,
            flush_interval=settings.event_flush_interval,
        )
        runs = RunManager(
            store,
            locks,
            busy_timeout=settings.busy_timeout,
            buffer_bytes=settings.stream_buffer_bytes,
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            run_concurrency=settings.run_concurrency,
            events=events,
        )
        state = ServiceState(settings, registry, store, locks, runs, served, events, choice)
        runs.resolve = state.resolve_run
        app.state.parley = state
        worker = RunWorker(runs)
        worker.start()
        if documents is not None:
            await documents.start()
        warm = asyncio.create_task(_warm_up(registry, settings))
        try:
            with _frozen_heap(settings.gc_freeze):
                yield
        finally:
            warm.cancel()
            await worker.close()
            if documents is not None:
                await documents.close()
            await runs.close()
            await events.close()
            await served.aclose()
            await owned.aclose()
            await locks.close()
            await store.close()

    app = _App(
        settings.max_body_bytes,
        access_log=settings.access_log,
        title="parley",
        summary="LLM agents over HTTP: agent-service-toolkit's protocol, AG-UI, threads, "
        "approvals and an OpenAI-compatible endpoint.",
        version=_version(),
        lifespan=lifespan,
    )
    _add_error_handlers(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            # LangGraph's clients (useStream in a browser) read the run from Content-Location
            # and reconnect to Location.
            expose_headers=[
                "X-Thread-Id",
                "X-Run-Id",
                "Location",
                "Content-Location",
                "X-Pagination-Total",
                "X-Pagination-Next",
            ],
        )
    app.include_router(routes_toolkit.router)
    app.include_router(routes_runs.router)  # before threads': `/runs/{id}/join` is its own
    app.include_router(routes_threads.router)
    app.include_router(routes_agui.router)
    app.include_router(routes_events.router)
    app.include_router(langgraph.router)
    app.include_router(openai_compat.router)
    openai_compat.add_error_handlers(app)  # after ours: it reshapes their answers on /v1
    # The page's files only where no API route matches the path: `PUT /invoke` is the route's
    # 405 (`Allow: POST`), not the file server's (`Allow: GET, HEAD`, as a mount at / answered).
    app.frontend("/", directory=_static_dir(), fallback=None)
    _trace(app, settings)
    return app


class _App(FastAPI):
    """FastAPI, with the server's connection kept, the request body bounded, and logged.

    Here, before any middleware wraps them: `send` is the server's own (what drops a client
    that does not read, `ClientConnection`), and a body over the limit is refused before
    tracing or anything else reads it. With `access_log`, each request's line is written
    after its response was sent (`parley.service.access_log`).
    """

    def __init__(self, max_body_bytes: int, *, access_log: bool, **options: Any) -> None:
        super().__init__(**options)
        self.max_body_bytes = max_body_bytes
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request, its body bounded and its connection at hand."""
        if scope["type"] == "http":
            scope[CONNECTION] = ClientConnection(send)
            receive = limit_body(scope, receive, self.max_body_bytes)
            if self.access_log:
                logged = AccessLogged(scope, send)
                try:
                    await super().__call__(scope, receive, logged)
                finally:
                    logged.close()
                return
        await super().__call__(scope, receive, send)


def _trace(app: FastAPI, settings: ServiceSettings) -> None:
    """Trace the app's requests when tracing is on (the setting, `OTEL_*`, or a provider set).

    Raises:
        ConfigurationError: The setting asks for tracing and the tracing extra is missing.
    """
    enabled = True if settings.tracing else None  # None: as the OTEL_* variables say
    content = True if settings.tracing_content else None
    if tracing.configure(enabled, capture_content=content):
        tracing.instrument_app(app)


async def _warm_up(registry: AgentRegistry, settings: ServiceSettings) -> None:
    """Build the default agent and load its model now, so the first question is quick."""
    try:
        agent = await asyncio.to_thread(lambda: registry.get(registry.default).agent)
        _tell_local_only(agent, settings)
        load = getattr(agent.model, "load", None)
        if callable(load):
            await load()
    except Exception:  # the first request will report it
        log.warning("could not prepare the default agent", exc_info=True)


def _tell_access(settings: ServiceSettings) -> None:
    """Say who may call (anyone, without auth) and how a request from here is told apart.

    See `parley.service.local` for the second.
    """
    if not settings.auth_enabled:
        log.warning(NO_AUTH_WARNING)
    proxies = settings.trusted_proxies
    if proxies:
        log.info(
            "parley: requests from %s are taken as a reverse proxy's: their client is the one "
            "X-Forwarded-For names, and without it they are not from this machine",
            ", ".join(proxies),
        )
    elif proxies is None:
        log.info(
            "parley: PARLEY_TRUSTED_PROXIES is not set: a request is from its connection's "
            "address, or, carrying a proxy's forwarding header, from no one known"
        )


def _tell_local_only(agent: Agent, settings: ServiceSettings) -> None:
    names = local_only_tools(agent)
    if not names:
        return
    if settings.auth_enabled and settings.trusted_proxies is None:
        served = (
            "they are refused to every request (403) until PARLEY_TRUSTED_PROXIES says which "
            "reverse proxies stand in front of this service ('[]' for none): behind one on "
            "this machine, every request would look local"
        )
    else:
        served = "requests from other machines that would run them are refused (403)"
    log.warning(
        "parley: agent %r has tools that serve this machine only (%s: the code "
        "interpreter's sandbox here is weaker than bubblewrap); %s",
        agent.name,
        ", ".join(names),
        served,
    )


def _static_dir() -> Path:
    return Path(str(resources.files("parley.service") / "static"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("parley")
    except PackageNotFoundError:
        return "0"


def _add_error_handlers(app: FastAPI) -> None:
    async def service_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)  # registered for this class only
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)

    async def user_error(_request: Request, exc: Exception) -> JSONResponse:
        # In the shape of every other 422 (FastAPI's validation errors), as the schema says.
        error = {"loc": [], "msg": str(exc), "type": "value_error"}
        return JSONResponse({"detail": [error]}, status_code=422)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)  # registered for this class only
        if exc.status_code == 405:
            # FastAPI's file server names no methods: the page's files are GET and HEAD.
            given = (exc.headers or {}).get("Allow", "GET, HEAD")
            exc.headers = {**(exc.headers or {}), "Allow": _allowed_methods(request) or given}
        return await http_exception_handler(request, exc)

    async def parley_error(_request: Request, exc: Exception) -> JSONResponse:
        log.warning("request failed: %s", exc)
        return JSONResponse({"detail": str(exc)}, status_code=502)

    async def database_down(request: Request, exc: Exception) -> JSONResponse:
        # Refused, dropped, out of connections or of pool slots: the request may well work
        # in a moment, which a 503 with Retry-After says (a 500 would say the service broke).
        if not is_database_down(exc):
            return await unexpected(request, exc)
        log.error("database unavailable on %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse(
            {"detail": "the database is unavailable; try again shortly"},
            status_code=503,
            headers={"Retry-After": "1"},
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": "internal server error"}, status_code=500)

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(UserError, user_error)
    app.add_exception_handler(ParleyError, parley_error)
    for unavailable in DATABASE_DOWN:
        app.add_exception_handler(unavailable, database_down)
    app.add_exception_handler(Exception, unexpected)


def _allowed_methods(request: Request) -> str | None:
    """Every method the request's path takes, as the API's schema lists them.

    A 405 from Starlette names the methods of one route only, the first on the path: `PUT
    /threads/x` would be told `Allow: GET`, though `DELETE` is there too (another route).
    """
    path = getattr(request.scope.get("route"), "path_format", None)
    operations = request.app.openapi().get("paths", {}).get(path) if path else None
    if not operations:
        return None
    return ", ".join(sorted(method.upper() for method in operations))
