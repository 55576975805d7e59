"""Whether parley traces, to which tracer provider, and whether spans carry content.

OpenTelemetry is imported only when tracing may be on: importing `opentelemetry.trace` takes
a fifth of a second (its context loads entry points), which a program that never traces
should not pay. Tracing is on when a recording tracer provider is there to take the spans:

- the one given to `use_tracer_provider` (tests, or an application that keeps its own);
- else the global one, once anybody sets it (`trace.set_tracer_provider`), parley's own
  included: `configure()` sets one from the standard `OTEL_*` variables, at most once per
  process, and leaves a provider set by someone else as it is.

`configure()` runs by itself on the first traced operation when the environment asks for
tracing (`PARLEY_TRACING=true`, `OTEL_TRACES_EXPORTER`, or an OTLP endpoint variable);
`OTEL_SDK_DISABLED=true` keeps parley from setting a provider, `PARLEY_TRACING=false` from
using any but one given to `use_tracer_provider`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from parley import __version__
from parley.errors import ConfigurationError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = [
    "CONTENT_VARIABLE",
    "TRACING_VARIABLE",
    "capture_content",
    "configure",
    "instrument_app",
    "reset",
    "tracer",
    "use_tracer_provider",
]

log = logging.getLogger("parley.tracing")

TRACING_VARIABLE = "PARLEY_TRACING"
"""Turns tracing on (`true`), or off (`false`: whatever the `OTEL_*` variables say, and even
with a global provider someone else set; a provider given to `use_tracer_provider` still
counts)."""

CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' opt-in for recording prompts, answers and tool arguments."""

PARLEY_CONTENT_VARIABLE = "PARLEY_TRACING_CONTENT"
"""parley's own name for the same opt-in."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# The conventions' newer values for the content variable: the span ones record on spans.
_CONTENT_ON = _TRUE | {"span_only", "span_and_event"}
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_INSTALL_HINT = "install the tracing extra: pip install 'parley[tracing]'"
_SCOPE = "parley"


class _State:
    """The process's tracing state (one instance, `_state`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.checked_environment = False
        self.provider_variable = False  # OTEL_PYTHON_TRACER_PROVIDER names a provider to load
        self.refused = False  # PARLEY_TRACING=false: not even a global provider of another's
        self.configured = False  # parley set the global provider (once per process)
        self.override: Any = None  # the provider given to use_tracer_provider
        self.capture: bool | None = None  # configure(capture_content=...) wins over variables
        # The provider `tracer` last looked at and its tracer (None: off), in one tuple so
        # that a thread reads both of the same moment.
        self.made: tuple[Any, Tracer | None] = (None, None)


_state = _State()
_UNKNOWN = object()


def _flag(name: str) -> bool | None:
    value = os.environ.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def _environment_asks() -> bool:
    """Whether the environment turns tracing on (parley's variable, else the standard ones)."""
    if _flag("OTEL_SDK_DISABLED"):
        return False
    asked = _flag(TRACING_VARIABLE)
    if asked is not None:
        return asked
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return any(os.environ.get(name) for name in _ENDPOINT_VARIABLES)


def tracer() -> Tracer | None:
    """The tracer of parley's spans; None when tracing is off (nothing imported or built).

    Cheap when off: a few lookups, no OpenTelemetry import.
    """
    provider = _state.override
    if provider is None:
        if not _state.checked_environment:
            _check_environment()
        if _state.refused:
            return None
        api = sys.modules.get("opentelemetry.trace")
        if api is None:  # nobody imported OpenTelemetry: nobody can have set a provider
            return None
        # The global provider as `get_tracer_provider` finds it, without its look into
        # os.environ on every call while none is set (1.6 µs a hook, where FastAPI has
        # imported the API and nobody traces).
        provider = getattr(api, "_TRACER_PROVIDER", _UNKNOWN)
        if provider is None and not _state.provider_variable:
            return None
        if provider is None or provider is _UNKNOWN:
            provider = api.get_tracer_provider()
    known, found = _state.made
    if provider is known:
        return found
    return _tracer_of(provider)


def _tracer_of(provider: TracerProvider) -> Tracer | None:
    from opentelemetry import trace  # noqa: PLC0415  (imported already: see `tracer`)

    # No provider set (a proxy waiting for one), or the API's no-op one: tracing is off.
    off = isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    made = None if off else provider.get_tracer(_SCOPE, __version__)
    _state.made = (provider, made)
    return made


def _read_environment() -> None:
    _state.checked_environment = True
    _state.provider_variable = bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"))
    _state.refused = _flag(TRACING_VARIABLE) is False


def _check_environment() -> None:
    """On the first traced operation: configure tracing if the environment asks for it."""
    _read_environment()
    if not _environment_asks():
        return
    try:
        configure(True)
    except ConfigurationError as exc:
        # Asked for by a variable, perhaps meant for another program: say so once, go on.
        log.warning("parley: tracing stays off: %s", exc)


