"""The service traced: request spans (FastAPI's instrumentation) hold the agents' spans."""

from __future__ import annotations

import argparse
import os

import pytest
from opentelemetry.trace import SpanKind

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service.cli import _export, add_commands
from parley.service.settings import ServiceSettings
from tests.sample_tools import add
from tests.service.conftest import MakeService
from tests.tracing.fixtures import Spans, attrs, parent_of, span_id


def calc_agent() -> Agent:
    model = ScriptedModel(
        [ScriptedModel.tool_call("add", {"a": 1, "b": 2}), "It is 3."], stream=True, model="m"
    )
    return Agent("calc", model, tools=[add])


async def test_an_invoke_request_holds_the_agents_span(service: MakeService, spans: Spans) -> None:
    svc = await service(calc_agent(), tracing=True)
    response = await svc.client.post("/invoke", json={"message": "1 + 2?", "thread_id": "t-1"})
    assert response.status_code == 200

    (request,) = [s for s in spans.all() if s.kind is SpanKind.SERVER]
    assert request.name == "POST /invoke"
    assert attrs(request)["http.route"] == "/invoke"
    found = attrs(request)  # the older HTTP conventions' name, unless OTEL_SEMCONV_STABILITY_OPT_IN
    assert found.get("http.response.status_code", found.get("http.status_code")) == 200
    agent = spans.one("invoke_agent calc")
    assert parent_of(agent) == span_id(request)
    assert attrs(agent)["gen_ai.conversation.id"] == "t-1"
    assert attrs(agent)["parley.run.id"] == response.headers["x-run-id"]
    assert attrs(agent)["parley.run.status"] == "completed"
    for child in [*spans.named("chat m"), spans.one("execute_tool add")]:
        assert parent_of(child) == span_id(agent)


async def test_a_streamed_request_holds_the_agents_span(service: MakeService, spans: Spans) -> None:
    svc = await service(calc_agent(), tracing=True)
    async with svc.client.stream("POST", "/stream", json={"message": "1 + 2?"}) as response:
        body = await response.aread()
    assert b"It is 3." in body

    (request,) = [s for s in spans.all() if s.kind is SpanKind.SERVER]
    assert request.name == "POST /stream"
    assert parent_of(spans.one("invoke_agent calc")) == span_id(request)
    # One span per request: none per SSE frame sent.
    assert not [s for s in spans.all() if "http send" in s.name]


@pytest.mark.usefixtures("clean_tracing")
async def test_untraced_the_app_is_not_instrumented(service: MakeService) -> None:
    svc = await service(calc_agent())
    response = await svc.client.post("/invoke", json={"message": "1 + 2?"})
    assert response.status_code == 200
    assert not getattr(svc.app, "_is_instrumented_by_opentelemetry", False)


@pytest.mark.usefixtures("clean_tracing")
def test_serve_tracing_sets_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set through monkeypatch first, so that what `_export` writes is undone after the test.
    monkeypatch.setenv("PARLEY_TRACING", "false")
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    _export(parser.parse_args(["serve"]))
    assert os.environ["PARLEY_TRACING"] == "false"  # not given: left as it was

    _export(parser.parse_args(["serve", "--tracing"]))
    assert os.environ["PARLEY_TRACING"] == "True"
    assert ServiceSettings().tracing is True
