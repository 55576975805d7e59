"""A thinking block records the provider that made it; each formatter sends a signature only
to its maker.

A conversation that moves from Claude to Gemini (or back) on one memory, through the
official SDKs against the local Anthropic and Gemini servers: Claude's signature never
reaches Gemini, Gemini's never reaches Claude, Gemini 3 gets Google's placeholder signature
on a call it did not sign, and each provider still gets its own signatures back. Messages
stored before the field existed load and are sent as they were.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.agents import Agent, InMemoryMemory
from parley.messages import Msg, ThinkingBlock, ToolCallBlock
from parley.models.retry import RetryPolicy
from parley.providers.anthropic import AnthropicChatModel
from parley.providers.anthropic import server as claude
from parley.providers.anthropic.formatter import AnthropicChatFormatter
from parley.providers.gemini import GeminiChatModel
from parley.providers.gemini import server as gemini
from tests._requires import require_module
from tests.sample_tools import add

SKIP_VALIDATOR = "skip_thought_signature_validator"  # Google's thought-signatures guide
CLAUDE_SIGNATURE = "EqQBCkgIBRABGAIiQClaude"
GEMINI_SIGNATURE = "CiQBcGeminiThought"
GEMINI_CALL_SIGNATURE = "CiQBcGeminiCall"


@pytest.fixture
def servers() -> Iterator[tuple[claude.AnthropicServer, gemini.GeminiServer]]:
    require_module("anthropic", "anthropic")
    require_module("google.genai", "gemini")
    with claude.AnthropicServer() as anthropic, gemini.GeminiServer() as google:
        yield anthropic, google


Models = Callable[[str], Any]


@pytest.fixture
async def models(
    servers: tuple[claude.AnthropicServer, gemini.GeminiServer],
) -> AsyncIterator[Models]:
    """`models("claude-...")` or `models("gemini-...")`: a model bound to its local server."""
    made: list[Any] = []

    def make(name: str) -> Any:
        anthropic, google = servers
        if name.startswith("claude"):
            model: Any = AnthropicChatModel(anthropic.credential(), name)
        else:
            model = GeminiChatModel(google.credential(), name)
        model.retry = RetryPolicy(max_retries=0)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


def claude_calls_add() -> claude.Reply:
    return claude.Reply(
        content=[
            claude.Thinking("I should add them.", signature=CLAUDE_SIGNATURE),
            claude.ToolUse("add", {"a": 2, "b": 3}, "toolu_1"),
        ]
    )


def gemini_calls_add() -> gemini.Reply:
    call = gemini.FunctionCall("add", {"a": 2, "b": 3}, signature=GEMINI_CALL_SIGNATURE)
    return gemini.Reply(
        thinking="Adding.", thought_signature=GEMINI_SIGNATURE, function_calls=[call]
    )


def every_part(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for content in contents for part in content["parts"]]


async def test_claude_s_thinking_goes_back_to_claude_only(
    servers: tuple[claude.AnthropicServer, gemini.GeminiServer], models: Models
) -> None:
    anthropic, google = servers
    anthropic.add(claude_calls_add(), claude.Reply(text="It is 5."))
    google.add(gemini.Reply(text="Still 5."))
    memory = InMemoryMemory()
    await Agent("claude", models("claude-sonnet-5-5"), tools=[add]).reply("2+3?", memory=memory)

    thinking = (await memory.get())[1].get_blocks("thinking")
    assert [(t.signature, t.provider) for t in thinking] == [(CLAUDE_SIGNATURE, "anthropic")]
    # Claude got its signature back with the tool's result.
    sent_back = anthropic.bodies()[1]["messages"][1]["content"][0]
    assert sent_back == {
        "type": "thinking",
        "thinking": "I should add them.",
        "signature": CLAUDE_SIGNATURE,
    }

    # Gemini 3 goes on with the conversation: no Claude signature, no thought of Claude's,
    # and the call Claude made carries Google's placeholder.
    await Agent("gemini", models("gemini-3-pro-preview"), tools=[add]).reply("Sure?", memory=memory)
    [body] = google.bodies()
    assert CLAUDE_SIGNATURE not in str(body)
    parts = every_part(body["contents"])
    assert not [p for p in parts if p.get("thought")]
    [call] = [p for p in parts if "functionCall" in p]
    assert call["thoughtSignature"] == SKIP_VALIDATOR
    anthropic.assert_consumed()
    google.assert_consumed()


async def test_gemini_s_signatures_go_back_to_gemini_only(
    servers: tuple[claude.AnthropicServer, gemini.GeminiServer], models: Models
) -> None:
    anthropic, google = servers
    google.add(gemini_calls_add(), gemini.Reply(text="It is 5."))
    anthropic.add(claude.Reply(text="Still 5."))
    memory = InMemoryMemory()
    await Agent("gemini", models("gemini-3-pro-preview"), tools=[add]).reply("2+3?", memory=memory)
    # Gemini got its own signatures back, the call's on the call.
    parts = every_part(google.bodies()[1]["contents"])
    assert [p["thoughtSignature"] for p in parts if p.get("thought")] == [GEMINI_SIGNATURE]
    [call] = [p for p in parts if "functionCall" in p]
    assert call["thoughtSignature"] == GEMINI_CALL_SIGNATURE
    made = [b.provider for b in (await memory.get())[1].get_blocks("thinking")]
    assert made
    assert set(made) == {"gemini"}

    await Agent("claude", models("claude-sonnet-5-5"), tools=[add]).reply("Sure?", memory=memory)
    [body] = anthropic.bodies()
    assert GEMINI_SIGNATURE not in str(body)
    assert GEMINI_CALL_SIGNATURE not in str(body)
    kinds = [b["type"] for m in body["messages"] for b in m["content"]]
    assert "thinking" not in kinds
    assert "tool_use" in kinds  # the call itself stays in the conversation
    anthropic.assert_consumed()
    google.assert_consumed()


def test_a_thinking_block_stored_before_providers_were_recorded_loads_and_is_sent() -> None:
    stored = (
        '{"role": "assistant", "content": [{"type": "thinking", "thinking": "Hm.",'
        ' "signature": "sig-old"}, {"type": "text", "text": "Hi."}]}'
    )
    msg = Msg.model_validate_json(stored)
    [block] = msg.get_blocks("thinking")
    assert block == ThinkingBlock(thinking="Hm.", signature="sig-old")
    assert block.provider is None
    assert "provider" not in msg.model_dump_json()  # and stored as it was
    # Its maker unknown, it goes back as before (it was Claude's, most likely).
    [turn] = AnthropicChatFormatter().format([msg])
    assert turn["content"][0] == {"type": "thinking", "thinking": "Hm.", "signature": "sig-old"}


@pytest.mark.parametrize(
    ("name", "checks"),
    [
        ("gemini-2.5-flash", False),
        ("gemini-3-pro-preview", True),
        ("models/gemini-3-flash", True),
        ("gemini-4-ultra", True),
        ("gemini-flash-latest", False),
    ],
)
def test_gemini_3_and_later_get_placeholders_in_multi_agent_talks_too(
    name: str, checks: bool
) -> None:
    require_module("google.genai", "gemini")
    from parley.providers.gemini import GeminiCredential  # noqa: PLC0415
    from parley.providers.gemini.chat import requires_signatures  # noqa: PLC0415

    assert requires_signatures(name) is checks
    model = GeminiChatModel(GeminiCredential(api_key="AIza-test"), name)
    called = Msg(role="assistant", content=[ToolCallBlock(id="toolu_1", name="add", input={})])
    formatter = model.multi_agent_formatter("me")
    assert formatter is not None
    parts = every_part(formatter.format([Msg.user("Go."), called]))
    [call] = [p for p in parts if "functionCall" in p]
    assert (call.get("thoughtSignature") == SKIP_VALIDATOR) is checks
