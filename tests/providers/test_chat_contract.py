"""What every chat provider does, whatever its wire: one suite, run once per provider.

Each test takes `chat` (see `conftest.py`): the provider's wire-format server and its model,
built through the official SDK. A provider's own file keeps only what is particular to it (its
wire's fields, its parameters, its error codes, its extras).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

import pytest
from pydantic import BaseModel

from parley.errors import (
    ConfigurationError,
    ContentFilterError,
    ContextLengthError,
    MissingDependencyError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    ModelTimeoutError,
    RateLimitError,
    UserError,
)
from parley.models import ChatStream
from parley.models.cards import Pricing
from parley.providers._server.http import RecordedRequest
from tests.models.loop_exit import ENDINGS, run_without_closing
from tests.providers._chat import (
    API_KEY,
    DEFAULT_HOST,
    ERROR_EVENT_RETRIED,
    FORCED_OUTPUT,
    HI,
    ON_AIOHTTP,
    OWN_WAIT,
    STREAM_END_CHECKED,
    STREAMED_ARGUMENTS,
    STREAMED_USAGE,
    STRING_ARGUMENTS,
    TOOL_CHOICE,
    TOOLS,
    Call,
    Chat,
    ChatProvider,
    read_into,
    require,
    unset_keys,
)
from tests.providers._wording import dropped, timed_out, unreachable

CALLS = [Call("weather", {"city": "Paris"}, "call_a"), Call("time", {"tz": "CET"}, "call_b")]


async def answer(model: Any, streamed: bool) -> Any:
    """The model's whole answer to `HI`, streamed or not."""
    return await (model.chat_stream(HI).collect() if streamed else model.chat(HI))


async def until_disconnected(request: RecordedRequest) -> bool:
    """Whether the client closed `request`'s connection within five seconds."""
    deadline = time.monotonic() + 5
    while not request.disconnected and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return request.disconnected


# -- answers --------------------------------------------------------------------------------


async def test_whole_answer_with_usage(chat: Chat) -> None:
    chat.add(chat.reply("Hello!", input_tokens=12, output_tokens=3))
    response = await chat.model().chat(HI)
    assert response.text == "Hello!"
    assert response.is_last
    assert response.finish_reason == "stop"
    assert response.model == chat.name
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.elapsed > 0
    assert response.tool_calls == []
    chat.server.assert_consumed()


async def test_stream_deltas_then_the_whole(chat: Chat) -> None:
    chat.add(chat.reply("Hello, world", chunk_size=5))
    chunks = [chunk async for chunk in chat.model().chat_stream(HI)]
    assert [c.text for c in chunks[:-1]] == ["Hello", ", wor", "ld"]
    assert not any(c.is_last for c in chunks[:-1])
    final = chunks[-1]
    assert final.is_last
    assert final.text == "Hello, world"
    assert final.finish_reason == "stop"
    assert final.model == chat.name
    chat.server.assert_consumed()


@pytest.mark.needs(STREAMED_USAGE)
async def test_a_stream_s_usage_and_cost(chat: Chat) -> None:
    chat.add(chat.reply("Hello, world", chunk_size=5, input_tokens=3000, output_tokens=50))
    model = chat.model()
    model.pricing = Pricing(input=2, output=10)  # dollars per million tokens
    final = await model.chat_stream(HI).collect()
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (3000, 50)
    assert final.usage.cost == pytest.approx((3000 * 2 + 50 * 10) / 1e6)
    assert final.usage.elapsed > 0


async def test_streams_and_calls_reuse_one_connection(chat: Chat) -> None:
    chat.add(chat.reply("one"), chat.reply("two", chunk_size=2), chat.reply("three"))
    model = chat.model()
    texts = [(await model.chat_stream(HI).collect()).text for _ in range(2)]
    texts.append((await model.chat(HI)).text)
    assert texts == ["one", "two", "three"]
    assert len({request.client_port for request in chat.server.requests}) == 1
    assert not any(request.disconnected for request in chat.server.requests)


async def test_call_dispatches_on_stream_flag(chat: Chat) -> None:
    chat.add(chat.reply("streamed"), chat.reply("whole"))
    stream = await chat.model(stream=True)(HI)
    assert isinstance(stream, ChatStream)
    assert (await stream.collect()).text == "streamed"
    whole = await chat.model(stream=False)(HI)
    assert not isinstance(whole, ChatStream)
    assert whole.text == "whole"