def configure(enabled: bool | None = None, *, capture_content: bool | None = None) -> bool:
    """Turn tracing on: a global SDK tracer provider exporting as the `OTEL_*` variables say.

    At most once per process; a global provider someone else set is used as it is, and so
    is the one given to `use_tracer_provider` (no global one is set then). The
    exporters are `OTEL_TRACES_EXPORTER`'s (`otlp`, the default: OTLP over HTTP to
    `OTEL_EXPORTER_OTLP_ENDPOINT`, with `OTEL_EXPORTER_OTLP_HEADERS`; `console`; `none`),
    the service name `OTEL_SERVICE_NAME`'s (`parley` when unset).

    Args:
        enabled: True to turn tracing on, False to leave it off, None to follow the
            environment (`PARLEY_TRACING`, `OTEL_TRACES_EXPORTER`, the OTLP endpoint).
        capture_content: Record prompts, answers and tool arguments and results on spans;
            None follows `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (or
            `PARLEY_TRACING_CONTENT`).

    Returns:
        Whether tracing is on.

    Raises:
        ConfigurationError: Tracing was asked for and the tracing extra is not installed,
            or `OTEL_TRACES_EXPORTER` names an exporter parley does not know.
    """
    if capture_content is not None:
        _state.capture = capture_content
    _read_environment()  # this call decides, not the first traced operation
    wanted = _environment_asks() if enabled is None else enabled
    if wanted and _state.override is None:
        _set_global_provider()
    return tracer() is not None


def _set_global_provider() -> None:
    try:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigurationError(
            f"tracing needs OpenTelemetry's SDK ({exc}): {_INSTALL_HINT}"
        ) from None
    with _state.lock:
        current = trace.get_tracer_provider()
        if _state.configured or not isinstance(current, trace.ProxyTracerProvider):
            return  # ours already, or the application's own: used as it is
        exporters = _exporters()
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES itself.
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "parley"}
        provider = TracerProvider(resource=Resource.create(attributes))
        for exporter in exporters:
            provider.add_span_processor(_processor(exporter))
        trace.set_tracer_provider(provider)
        _state.configured = True
    log.info("parley: tracing to %s", ", ".join(type(e).__name__ for e in exporters) or "nowhere")


def _exporters() -> list[SpanExporter]:
    names = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(",")
    exporters: list[SpanExporter] = []
    for name in (n.strip() for n in names):
        if name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                    OTLPSpanExporter,
                )
            except ImportError as exc:
                raise ConfigurationError(
                    f"OTLP export needs its exporter ({exc}): {_INSTALL_HINT}"
                ) from None
            # Reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT and the rest.
            exporters.append(OTLPSpanExporter())
        elif name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

            # Today's standard output (the SDK's default is the one of its import).
            exporters.append(ConsoleSpanExporter(out=sys.stdout))
        elif name not in ("none", ""):
            raise ConfigurationError(
                f"OTEL_TRACES_EXPORTER names {name!r}; parley exports to otlp, console or none"
            )
    return exporters


def _processor(exporter: SpanExporter) -> Any:
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    # The console shows each span as it ends; a collector gets them in batches.
    if isinstance(exporter, ConsoleSpanExporter):
        return SimpleSpanProcessor(exporter)
    return BatchSpanProcessor(exporter)


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Send parley's spans to `provider` rather than the global one (None: the global again).

    For an application that keeps a provider of its own without making it global, and for
    tests (the SDK's `InMemorySpanExporter` behind a provider of the test's).
    """
    _state.override = provider


def capture_content() -> bool:
    """Whether spans record prompts, answers, tool arguments and results (off by default)."""
    if _state.capture is not None:
        return bool(_state.capture)
    for name in (CONTENT_VARIABLE, PARLEY_CONTENT_VARIABLE):
        if os.environ.get(name, "").strip().lower() in _CONTENT_ON:
            return True
    return False


def instrument_app(app: FastAPI) -> bool:
    """Trace the app's requests (FastAPI's instrumentation), parley's spans nested in them.

    Returns:
        Whether the app is instrumented: False when tracing is off, or when
        `opentelemetry-instrumentation-fastapi` is missing (logged).
    """
    current = tracer()
    if current is None:
        return False
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor  # noqa: PLC0415
    except ImportError as exc:
        log.warning("parley: requests are not traced (%s): %s", exc, _INSTALL_HINT)
        return False
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=_state.made[0],
        # One span per request: a span per SSE frame sent would bury the agent's spans.
        exclude_spans=["receive", "send"],
    )
    return True


def reset() -> None:
    """Forget the state: the environment is read again, the override and content flag drop.

    For tests. A global provider parley set stays set (OpenTelemetry sets one per process).
    """
    configured = _state.configured
    _state.__init__()  # type: ignore[misc]
    _state.configured = configured
