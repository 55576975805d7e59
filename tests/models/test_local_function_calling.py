"""The embedded local model's tool turns, as llama.cpp really gets them.

The prompt is read back from the loaded model itself (the tokens it evaluated), after a real
generation through llama-cpp-python's `chatml-function-calling` handler.
"""

from __future__ import annotations

import json

import pytest

from parley import Msg
from parley.agents import one_tool_round
from parley.messages import ToolCallBlock
from parley.providers.local import LocalChatModel
from parley.providers.local._engine import get_engine
from tests._requires import require_module

ECHO = {
    "name": "echo",
    "description": "Repeat the user's text, word for word.",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text"}},
        "required": ["text"],
    },
}
QUOTED = 'it\'s "quoted"'


@pytest.fixture(scope="module")
def model() -> LocalChatModel:
    require_module("llama_cpp", "local")
    local = LocalChatModel(parameters={"seed": 7})
    local.load_sync()
    return local


def prompt_of_last_generation(model: LocalChatModel) -> str:
    """The text the model evaluated last: the rendered prompt, then what it generated."""
    llama = get_engine(model.key).llama
    tokens = llama.input_ids[: llama.n_tokens].tolist()
    return llama.detokenize(tokens, special=True).decode("utf-8")


def test_quotes_in_tool_calls_and_results_reach_the_model_as_written(
    model: LocalChatModel,
) -> None:
    call = ToolCallBlock(id="c1", name="echo", input={"text": QUOTED})
    history = [
        Msg.system('Answer with "care", don\'t rush.'),
        Msg.user("Echo \"this\" and 'that'."),
        Msg.assistant(call),
        Msg.tool_result("c1", 'He said "yes" & it\'s <done>.', name="echo"),
        Msg.user("Again, please."),
    ]
    model.chat_sync(history, tools=[ECHO], tool_choice="echo", max_tokens=1)

    prompt = prompt_of_last_generation(model)
    assert 'Answer with "care", don\'t rush.' in prompt
    assert "functions.echo: Repeat the user's text, word for word." in prompt
    assert "Echo \"this\" and 'that'." in prompt
    assert f"functions.echo:\n{json.dumps({'text': QUOTED})}" in prompt
    assert 'functions.echo returned:\nHe said "yes" & it\'s <done>.' in prompt
    for entity in ("&#34;", "&#39;", "&amp;", "&lt;", "&gt;", "&quot;"):
        assert entity not in prompt


def test_the_local_models_default_policy_is_one_tool_round() -> None:
    # No llama.cpp needed: the policy is the model's, read by agents that have none.
    model = LocalChatModel()
    assert model.default_tool_choice is one_tool_round