async def test_usage_carries_the_cost_of_the_model_s_price(chat: Chat) -> None:
    chat.add(chat.reply("a", input_tokens=1000, output_tokens=200), chat.reply("b"))
    model = chat.model()
    model.pricing = Pricing(input=2, output=10)  # dollars per million tokens
    whole = await model.chat(HI)
    assert whole.usage is not None
    assert whole.usage.cost == pytest.approx((1000 * 2 + 200 * 10) / 1e6)
    model.pricing = None
    unpriced = await model.chat(HI)
    assert unpriced.usage is not None
    assert unpriced.usage.cost is None


# -- tools and structured output ------------------------------------------------------------


async def test_parallel_tool_calls_streamed(chat: Chat) -> None:
    chat.add(chat.reply(calls=CALLS, chunk_size=3))
    chunks = [c async for c in chat.model().chat_stream(HI, tools=TOOLS)]
    final = chunks[-1]
    assert final.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.input) for c in final.tool_calls] == [
        ("call_a", "weather", {"city": "Paris"}),
        ("call_b", "time", {"tz": "CET"}),
    ]
    assert not any(c.is_last for c in chunks[:-1])
    assert any(c.tool_calls for c in chunks[:-1])  # the calls streamed before the whole


@pytest.mark.needs(STREAMED_ARGUMENTS)
async def test_tool_call_arguments_stream_in_pieces(chat: Chat) -> None:
    chat.add(chat.reply(calls=CALLS, chunk_size=3))
    chunks = [c async for c in chat.model().chat_stream(HI, tools=TOOLS)]
    pieces = [c.tool_calls[0].raw_input for c in chunks[:-1] if c.tool_calls]
    assert len([p for p in pieces if p]) > 4
    assert "".join(p or "" for p in pieces) == '{"city": "Paris"}{"tz": "CET"}'


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_tool_calls_with_text(chat: Chat, streamed: bool) -> None:
    chat.add(chat.reply("Let me look.", calls=[Call("weather", {"city": "Rome"}, "call_w")]))
    model = chat.model()
    call = model.chat_stream(HI, tools=TOOLS).collect() if streamed else model.chat(HI, TOOLS)
    response = await call
    assert response.text == "Let me look."
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [
        ("call_w", "weather", {"city": "Rome"})
    ]
    assert response.finish_reason == "tool_calls"


@pytest.mark.needs(STRING_ARGUMENTS)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_broken_arguments_are_kept_raw(chat: Chat, streamed: bool) -> None:
    chat.add(chat.reply(calls=[Call("weather", '{"city": "Par', "call_x")]))
    model = chat.model()
    call = model.chat_stream(HI, tools=TOOLS).collect() if streamed else model.chat(HI, TOOLS)
    response = await call
    (call,) = response.tool_calls
    # Broken JSON arguments are kept raw for the tool layer to repair.
    assert (call.id, call.name, call.input, call.raw_input) == (
        "call_x",
        "weather",
        {},
        '{"city": "Par',
    )
    assert response.finish_reason == "tool_calls"


@pytest.mark.needs(TOOL_CHOICE)
async def test_no_tool_fields_without_tools(chat: Chat) -> None:
    for parallel in (True, False):
        chat.add(chat.reply("ok"))
        await chat.model(parameters={"parallel_tool_calls": parallel}).chat(HI, tool_choice="none")
        body = chat.server.bodies()[-1]
        sent = body.get(chat.entry.tools_at, {}) if chat.entry.tools_at else body
        assert not set(chat.entry.tool_fields) & set(sent), parallel


class City(BaseModel):
    name: str
    population: int


async def test_structured_output(chat: Chat) -> None:
    # Whatever the provider tries first (a forced call, its JSON mode...), the server answers
    # in kind: a call of the structured tool when one is offered, else the JSON text.
    city = {"name": "Paris", "population": 2}

    def in_kind(request: RecordedRequest) -> Any:
        if b"generate_response" in request.body:
            return chat.reply(calls=[Call("generate_response", city, "call_s")])
        return chat.reply('{"name": "Paris", "population": 2}')

    chat.add(in_kind)
    model = chat.model()
    result = await model.generate_structured_output(HI, City)
    assert result.parsed == City(name="Paris", population=2)
    assert result.content == city
    assert result.strategy in model.structured_strategies
    chat.server.assert_consumed()


