"""Tracing fixtures: parley's spans into an in-memory exporter, and a clean global state.

`spans` gives parley a tracer provider of the test's own (`use_tracer_provider`), exporting
to the SDK's `InMemorySpanExporter`; `global_provider` lets a test set OpenTelemetry's global
provider (once per process, by design) and puts the previous one back afterwards. Every one
of them starts from `clean_tracing`: no tracing variable of the developer's, parley's state
forgotten. The suite's conftest registers them (they import OpenTelemetry only when used).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from parley import tracing
from parley.tracing import _setup
from tests._requires import require_module

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_VARIABLES = [
    "PARLEY_TRACING",
    "PARLEY_TRACING_CONTENT",
    CONTENT,
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
]


class Spans:
    """The spans a test's code ended, by name; `exporter` holds them in end order."""

    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.all()])
        return found[0]

    def names(self) -> list[str]:
        return [s.name for s in self.all()]


def parent_of(span: ReadableSpan) -> int | None:
    """The span id of `span`'s parent (None for a root)."""
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    context = span.context
    assert context is not None
    return context.span_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.fixture
def clean_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No tracing variable of the developer's leaks in; parley's state forgotten after."""
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    _setup.reset()
    yield
    tracing.use_tracer_provider(None)
    _setup.reset()


@pytest.fixture
def spans(clean_tracing: None) -> Spans:
    """parley's spans, to an in-memory exporter (no global provider touched)."""
    require_module("opentelemetry.sdk", "tracing")
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    return Spans(exporter, provider)


@pytest.fixture
def content(clean_tracing: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GenAI conventions' opt-in for recording content, on."""
    monkeypatch.setenv(CONTENT, "true")


@pytest.fixture
def global_provider(clean_tracing: None) -> Iterator[None]:
    """Lets the test set OpenTelemetry's global provider; the previous one is put back.

    OpenTelemetry sets it once per process (`_TRACER_PROVIDER_SET_ONCE`): its private state is
    saved and restored here, so one test's provider cannot turn tracing on for the rest.
    """
    require_module("opentelemetry.sdk", "tracing")
    from opentelemetry import trace  # noqa: PLC0415

    once = trace._TRACER_PROVIDER_SET_ONCE
    saved = (trace._TRACER_PROVIDER, once._done)
    once._done = False
    trace._TRACER_PROVIDER = None
    try:
        yield
    finally:
        current = trace._TRACER_PROVIDER
        if current is not None and current is not saved[0]:
            shutdown = getattr(current, "shutdown", None)
            if callable(shutdown):
                shutdown()
        trace._TRACER_PROVIDER, once._done = saved
        _setup._state.configured = False
