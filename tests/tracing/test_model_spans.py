"""`chat` spans of real provider calls: the openai SDK against the local OpenAI server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from parley.agents import Agent
from parley.agents.prompted import PromptedToolsModel
from parley.errors import ModelError
from parley.messages import Msg, TextBlock
from parley.models.accumulator import Delta, MetaDelta, TextDelta
from parley.models.base import ChatModel, ChatRequest
from parley.models.cards import Pricing
from parley.models.response import ChatResponse, ChatUsage
from parley.models.retry import RetryPolicy
from parley.models.testing import ScriptedModel
from parley.providers.openai.chat import OpenAIChatModel
from parley.providers.openai.server import HTTPError, OpenAIServer, Reply
from tests._requires import require_module
from tests.sample_tools import add
from tests.tracing.fixtures import Spans, attrs, parent_of, span_id

require_module("openai", "openai")

ModelFactory = Callable[..., Any]


@pytest.fixture
async def make_model(server: OpenAIServer) -> AsyncIterator[ModelFactory]:
    """Models bound to `server`, retrying at once; their clients closed afterwards."""
    made: list[OpenAIChatModel] = []

    def make(**kwargs: Any) -> OpenAIChatModel:
        model = OpenAIChatModel(server.credential(), "gpt-4o-mini", max_retries=2, **kwargs)
        model.retry = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.005)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


HI = [Msg.system("Be brief."), Msg.user("Hi")]


def check_provider_call(span: Any, server: OpenAIServer, *, streaming: bool) -> dict[str, Any]:
    """The attributes every call to the local server's `gpt-4o-mini` has; the rest returned."""
    found = attrs(span)
    assert span.name == "chat gpt-4o-mini"
    assert span.kind is SpanKind.CLIENT
    assert found.pop("gen_ai.operation.name") == "chat"
    assert found.pop("gen_ai.provider.name") == "openai"
    assert found.pop("gen_ai.system") == "openai"
    assert found.pop("gen_ai.request.model") == "gpt-4o-mini"
    assert found.pop("gen_ai.request.stream") is streaming
    assert found.pop("server.address") == "127.0.0.1"
    assert found.pop("server.port") == int(server.url.rsplit(":", 1)[1].split("/")[0])
    return found


async def test_a_whole_call(spans: Spans, server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(
        Reply(
            text="Hello!",
            input_tokens=12,
            output_tokens=3,
            cached_tokens=8,
            model="gpt-4o-mini-2024-07-18",
            response_id="chatcmpl-abc",
        )
    )
    model = make_model(parameters={"temperature": 0.5, "max_tokens": 50, "top_p": 0.9})
    model.pricing = Pricing(input=1.0, output=2.0)
    response = await model.chat(HI, stop=["END"], seed=7)

    rest = check_provider_call(spans.one("chat gpt-4o-mini"), server, streaming=False)
    assert rest == {
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.max_tokens": 50,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.request.seed": 7,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-abc",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.cache_read.input_tokens": 8,
        "parley.usage.cost": pytest.approx(response.usage.cost),  # type: ignore[union-attr]
    }


async def test_a_streamed_call(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Hello, world", chunk_size=5, input_tokens=4, output_tokens=3))
    stream = make_model().chat_stream(HI)
    chunks = []
    async for chunk in stream:
        # The span covers the stream: open until the final chunk, ended with it.
        assert spans.named("chat gpt-4o-mini") == ([] if not chunk.is_last else spans.all())
        chunks.append(chunk)

    span = spans.one("chat gpt-4o-mini")
    rest = check_provider_call(span, server, streaming=True)
    assert rest.pop("gen_ai.response.time_to_first_chunk") > 0
    assert rest.pop("gen_ai.response.id") == chunks[-1].id
    assert rest == {
        "gen_ai.response.model": "gpt-4o-mini",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 4,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "parley.usage.cost": pytest.approx(chunks[-1].usage.cost),  # type: ignore[union-attr]
    }
    assert len(chunks) == 4


async def test_retries_are_inside_one_span(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(503), Reply(text="second time"))
    await make_model().chat(HI)

    span = spans.one("chat gpt-4o-mini")
    assert span.status.status_code is StatusCode.UNSET
    assert attrs(span)["gen_ai.response.finish_reasons"] == ("stop",)


async def test_a_failed_call_sets_error_status(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(400, "bad request", code="invalid_request"))
    with pytest.raises(ModelError) as raised:
        await make_model().chat(HI)

    span = spans.one("chat gpt-4o-mini")
    error = raised.value
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == f"{type(error).__module__}.{type(error).__qualname__}"
    assert attrs(span)["error.type"].startswith("parley.errors.")
    assert [event.name for event in span.events] == ["exception"]


async def test_a_failed_stream_sets_error_status(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(400, "bad request"))
    with pytest.raises(ModelError) as raised:
        async for _ in make_model().chat_stream(HI):
            pass

    span = spans.one("chat gpt-4o-mini")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"].endswith(type(raised.value).__qualname__)
    assert attrs(span)["gen_ai.response.finish_reasons"] == ("error",)


@pytest.mark.usefixtures("content")
async def test_content_of_a_provider_call(
    spans: Spans, server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Hello!"))
    await make_model().chat(HI)

    found = attrs(spans.one("chat gpt-4o-mini"))
    assert json.loads(found["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(found["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Hi"}]}
    ]
    assert json.loads(found["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hello!"}],
            "finish_reason": "stop",
        }
    ]


# -- where the provider's work runs ----------------------------------------------------------------


class SpanSeeingModel(ChatModel):
    """Answers with the name of the span current where its provider code runs."""

    provider: ClassVar[str] = "seeing"

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        current = trace.get_current_span()
        name = getattr(current, "name", "none")
        yield TextDelta(name)
        yield MetaDelta(finish_reason="stop")


async def test_the_providers_work_runs_inside_its_span(spans: Spans) -> None:
    """HTTP client instrumentation (httpx, aiohttp) would nest the requests in the call."""
    model = SpanSeeingModel(model="eyes")
    assert (await model.chat([Msg.user("?")])).text == "chat eyes"
    streamed = await model.chat_stream([Msg.user("?")]).collect()
    assert streamed.text == "chat eyes"  # in the stream's pump task


async def test_a_wrapper_model_makes_no_span_of_its_own(spans: Spans) -> None:
    inner = ScriptedModel(["Hello."], model="inner")
    await Agent("polite", PromptedToolsModel(inner), tools=[add]).reply("hi")

    assert sorted(spans.names()) == ["chat inner", "invoke_agent polite"]
    assert parent_of(spans.one("chat inner")) == span_id(spans.one("invoke_agent polite"))


async def test_cache_writes_are_a_usage_attribute_when_there_are_some(spans: Spans) -> None:
    usage = ChatUsage(input_tokens=100, output_tokens=5, cached_tokens=60, cache_write_tokens=30)
    model = ScriptedModel([ChatResponse(content=[TextBlock(text="ok")], usage=usage), "again"])
    await model.chat([Msg.user("?")])
    await model.chat([Msg.user("?")])

    first, second = (attrs(span) for span in spans.named("chat scripted"))
    assert first["gen_ai.usage.cache_read.input_tokens"] == 60
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 30
    assert "gen_ai.usage.cache_creation.input_tokens" not in second
