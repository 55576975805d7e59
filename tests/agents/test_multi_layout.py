"""AgentScope's multi-agent history layout (seed 004): one `[Name]: text` entry per turn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parley.agents import Agent
from parley.agents.multi import FoldingModel, GroupChat, MsgHub
from parley.errors import UserError
from parley.messages import ImageBlock, Msg
from parley.models.formatter import fold_other_agents
from parley.models.testing import ScriptedModel
from parley.providers.openai import OpenAIChatModel, OpenAIMultiAgentFormatter
from parley.providers.openai.server import OpenAIServer, Reply


def test_entries_fold_each_turn_into_its_own_named_user_message() -> None:
    image = ImageBlock.from_url("https://example.com/p.png")
    msgs = [
        Msg.user("Tabs or spaces?", name="host"),
        Msg.assistant("View A", name="AgentA"),
        Msg.assistant("View B", image, name="AgentB"),
        Msg.assistant("Mine", name="me"),
    ]
    folded = fold_other_agents(msgs, "me", "entries")
    assert [(m.role, m.text) for m in folded] == [
        ("user", "[host]: Tabs or spaces?"),
        ("user", "[AgentA]: View A"),
        ("user", "[AgentB]: View B"),
        ("assistant", "Mine"),
    ]
    assert folded[2].get_blocks("image") == [image]
    # parley's own layout is unchanged and stays the default.
    assert fold_other_agents(msgs, "me")[0].text == (
        "<history>\nhost: Tabs or spaces?\nAgentA: View A\nAgentB: View B\n</history>"
    )


async def test_a_hub_in_entries_layout_on_a_model_without_a_formatter() -> None:
    bob_model = ScriptedModel(["Spaces."])
    alice = Agent("alice", ScriptedModel(["Tabs."]))
    bob = Agent("bob", bob_model)
    async with MsgHub([alice, bob], announcement="Tabs or spaces?", multi_agent_format="entries"):
        await alice.reply()
        await bob.reply()
    assert isinstance(bob.model, FoldingModel)
    assert bob.model.layout == "entries"
    [request] = bob_model.requests
    assert [(m.role, m.text) for m in request.messages] == [
        ("user", "[user]: Tabs or spaces?"),
        ("user", "[alice]: Tabs."),
    ]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


async def test_an_openai_request_in_entries_layout(server: OpenAIServer) -> None:
    shared = OpenAIChatModel(server.credential(), "gpt-4o-mini")
    alice = Agent("alice", shared)
    bob = Agent("bob", shared)
    server.add(Reply(text="Tabs."), Reply(text="Spaces."))
    try:
        chat = GroupChat([alice, bob], max_rounds=2, multi_agent_format="entries")
        await chat.run(Msg.user("Tabs or spaces?", name="host"))
    finally:
        await shared.aclose()
    assert server.bodies()[1]["messages"] == [
        {"role": "user", "content": "[host]: Tabs or spaces?"},
        {"role": "user", "content": "[alice]: Tabs."},
    ]
    formatter = bob.model.formatter
    assert isinstance(formatter, OpenAIMultiAgentFormatter)
    assert formatter.layout == "entries"


def test_an_unknown_layout_is_refused() -> None:
    with pytest.raises(UserError, match="unknown history layout 'rows'"):
        MsgHub([], multi_agent_format="rows")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="unknown history layout"):
        OpenAIMultiAgentFormatter("a", layout="rows")  # type: ignore[arg-type]
