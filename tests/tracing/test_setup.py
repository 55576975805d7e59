"""Turning tracing on and off: the default, the variables, a provider of the user's own."""

from __future__ import annotations

import sys
import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from parley import tracing
from parley.agents import Agent
from parley.errors import ConfigurationError
from parley.models.testing import ScriptedModel
from parley.providers._server.http import RecordedRequest, Responder, ScriptedHTTPServer
from parley.tracing import _setup
from tests._process import run_python
from tests.sample_tools import add
from tests.tracing.fixtures import CONTENT


def calc() -> Agent:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 2}), "3"], model="m")
    return Agent("calc", model, tools=[add])


def sdk_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


# -- off -------------------------------------------------------------------------------------------


async def test_off_by_default_no_span_and_no_error() -> None:
    provider, exporter = sdk_provider()  # a provider nobody gave parley
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)

    answer = await calc().reply("1 + 2?")

    assert answer.text == "3"
    assert _setup.tracer() is None
    assert exporter.get_finished_spans() == ()
    provider.shutdown()


def test_a_program_that_never_traces_never_imports_opentelemetry() -> None:
    """The off path costs no import (OpenTelemetry's takes a fifth of a second).

    The service is another matter: FastAPI imports OpenTelemetry's API itself.
    """
    program = textwrap.dedent(
        """
        import sys
        from parley.agents import Agent
        from parley.models.testing import ScriptedModel
        from parley.tools import tool

        @tool
        def add(a: int, b: int) -> int:
            '''Add.

            Args:
                a: One.
                b: Two.
            '''
            return a + b

        model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 2}), "3"])
        assert Agent("calc", model, tools=[add]).reply_sync("1 + 2?").text == "3"
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = run_python(program, env=env)
    assert done.stdout.strip() == "[]"


def test_parley_tracing_false_wins_over_the_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_TRACING", "false")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert tracing.configure() is False
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


@pytest.mark.usefixtures("global_provider")
async def test_parley_tracing_false_ignores_a_global_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARLEY_TRACING", "false")
    provider, exporter = sdk_provider()
    trace.set_tracer_provider(provider)

    await calc().reply("1 + 2?")
    assert exporter.get_finished_spans() == ()


def test_otel_sdk_disabled_keeps_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    assert tracing.configure() is False


# -- a provider of the user's ----------------------------------------------------------------------


@pytest.mark.usefixtures("global_provider")
async def test_a_global_provider_of_the_applications_is_used_as_it_is() -> None:
    provider, exporter = sdk_provider()
    trace.set_tracer_provider(provider)

    await calc().reply("1 + 2?")
    assert tracing.configure(True) is True

    assert trace.get_tracer_provider() is provider
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "chat m",
        "chat m",
        "execute_tool add",
        "invoke_agent calc",
    ]


@pytest.mark.usefixtures("global_provider")
async def test_a_provider_set_after_the_first_run_is_picked_up() -> None:
    await calc().reply("1 + 2?")  # untraced: nobody set a provider yet
    provider, exporter = sdk_provider()
    trace.set_tracer_provider(provider)

    await calc().reply("1 + 2?")
    assert len(exporter.get_finished_spans()) == 4


# -- parley's own provider, from the variables -----------------------------------------------------


@pytest.mark.usefixtures("global_provider")
async def test_the_console_exporter_from_the_variables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "calculator")

    await calc().reply("1 + 2?")  # the first traced operation reads the variables

    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "calculator"
    printed = capsys.readouterr().out
    assert '"name": "invoke_agent calc"' in printed
    assert '"name": "execute_tool add"' in printed


@pytest.mark.usefixtures("global_provider")
async def test_otlp_over_http_to_the_endpoint_with_its_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[RecordedRequest] = []

    def collector(request: RecordedRequest, out: Responder) -> None:
        received.append(request)
        out.send(200, b"", content_type="application/x-protobuf")

    with ScriptedHTTPServer(collector) as server:
        monkeypatch.setenv("PARLEY_TRACING", "true")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.base_url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20sk-lf-1")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")

        await calc().reply("1 + 2?")
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        assert provider.force_flush(timeout_millis=10_000)

    assert [r.path for r in received] == ["/v1/traces"]
    headers = {name.lower(): value for name, value in received[0].headers.items()}
    assert headers["content-type"] == "application/x-protobuf"
    assert headers["authorization"] == "Bearer sk-lf-1"
    export = ExportTraceServiceRequest.FromString(received[0].body)
    (resource,) = export.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "parley"
    names = sorted(s.name for scope in resource.scope_spans for s in scope.spans)
    assert names == ["chat m", "chat m", "execute_tool add", "invoke_agent calc"]
    assert {scope.scope.name for scope in resource.scope_spans} == {"parley"}


@pytest.mark.usefixtures("global_provider")
def test_an_unknown_exporter_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ConfigurationError, match=r"'zipkin'.*otlp, console or none"):
        tracing.configure(True)


@pytest.mark.usefixtures("global_provider")
def test_configure_sets_the_provider_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.configure(True) is True
    first = trace.get_tracer_provider()
    assert tracing.configure(True) is True
    assert trace.get_tracer_provider() is first


# -- content ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (CONTENT, "true", True),
        (CONTENT, "SPAN_ONLY", True),
        (CONTENT, "false", False),
        (CONTENT, "NO_CONTENT", False),
        ("PARLEY_TRACING_CONTENT", "1", True),
    ],
)
def test_the_content_opt_in(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: bool
) -> None:
    assert tracing.capture_content() is False
    monkeypatch.setenv(variable, value)
    assert tracing.capture_content() is expected


def test_configure_can_turn_content_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTENT, "false")
    tracing.configure(False, capture_content=True)
    assert tracing.capture_content() is True
