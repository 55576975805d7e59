"""Every provider with a multi-agent formatter gets it when its agent talks with others."""

from __future__ import annotations

from typing import Any

import pytest

from parley.agents.multi.formatting import FoldingModel, multi_agent_model
from parley.messages import Msg
from parley.models import ChatModel
from parley.models.formatter import MultiAgentFormatter
from parley.models.spec import model_from_spec
from parley.models.testing import ScriptedModel

# provider spec, the formatter class the folded copy must use (by name)
PROVIDERS = [
    ("openai:gpt-4o-mini", "OpenAIMultiAgentFormatter"),
    ("anthropic:claude-sonnet-4-5", "AnthropicMultiAgentFormatter"),
    ("gemini:gemini-2.5-flash", "GeminiMultiAgentFormatter"),
    ("ollama:qwen3", "OllamaMultiAgentFormatter"),
    ("dashscope:qwen-plus", "DashScopeMultiAgentFormatter"),
]

CONVERSATION = [
    Msg.user("Debate: tabs or spaces?"),
    Msg.assistant("Tabs, obviously.", name="alice"),
    Msg.assistant("Spaces win.", name="bob"),
    Msg.assistant("I said tabs before.", name="alice"),
]


@pytest.mark.parametrize(("spec", "formatter_name"), PROVIDERS)
async def test_the_folded_copy_uses_the_provider_s_formatter_and_its_client(
    spec: str, formatter_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(key, "sk-test")
    model = model_from_spec(spec)
    copied = multi_agent_model(model, "alice")

    formatter = copied.formatter
    assert isinstance(formatter, MultiAgentFormatter)
    assert type(formatter).__name__ == formatter_name
    assert formatter.self_name == "alice"
    assert model.formatter is None  # the original is untouched
    assert copied.client() is model.client()  # type: ignore[attr-defined]

    payload = formatter.format(CONVERSATION)
    text = repr(payload)
    # Bob's turn is folded into a user turn naming him; Alice's own turns stay hers.
    assert "bob: Spaces win." in text
    assert "Tabs, obviously." in text

    again = multi_agent_model(copied, "bob")  # a copy of a copy folds for its new agent
    assert isinstance(again.formatter, type(formatter))
    assert again.formatter.self_name == "bob"


def test_a_model_without_one_is_folded_around() -> None:
    model: ChatModel = ScriptedModel(["hi"])
    folded: Any = multi_agent_model(model, "alice")
    assert isinstance(folded, FoldingModel)
    assert folded.inner is model