@pytest.mark.needs(FORCED_OUTPUT)
async def test_structured_output_by_a_forced_call(chat: Chat) -> None:
    city = {"name": "Paris", "population": 2}
    chat.add(chat.reply(calls=[Call("generate_response", city, "call_s")]))
    result = await chat.model().generate_structured_output(HI, City)
    assert result.strategy == "forced"
    assert result.parsed == City(name="Paris", population=2)
    body = chat.server.bodies()[0]
    sent = body[chat.entry.tools_at] if chat.entry.tools_at else body
    assert sent["tool_choice"] == chat.entry.forced_choice
    assert sent["tools"][0]["function"]["parameters"] == City.model_json_schema()


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_429_waits_what_retry_after_asks(
    chat: Chat, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    chat.add(chat.rate_limit(retry_after=0.1), chat.reply("ok"))
    model = chat.model()
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        response = await answer(model, streamed)
    assert response.text == "ok"
    # The harness's backoff waits at most 5 ms: a wait of 0.1 s can only be the header's.
    assert model.retry.waits == [0.1]
    assert "429" in caplog.text  # the retry says why
    assert len(chat.server.requests) == 2


@pytest.mark.needs(OWN_WAIT)
async def test_429_waits_what_the_provider_s_own_way_asks(
    chat: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    for limited in chat.entry.own_waits:
        chat.add(limited, chat.reply("ok"))
        model = chat.model()
        with caplog.at_level(logging.WARNING, logger="parley.models"):
            assert (await model.chat(HI)).text == "ok"
        # The harness's backoff waits at most 5 ms: a wait of 0.1 s can only be the server's.
        assert model.retry.waits == [0.1]
        # The wait the retry chose, as it logs it before sleeping.
        assert "retry 1 of" in caplog.text
        assert "in 0.10s" in caplog.text
    assert len(chat.server.requests) == 2 * len(chat.entry.own_waits)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 409])
