"""The model layer's shared parts, driven through the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.errors import (
    ConfigurationError,
    ContextLengthError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    RateLimitError,
    UserError,
)
from parley.messages import ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock
from parley.models import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ChatUsage,
    Parameters,
    StreamAccumulator,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    fold_other_agents,
)
from parley.models.accumulator import Delta, MetaDelta, parse_arguments
from parley.models.cards import load_cards, merge_parameter_schema
from parley.models.credentials import APIKeyCredential, CredentialFactory
from parley.models.retry import RetryPolicy, call_with_retries
from parley.models.testing import ScriptedModel, UnexpectedCallError
from parley.models.tools import check_tool_choice, to_tool_specs

WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


# -- accumulator -------------------------------------------------------------------------------


def test_accumulator_hands_out_deltas_and_ends_with_the_whole() -> None:
    acc = StreamAccumulator("m")
    deltas: list[Delta] = [
        ThinkingDelta("Let me "),
        ThinkingDelta("think."),
        ThinkingDelta(signature="sig"),
        TextDelta("It is "),
        TextDelta("sunny."),
        ToolCallDelta(0, "c1", "get_weather"),
        ToolCallDelta(1, "c2", "get_time", '{"tz":'),
        ToolCallDelta(0, arguments='{"city": "Pa'),
        ToolCallDelta(0, arguments='ris"}'),
        ToolCallDelta(1, arguments=' "UTC"}'),
        MetaDelta(usage=ChatUsage(input_tokens=5, output_tokens=7), response_id="r1"),
    ]
    chunks = [acc.add(d) for d in deltas]
    assert [c.text for c in chunks[3:5] if c] == ["It is ", "sunny."]
    assert chunks[-1] is None  # usage is not content
    assert chunks[6] is not None
    assert chunks[6].tool_calls[0].raw_input == '{"tz":'
    final = acc.final()
    assert final.is_last
    assert final.id == "r1"
    assert final.content == [
        ThinkingBlock(thinking="Let me think.", signature="sig"),
        TextBlock(text="It is sunny."),
        ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"}),
        ToolCallBlock(id="c2", name="get_time", input={"tz": "UTC"}),
    ]
    assert final.finish_reason == "tool_calls"
    assert final.usage == ChatUsage(input_tokens=5, output_tokens=7)
    assert final.to_msg().tool_calls == final.tool_calls


def test_text_after_a_tool_call_starts_a_new_block() -> None:
    acc = StreamAccumulator()
    for delta in (TextDelta("a"), ToolCallDelta("x", "c", "f"), TextDelta("b")):
        acc.add(delta)
    assert [b.type for b in acc.final().content] == ["text", "tool_call", "text"]
    assert acc.final().finish_reason == "tool_calls"


def test_bad_arguments_are_kept_raw_for_the_tool_layer() -> None:
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("") == ({}, None)
    assert parse_arguments('{"a": 1') == ({}, '{"a": 1')
    assert parse_arguments("[1, 2]") == ({}, "[1, 2]")


def test_response_to_msg_keeps_usage_and_ids() -> None:
    response = ChatResponse(content=[TextBlock(text="hi")], usage=ChatUsage(output_tokens=1))
    msg = response.to_msg(name="bot")
    assert (msg.role, msg.name, msg.text, msg.usage) == ("assistant", "bot", "hi", response.usage)
    assert msg.metadata["response_id"] == response.id


# -- tools, parameters -------------------------------------------------------------------------


class _Described:
    def tool_spec(self) -> ToolSpec:
        return ToolSpec(name="described")


def test_tools_are_taken_in_every_form() -> None:
    openai_form = {"type": "function", "function": {**WEATHER, "name": "other"}}
    specs = to_tool_specs([WEATHER, openai_form, ToolSpec(name="t"), _Described()])
    assert [s.name for s in specs] == ["get_weather", "other", "t", "described"]
    assert specs[0].openai()["function"]["parameters"] == WEATHER["parameters"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([WEATHER, WEATHER], "two tools share the name 'get_weather'"),
        ([{"name": "bad name!"}], "not a valid tool description"),
        ([42], "cannot use 42 as a tool"),
    ],
)
def test_bad_tools_say_what_is_wrong(tools: list[Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        to_tool_specs(tools)


def test_tool_choice_is_checked_against_the_tools() -> None:
    specs = to_tool_specs([WEATHER])
    assert check_tool_choice("get_weather", specs) == "get_weather"
    assert check_tool_choice("auto", []) == "auto"
    with pytest.raises(UserError, match="needs tools"):
        check_tool_choice("required", [])
    with pytest.raises(UserError, match="not one of the tools given \\(get_weather\\)"):
        check_tool_choice("get_time", specs)


def test_parameters_merge_and_refuse_unknown_or_bad_values() -> None:
    params = Parameters(temperature=0.5)
    assert params.merged(max_tokens=10).to_kwargs() == {"temperature": 0.5, "max_tokens": 10}
    with pytest.raises(UserError, match="unknown parameter 'temprature'"):
        params.merged(temprature=1)
    with pytest.raises(UserError, match="bad parameter value"):
        params.merged(temperature=9)


# -- the scripted model and calling ------------------------------------------------------------


async def test_scripted_model_answers_in_order_and_records_requests() -> None:
    model = ScriptedModel(["first", ScriptedModel.tool_call("get_weather", {"city": "Oslo"})])
    first = await model.chat([Msg.user("one")])
    second = await model.chat([{"role": "user", "content": "two"}], tools=[WEATHER])
    assert first.text == "first"
    assert second.tool_calls[0].input == {"city": "Oslo"}
    assert [r.messages[-1].text for r in model.requests] == ["one", "two"]
    assert model.requests[1].tools[0].name == "get_weather"
    model.assert_consumed()
    with pytest.raises(UnexpectedCallError, match="no scripted step left"):
        await model.chat([Msg.user("three")])


def test_unused_steps_fail_the_test() -> None:
    model = ScriptedModel(["a", "b"])
    model.chat_sync([Msg.user("x")])
    with pytest.raises(UnexpectedCallError, match="1 scripted step"):
        model.assert_consumed()


async def test_call_dispatches_on_stream_and_checks_input() -> None:
    streaming = ScriptedModel(["hello world"], stream=True)
    stream = await streaming([Msg.user("hi")])
    assert not isinstance(stream, ChatResponse)
    chunks = [c async for c in stream]
    assert "".join(c.text for c in chunks[:-1]) == "hello world"
    assert chunks[-1].is_last
    assert chunks[-1].text == "hello world"
    with pytest.raises(UserError, match="a list of Msg"):
        await ScriptedModel().chat(Msg.user("x"))  # type: ignore[arg-type]
    with pytest.raises(UserError, match="bad message"):
        await ScriptedModel().chat([{"role": "robot"}])
    with pytest.raises(UserError, match="unknown parameter"):
        await ScriptedModel(["x"]).chat([Msg.user("x")], temprature=1)


def test_sync_twins_work_inside_a_running_loop() -> None:
    async def inside() -> list[str]:
        model = ScriptedModel(["abc", "defg"], chunk_size=2)
        whole = model.chat_sync([Msg.user("x")]).text
        parts = [c.text for c in model.chat_stream_sync([Msg.user("y")])]
        return [whole, *parts]

    assert asyncio.run(inside()) == ["abc", "de", "fg", "defg"]


async def test_usage_is_timed_and_adds_up() -> None:
    model = ScriptedModel(["one two", "three"], chunk_delay=0.01)
    first = await model.chat([Msg.user("a b c")])
    second = await model.chat([Msg.user("d")])
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.input_tokens == 3
    # The usage times the call: the scripted model sleeps 0.01 s inside it, a lower bound a
    # slow machine only raises (no upper bound is asserted).
    assert first.usage.elapsed >= 0.01
    total = first.usage + second.usage
    assert total.input_tokens == 4


# -- streaming: cancellation and retries -------------------------------------------------------


async def test_cancel_ends_the_stream_with_the_partial_answer() -> None:
    model = ScriptedModel(["abcdefghijklmnop"], chunk_size=2, chunk_delay=0.005)
    stream = model.chat_stream([Msg.user("x")])
    seen = []
    async for chunk in stream:
        seen.append(chunk)
        if len(seen) == 2:
            stream.cancel()
    final = seen[-1]
    assert final.is_last
    assert final.finish_reason == "interrupted"
    assert final.text.startswith("abcd")
    assert len(final.text) < 16
    assert stream.response is final


async def test_a_cancelled_consumer_leaves_an_interrupted_response() -> None:
    model = ScriptedModel(["abcdefghijklmnop"], chunk_size=1, chunk_delay=0.01)
    stream = model.chat_stream([Msg.user("x")])

    async def consume() -> None:
        async for _ in stream:
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.response is not None
    assert stream.response.finish_reason == "interrupted"
    assert 0 < len(stream.response.text) < 16


class _Flaky(ChatModel):
    """Fails as told, then streams 'ok': to test retries."""

    provider: ClassVar[str] = "flaky"

    def __init__(self, failures: list[Exception], *, fail_after_first: bool = False) -> None:
        super().__init__(None, "flaky", max_retries=2)
        self.failures = failures
        self.fail_after_first = fail_after_first
        self.calls = 0

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        self.calls += 1
        if self.fail_after_first:
            yield TextDelta("partial")
        if self.failures:
            raise self.failures.pop(0)
        yield TextDelta("ok")


async def test_failures_before_the_first_chunk_are_retried() -> None:
    model = _Flaky([ModelConnectionError("reset"), ModelHTTPError(503, retry_after=0.01)])
    chunks = [c async for c in model.chat_stream([Msg.user("x")])]
    assert chunks[-1].text == "ok"
    assert model.calls == 3


async def test_failures_after_the_first_chunk_are_not_retried() -> None:
    model = _Flaky([ModelConnectionError("cut mid-way")], fail_after_first=True)
    stream = model.chat_stream([Msg.user("x")])
    first = await anext(stream)
    assert first.text == "partial"
    with pytest.raises(ModelConnectionError, match="cut mid-way"):
        await anext(stream)
    assert model.calls == 1
    assert stream.response is not None
    assert stream.response.finish_reason == "error"


async def test_whole_calls_are_retried_and_client_errors_are_not() -> None:
    flaky = _Flaky([RateLimitError(429, retry_after=0.01)])
    assert (await flaky.chat([Msg.user("x")])).text == "ok"
    assert flaky.calls == 2
    refused = _Flaky([ModelHTTPError(400, {"error": "bad"})])
    with pytest.raises(ModelHTTPError):
        await refused.chat([Msg.user("x")])
    assert refused.calls == 1
    too_long = _Flaky([ContextLengthError("too long")])
    with pytest.raises(ContextLengthError):
        await too_long.chat([Msg.user("x")])
    assert too_long.calls == 1


async def test_retry_after_is_honoured_and_backoff_is_bounded() -> None:
    policy = RetryPolicy(max_retries=3, initial_delay=1.0, max_delay=4.0)
    assert policy.delay(1, ModelHTTPError(503, retry_after=7.5)) == 7.5
    for attempt in range(1, 8):
        assert 0 < policy.delay(attempt, ModelConnectionError("x")) <= 4.0
    assert policy.retryable(ModelHTTPError(409))
    assert policy.retryable(ModelHTTPError(502))
    for status in (400, 401, 403, 404, 422):
        assert not policy.retryable(ModelHTTPError(status))
    assert not policy.retryable(RateLimitError(429, retry_after=3600))
    attempts = []

    async def failing() -> str:
        attempts.append(1)
        raise ModelHTTPError(500, retry_after=0)

    with pytest.raises(ModelHTTPError):
        await call_with_retries(RetryPolicy(max_retries=2), failing)
    assert len(attempts) == 3


# -- cache -------------------------------------------------------------------------------------


async def test_cache_answers_repeated_calls_and_replays_streams(tmp_path: Path) -> None:
    model = ScriptedModel(["cached answer"], cache_dir=tmp_path)
    first = await model.chat([Msg.user("q")])
    again = await model.chat([Msg.user("q")])  # a second model call would fail: no step left
    assert again.text == first.text == "cached answer"
    streamer = ScriptedModel(["streamed once", "different"], cache_dir=tmp_path / "s")
    chunks = [c async for c in streamer.chat_stream([Msg.user("q")])]
    replayed = [c async for c in streamer.chat_stream([Msg.user("q")])]
    assert replayed[-1].text == chunks[-1].text == "streamed once"
    assert len(replayed) >= 2
    assert not replayed[0].is_last
    other = await streamer.chat([Msg.user("another question")])
    assert other.text == "different"


# -- structured output -------------------------------------------------------------------------


class Weather(BaseModel):
    city: str
    celsius: int


async def test_structured_output_through_a_forced_tool_with_repair() -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("generate_response", '{"city": "Oslo", "celsius": "4"')]
    )
    result = await model.generate_structured_output([Msg.user("weather?")], Weather)
    assert result.parsed == Weather(city="Oslo", celsius=4)
    assert result.content == {"city": "Oslo", "celsius": 4}
    assert (result.strategy, result.attempts) == ("forced", 1)
    assert model.requests[0].tool_choice == "generate_response"


async def test_validation_errors_go_back_to_the_model_once() -> None:
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("generate_response", {"city": "Oslo"}, "c1"),
            ScriptedModel.tool_call("generate_response", {"city": "Oslo", "celsius": 3}),
        ]
    )
    result = await model.generate_structured_output([Msg.user("weather?")], Weather)
    assert result.attempts == 2
    feedback = model.requests[1].messages[-1]
    assert feedback.role == "tool"
    assert feedback.tool_results[0].is_error
    assert "celsius" in feedback.tool_results[0].text
    failing = ScriptedModel([ScriptedModel.tool_call("generate_response", {})] * 2)
    with pytest.raises(ModelOutputError, match="did not fit the schema"):
        await failing.generate_structured_output([Msg.user("weather?")], Weather)


async def test_structured_output_falls_back_when_forcing_is_refused() -> None:
    model = ScriptedModel(
        [
            ModelHTTPError(400, {"error": "tool_choice not supported"}),
            'Sure! ```json\n{"city": "Rome", "celsius": 20}\n```',
            'Here: {"city": "Rome", "celsius": 21}',
        ]
    )
    schema = Weather.model_json_schema()
    result = await model.generate_structured_output([Msg.user("weather?")], schema)
    # auto: the model answered in text instead of calling the tool, so text was next.
    assert result.strategy == "text"
    assert result.content == {"city": "Rome", "celsius": 21}
    assert result.parsed is None
    assert "JSON schema" in model.requests[-1].messages[-1].text


async def test_bad_schemas_are_usage_errors() -> None:
    with pytest.raises(UserError, match="not a valid JSON schema"):
        await ScriptedModel().generate_structured_output([Msg.user("x")], {"type": 12})
    with pytest.raises(UserError, match="must describe an object"):
        await ScriptedModel().generate_structured_output([Msg.user("x")], {"type": "string"})


# -- credentials, cards, safety ----------------------------------------------------------------


def test_credentials_register_by_type_and_hide_keys() -> None:
    class ExampleCredential(APIKeyCredential):
        type: str = "example-test"
        env_key: ClassVar[str | None] = "EXAMPLE_TEST_KEY"

    made = CredentialFactory.from_dict({"type": "example-test", "api_key": "sk-secret"})
    assert isinstance(made, ExampleCredential)
    assert made.key() == "sk-secret"
    assert "sk-secret" not in repr(made)
    assert "sk-secret" not in str(made)
    with pytest.raises(ConfigurationError, match="unknown credential type 'nope'"):
        CredentialFactory.from_dict({"type": "nope"})
    with pytest.raises(ConfigurationError, match="bad example-test credential"):
        CredentialFactory.from_dict({"type": "example-test", "colour": "red"})


def test_cards_merge_overrides_into_the_parameter_schema(tmp_path: Path) -> None:
    (tmp_path / "small.yaml").write_text(
        "name: small\nlabel: Small\ninput_types: [text/plain, image/*]\n"
        "output_types: [text/plain, application/x-thinking]\ncontext_size: 8192\n"
        "parameter_overrides:\n  max_tokens: {maximum: 1024}\n  seed: null\n"
        "  stop: {hidden: true}\n"
    )
    (tmp_path / "notes.txt").write_text("not a card")
    [card] = load_cards(tmp_path, Parameters.model_json_schema())
    props = card.parameter_schema["properties"]
    assert props["max_tokens"]["maximum"] == 1024
    assert "seed" not in props
    assert props["stop"]["hidden"] is True
    assert "temperature" in props
    assert card.accepts("image/png")
    assert not card.accepts("audio/wav")
    assert card.produces("application/x-thinking")
    with pytest.raises(ConfigurationError, match="names no parameter"):
        merge_parameter_schema(Parameters.model_json_schema(), {"nope": {}})
    (tmp_path / "broken.yaml").write_text("name: [unclosed")
    with pytest.raises(ConfigurationError, match=r"bad model card broken\.yaml"):
        load_cards(tmp_path, {})


def test_requests_to_other_hosts_are_blocked_in_tests() -> None:
    ChatModel.check_allowed("http://127.0.0.1:8000/v1")
    ChatModel.check_allowed("http://localhost:1234")
    with pytest.raises(UserError, match="blocked"):
        ChatModel.check_allowed("https://api.openai.com/v1")


def test_other_agents_turns_fold_into_one_named_user_message() -> None:
    image = ImageBlock.from_url("https://a.test/x.png")
    msgs = [
        Msg.system("You are Bob."),
        Msg.user("Start the debate.", name="host"),
        Msg.assistant("View A", name="alice"),
        Msg.assistant("My view", name="bob"),
        Msg.assistant("View C", image, name="carol"),
        Msg.assistant(ToolCallBlock(id="c", name="f"), name="bob"),
        Msg.tool_result("c", "done", name="f"),
    ]
    folded = fold_other_agents(msgs, self_name="bob")
    assert [m.role for m in folded] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert folded[1].text == "<history>\nhost: Start the debate.\nalice: View A\n</history>"
    assert folded[3].content[1] == image
    assert folded[2].text == "My view"


@pytest.mark.parametrize(
    ("kind", "variable", "fields"),
    [
        ("openai", "OPENAI_BASE_URL", {}),
        ("anthropic", "ANTHROPIC_BASE_URL", {}),
        ("gemini", "GOOGLE_GEMINI_BASE_URL", {}),
        ("gemini", "GOOGLE_VERTEX_BASE_URL", {"vertexai": True, "project": "p"}),
        ("dashscope", "DASHSCOPE_HTTP_BASE_URL", {}),
        ("openai_compatible", "OPENAI_COMPATIBLE_BASE_URL", {}),
    ],
)
def test_credentials_take_the_endpoint_the_sdk_s_own_variable_names(
    kind: str, variable: str, fields: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    from parley.models.credentials import CredentialFactory  # noqa: PLC0415

    monkeypatch.setenv(variable, "http://127.0.0.1:9/proxy")
    credential: Any = CredentialFactory.from_dict({"type": kind, **fields})
    assert credential.endpoint() == "http://127.0.0.1:9/proxy"
    given: Any = CredentialFactory.from_dict({"type": kind, "base_url": "http://x.test", **fields})
    assert given.endpoint() == "http://x.test"  # the credential's own wins
    monkeypatch.delenv(variable)
    assert credential.endpoint() != "http://127.0.0.1:9/proxy"