async def test_retryable_statuses_are_retried(chat: Chat, status: int) -> None:
    chat.add(chat.error(status), chat.reply("ok"))
    assert (await chat.model().chat(HI)).text == "ok"
    assert len(chat.server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_not_retried(chat: Chat, status: int) -> None:
    refusal = chat.error(status, "nope")
    chat.add(refusal, chat.reply("unused"))
    with pytest.raises(ModelHTTPError) as caught:
        await chat.model().chat(HI)
    assert type(caught.value) is ModelHTTPError
    assert caught.value.status_code == status
    assert "nope" in str(caught.value)
    # The error keeps the provider's own body (DashScope's names a fresh request id).
    body = caught.value.body
    assert body == refusal.payload() or body["message"] == "nope"
    assert len(chat.server.requests) == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_retries_give_up_after_max_retries(chat: Chat, streamed: bool) -> None:
    chat.add(chat.error(500), chat.error(502), chat.error(503, "still down"))
    with pytest.raises(ModelHTTPError, match="still down") as caught:
        await answer(chat.model(max_retries=2), streamed)
    assert caught.value.status_code == 503
    chat.server.assert_consumed()


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_connection_reset_is_retried(chat: Chat, streamed: bool) -> None:
    chat.add(chat.reset(), chat.reply("ok"))
    assert (await answer(chat.model(), streamed)).text == "ok"
    assert len(chat.server.requests) == 2


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_dropped_connection_is_a_connection_error(chat: Chat, streamed: bool) -> None:
    chat.add(chat.reset())
    with pytest.raises(ModelConnectionError, match=dropped(chat.entry.provider, chat.server.url)):
        await answer(chat.model(max_retries=0), streamed)


async def test_stream_failing_before_its_first_chunk_is_retried(chat: Chat) -> None:
    chat.add(chat.error(503), chat.reset(), chat.reply("third time"))
    final = await chat.model().chat_stream(HI).collect()
    assert final.text == "third time"
    assert len(chat.server.requests) == 3


@pytest.mark.needs(ERROR_EVENT_RETRIED)
async def test_an_error_event_before_any_chunk_is_retried(chat: Chat) -> None:
    chat.add(chat.reply("x", error_at=chat.at(0)), chat.reply("second time"))
    final = await chat.model().chat_stream(HI).collect()
    assert final.text == "second time"
    assert len(chat.server.requests) == 2


# -- faults in a stream ----------------------------------------------------------------------


async def test_stream_cut_after_its_first_chunks_raises_and_is_not_retried(chat: Chat) -> None:
    chat.add(chat.reply("abcdefghijkl", chunk_size=2, cut_after=chat.at(2)), chat.reply("unused"))
    stream = chat.model().chat_stream(HI)
    seen: list[str] = []
    with pytest.raises(ModelConnectionError, match=dropped(chat.entry.provider, chat.server.url)):
        await read_into(seen, stream)
    assert seen == ["ab", "cd"]
    assert stream.response is not None
    assert (stream.response.text, stream.response.finish_reason) == ("abcd", "error")
    assert len(chat.server.requests) == 1


async def test_a_malformed_chunk_is_an_output_error(chat: Chat) -> None:
    chat.add(chat.reply("abcdef", chunk_size=2, malformed_at=chat.at(1)), chat.reply("unused"))
    stream = chat.model().chat_stream(HI)
    seen: list[str] = []
    with pytest.raises(ModelOutputError, match="malformed JSON"):
        await read_into(seen, stream)
    assert seen == ["ab"]
    assert stream.response is not None
    assert (stream.response.text, stream.response.finish_reason) == ("ab", "error")
    assert len(chat.server.requests) == 1


async def test_a_malformed_body_is_an_output_error(chat: Chat) -> None:
    chat.add(chat.raw(b'{"choices": [{"content": ['))
    with pytest.raises(ModelOutputError, match="malformed JSON"):
        await chat.model().chat(HI)


async def test_an_error_event_mid_stream_is_surfaced_not_retried(chat: Chat) -> None:
    status, message = chat.entry.error_event
    chat.add(chat.reply("abcdef", chunk_size=2, error_at=chat.at(2)), chat.reply("unused"))
    stream = chat.model().chat_stream(HI)
    with pytest.raises(ModelHTTPError, match=message) as caught:
        await stream.collect()
    assert caught.value.status_code == status
    assert stream.response is not None
    assert (stream.response.text, stream.response.finish_reason) == ("abcd", "error")
    assert len(chat.server.requests) == 1  # chunks had reached the caller


@pytest.mark.needs(STREAM_END_CHECKED)
async def test_a_stream_ending_without_its_last_event_is_a_connection_error(chat: Chat) -> None:
    assert chat.entry.unfinished is not None
    chat.add(chat.entry.unfinished())
    with pytest.raises(ModelConnectionError, match="ended before"):
        await chat.model(max_retries=0).chat_stream(HI).collect()


# -- time ------------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_slow_answer_past_the_timeout(chat: Chat, streamed: bool) -> None:
    chat.add(chat.reply("late", delay=1.0))
    late = timed_out(chat.entry.provider, chat.server.url)
    with pytest.raises(ModelTimeoutError, match=late):
        await answer(chat.model(timeout=0.2, max_retries=0), streamed)
    assert len(chat.server.requests) == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_slow_start_is_retried(chat: Chat, streamed: bool) -> None:
    # Nothing reached the caller before the timeout: another try is safe.
    chat.add(chat.reply("late", delay=1.0), chat.reply("in time", chunk_size=3))
    response = await answer(chat.model(timeout=0.3, max_retries=1), streamed)
    assert response.text == "in time"
    assert len(chat.server.requests) == 2


async def test_a_slow_start_within_the_timeout_answers(chat: Chat) -> None:
    chat.add(chat.reply("late but here", delay=0.3))
    final = await chat.model(timeout=2.0, max_retries=0).chat_stream(HI).collect()
    assert final.text == "late but here"


async def test_slow_chunks_within_the_timeout_arrive_one_by_one(chat: Chat) -> None:
    chat.add(chat.reply("abcdef", chunk_size=2, chunk_delay=0.05))
    chunks = [chunk async for chunk in chat.model(timeout=2.0).chat_stream(HI)]
    assert [c.text for c in chunks] == ["ab", "cd", "ef", "abcdef"]
    assert chunks[-1].finish_reason == "stop"


async def test_a_stream_stalling_past_the_timeout(chat: Chat) -> None:
    chat.add(chat.reply("abcdef", chunk_size=2, chunk_delay=0.6))
    with pytest.raises(ModelTimeoutError):
        await chat.model(timeout=0.3, max_retries=0).chat_stream(HI).collect()


async def test_a_long_slow_stream_is_not_cut_by_the_timeout(chat: Chat) -> None:
    # The timeout bounds each wait for data, not the whole stream (as a total deadline would).
    chat.add(chat.reply("abcdefgh", chunk_size=1, chunk_delay=0.1))
    final = await chat.model(timeout=0.5, max_retries=0).chat_stream(HI).collect()
    assert final.text == "abcdefgh"


# -- error mapping ---------------------------------------------------------------------------


def mapped_errors(entry: ChatProvider) -> list[tuple[str, Any, type[Exception]]]:
    """The status answers of `entry` and the error each must raise."""
    cases: list[tuple[str, Any, type[Exception]]] = [
        ("rate-limit", entry.module.HTTPError.rate_limit(retry_after=7), RateLimitError),
        ("teapot", entry.error(418, "teapot"), ModelHTTPError),
    ]
    if entry.context_length is not None:
        cases.append(("context-length", entry.context_length, ContextLengthError))
    if entry.content_filter is not None:
        cases.append(("content-filter", entry.content_filter, ContentFilterError))
    return cases


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_status_errors_map_to_the_tree(chat: Chat, streamed: bool) -> None:
    cases = mapped_errors(chat.entry)
    chat.add(*(step for _, step, _ in cases))
    model = chat.model(max_retries=0)
    for name, step, error in cases:
        with pytest.raises(error) as caught:
            await answer(model, streamed)
        assert type(caught.value) is error, name
        assert step.message in str(caught.value), name
        if isinstance(caught.value, RateLimitError):
            assert (caught.value.status_code, caught.value.retry_after) == (429, 7)
    chat.server.assert_consumed()


async def test_an_unreachable_server_is_a_connection_error(chat: Chat) -> None:
    model = chat.model(max_retries=0)
    url = chat.server.url
    chat.server.stop()
    expected = unreachable(chat.entry.provider, url, chat.entry.hint)
    with pytest.raises(ModelConnectionError, match=expected):
        await model.chat(HI)


# -- cancellation and cache ------------------------------------------------------------------


async def test_cancel_ends_with_interrupted_and_closes_the_connection(chat: Chat) -> None:
    chat.add(chat.reply("x" * 200, chunk_size=1, chunk_delay=0.02))
    stream = chat.model().chat_stream(HI)
    first = await anext(stream)
    assert first.text == "x"
    stream.cancel()
    final = await anext(stream)
    assert final.is_last
    assert final.finish_reason == "interrupted"
    assert final.text.startswith("x")
    assert await until_disconnected(chat.server.requests[0])


async def test_leaving_async_with_after_a_break_closes_the_connection(chat: Chat) -> None:
    chat.add(chat.reply("x" * 400, chunk_size=1, chunk_delay=0.01))
    before = asyncio.all_tasks()
    async with chat.model().chat_stream(HI) as stream:
        async for chunk in stream:
            assert chunk.text == "x"
            break
    # Leaving the block waited for the pump: nothing of the stream is left running.
    assert not asyncio.all_tasks() - before - {asyncio.current_task()}
    assert stream.response is not None
    assert stream.response.finish_reason == "interrupted"
    assert await until_disconnected(chat.server.requests[0])


async def test_the_cache_answers_a_repeated_call(chat: Chat, tmp_path: Any) -> None:
    chat.add(chat.reply("cached", calls=[Call("weather", {"city": "Rome"}, "call_c")]))
    model = chat.model(cache_dir=tmp_path)
    first = await model.chat(HI, tools=TOOLS)
    again = await model.chat(HI, tools=TOOLS)
    assert again.content == first.content
    assert [c.name for c in again.tool_calls] == ["weather"]
    assert len(chat.server.requests) == 1


async def test_a_cached_stream_replays_as_a_stream(chat: Chat, tmp_path: Any) -> None:
    chat.add(chat.reply("streamed once", chunk_size=3))
    model = chat.model(cache_dir=tmp_path)
    live = [c async for c in model.chat_stream(HI)]
    replayed = [c async for c in model.chat_stream(HI)]
    assert len(chat.server.requests) == 1
    assert replayed[-1].is_last
    assert not replayed[0].is_last
    assert replayed[-1].text == live[-1].text == "streamed once"


# -- sync twins, the SDK ---------------------------------------------------------------------


def test_sync_twins(chat_provider: ChatProvider) -> None:
    require(chat_provider)
    with chat_provider.server() as server:
        server.add(chat_provider.reply("sync"), chat_provider.reply("sync stream", chunk_size=4))
        model = chat_provider.build(server, {"model": chat_provider.model})
        assert model.chat_sync(HI).text == "sync"
        chunks = list(model.chat_stream_sync(HI))
        assert [c.text for c in chunks[:-1]] == ["sync", " str", "eam"]
        assert chunks[-1].text == "sync stream"
        model.close_sync()


@pytest.mark.needs(ON_AIOHTTP)
@pytest.mark.parametrize("ending", ENDINGS)
def test_connections_close_with_their_event_loop(chat_provider: ChatProvider, ending: str) -> None:
    # Each `asyncio.run` ends its loop, which closes the connections opened on it; the sync
    # twins' loop runs to the exit, which closes them there if the model is still alive.
    require(chat_provider)
    with chat_provider.server() as server:
        server.add(*(chat_provider.reply(text) for text in ("one", "two", "three")))
        assert run_without_closing(chat_provider.unclosed, server.url, ending) == [
            "one",
            "two",
            "three",
        ]


async def test_a_missing_sdk_names_the_extra(chat: Chat, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each module it needs (its SDK, the HTTP client it builds the SDK on), named with the extra.
    for module, extra in chat.entry.requires:
        with monkeypatch.context() as patched:
            patched.setitem(sys.modules, module, None)
            with pytest.raises(MissingDependencyError, match=rf"{module}.*parley\[{extra}\]"):
                await chat.model().chat(HI)


# -- keys and hosts --------------------------------------------------------------------------


@pytest.mark.needs(API_KEY)
async def test_a_missing_key_is_a_configuration_error(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = unset_keys(chat.entry.keys, monkeypatch)
    model = chat.model(credential=keys.credential(base_url=chat.server.url))
    with pytest.raises(ConfigurationError, match=" or ".join(keys.variables)):
        await model.chat(HI)


@pytest.mark.needs(API_KEY)
async def test_the_key_from_the_environment(chat: Chat, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = unset_keys(chat.entry.keys, monkeypatch)
    where = {"base_url": chat.server.url}
    if keys.base_url_variable:  # the endpoint from the environment too
        monkeypatch.setenv(keys.base_url_variable, where.pop("base_url"))
    # Each variable alone is read; with all of them set, the first wins.
    settings = [{name: f"{name}-value"} for name in keys.variables]
    settings.append({name: f"{name}-value" for name in keys.variables})
    for setting in settings:
        for name in keys.variables:
            monkeypatch.delenv(name, raising=False)
        for name, value in setting.items():
            monkeypatch.setenv(name, value)
        model = chat.model(credential=keys.credential(**where))  # its client reads them anew
        chat.add(chat.reply("ok"))
        assert (await model.chat(HI)).text == "ok"
        sent = chat.server.requests[-1].headers[keys.header]
        assert sent == keys.scheme + next(iter(setting.values()))


@pytest.mark.needs(API_KEY)
async def test_the_key_never_shows(chat: Chat, caplog: pytest.LogCaptureFixture) -> None:
    keys = chat.entry.keys
    assert keys is not None
    secret = "sk-very-secret-value"
    credential = keys.credential(api_key=secret, base_url=chat.server.url)
    model = chat.model(credential=credential)
    chat.add(chat.error(500), chat.reply("ok"))
    with caplog.at_level(logging.DEBUG):
        await model.chat(HI)
    shown = [repr(credential), str(credential), repr(model), credential.model_dump_json()]
    shown += [record.getMessage() for record in caplog.records]
    assert all(secret not in text for text in shown)
    assert chat.server.requests[0].headers[keys.header] == keys.scheme + secret


@pytest.mark.needs(DEFAULT_HOST)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_remote_hosts_are_blocked_in_tests(chat: Chat, streamed: bool) -> None:
    remote = chat.entry.remote
    assert remote is not None
    model = chat.model(credential=remote.credential())
    with pytest.raises(UserError, match=remote.host):
        await answer(model, streamed)
