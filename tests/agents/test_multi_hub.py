"""MsgHub: agents observe each other's answers, and their models read them folded with names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parley._sync import run_sync
from parley.agents import Agent
from parley.agents.multi import (
    FoldingModel,
    HumanParticipant,
    MsgHub,
    observable,
    use_multi_agent_formatting,
)
from parley.errors import UserError
from parley.messages import Msg, ThinkingBlock, ToolCallBlock
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel
from parley.providers.openai import (
    OpenAIChatModel,
    OpenAIMultiAgentFormatter,
    OpenAIResponseModel,
    OpenAIResponsesFormatter,
)
from parley.providers.openai.server import OpenAIServer, Reply
from parley.tools import tool


def agent(name: str, *steps: str | ChatResponse, **kwargs: object) -> Agent:
    return Agent(name, ScriptedModel(list(steps)), **kwargs)  # type: ignore[arg-type]


def texts(msgs: list[Msg]) -> list[tuple[str | None, str]]:
    return [(m.name, m.text) for m in msgs]


async def test_each_agent_observes_the_others_answers_with_their_names() -> None:
    alice = agent("alice", "Tabs.")
    bob = agent("bob", "Spaces.")
    carol = agent("carol", "Whatever the formatter says.")

    async with MsgHub([alice, bob, carol], announcement="Tabs or spaces?"):
        await alice.reply()
        await bob.reply()
        await carol.reply()

    everything = [
        (None, "Tabs or spaces?"),
        ("alice", "Tabs."),
        ("bob", "Spaces."),
        ("carol", "Whatever the formatter says."),
    ]
    for participant in (alice, bob, carol):
        assert texts(await participant.memory.get()) == everything
    observed = (await bob.memory.get())[1]
    assert observed.role == "assistant"
    assert observed.name == "alice"


async def test_a_model_without_a_formatter_reads_the_others_folded() -> None:
    bob_model = ScriptedModel(["Spaces."])
    alice = agent("alice", "Tabs.")
    bob = Agent("bob", bob_model)

    async with MsgHub([alice, bob], announcement="Tabs or spaces?"):
        await alice.reply()
        await bob.reply()

    assert isinstance(bob.model, FoldingModel)
    assert bob.model.inner is bob_model
    [request] = bob_model.requests
    [folded] = request.messages
    assert folded.role == "user"
    assert folded.text == "<history>\nuser: Tabs or spaces?\nalice: Tabs.\n</history>"


async def test_the_agents_own_turns_stay_its_own() -> None:
    alice_model = ScriptedModel(["Tabs.", "Still tabs."])
    alice = Agent("alice", alice_model, system_prompt="Be brief.")
    bob = agent("bob", "Spaces.")

    async with MsgHub([alice, bob], announcement="Tabs or spaces?"):
        await alice.reply()
        await bob.reply()
        await alice.reply()

    messages = alice_model.requests[1].messages
    assert [(m.role, m.name) for m in messages] == [
        ("system", None),
        ("user", None),
        ("assistant", "alice"),
        ("user", None),
    ]
    assert messages[1].text == "<history>\nuser: Tabs or spaces?\n</history>"
    assert messages[3].text == "<history>\nbob: Spaces.\n</history>"


def test_the_openai_multi_agent_formatter_folds_other_agents_turns() -> None:
    msgs = [
        Msg.user("Tabs or spaces?"),
        Msg.assistant("Tabs.", name="alice"),
        Msg.assistant("Spaces.", name="bob"),
    ]

    formatted = OpenAIMultiAgentFormatter(self_name="bob").format(msgs)

    assert formatted == [
        {"role": "user", "content": "<history>\nuser: Tabs or spaces?\nalice: Tabs.\n</history>"},
        {"role": "assistant", "content": "Spaces.", "name": "bob"},
    ]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


async def test_an_openai_model_request_shows_the_others_folded_with_names(
    server: OpenAIServer,
) -> None:
    shared = OpenAIChatModel(server.credential(), "gpt-4o-mini")  # one model, two agents
    alice = Agent("alice", shared, system_prompt="You are Alice.")
    bob = Agent("bob", shared, system_prompt="You are Bob.")
    server.add(Reply(text="Tabs."), Reply(text="Spaces."), Reply(text="Tabs, still."))

    try:
        async with MsgHub([alice, bob], announcement=Msg.user("Tabs or spaces?", name="host")):
            await alice.reply()
            await bob.reply()
            await alice.reply()
    finally:
        await shared.aclose()

    server.assert_consumed()
    bodies = server.bodies()
    assert bodies[1]["messages"] == [
        {"role": "system", "content": "You are Bob."},
        {"role": "user", "content": "<history>\nhost: Tabs or spaces?\nalice: Tabs.\n</history>"},
    ]
    assert bodies[2]["messages"] == [
        {"role": "system", "content": "You are Alice."},
        {"role": "user", "content": "<history>\nhost: Tabs or spaces?\n</history>"},
        {"role": "assistant", "content": "Tabs.", "name": "alice"},
        {"role": "user", "content": "<history>\nbob: Spaces.\n</history>"},
    ]
    # Each agent got its own copy of the shared model; the shared one is unchanged.
    assert shared.formatter is None
    assert alice.model is not shared
    assert alice.model is not bob.model
    for participant in (alice, bob):
        formatter = participant.model.formatter
        assert isinstance(formatter, OpenAIMultiAgentFormatter)
        assert formatter.self_name == participant.name


def test_formatting_keeps_the_models_own_formatter_and_is_idempotent() -> None:
    responses = OpenAIResponseModel(model="gpt-4o-mini")
    ann = Agent("ann", responses)

    use_multi_agent_formatting(ann)
    wired = ann.model
    use_multi_agent_formatting(ann)

    assert ann.model is wired
    formatter = wired.formatter
    assert isinstance(formatter, OpenAIMultiAgentFormatter)
    assert isinstance(formatter.formatter, OpenAIResponsesFormatter)

    # A model already carrying a multi-agent formatter for someone else gets this name.
    other = OpenAIChatModel(model="gpt-4o-mini", formatter=OpenAIMultiAgentFormatter("x"))
    ben = Agent("ben", other)
    use_multi_agent_formatting(ben)
    assert isinstance(ben.model.formatter, OpenAIMultiAgentFormatter)
    assert ben.model.formatter.self_name == "ben"
    assert other.formatter.self_name == "x"  # type: ignore[union-attr]

    # A folding model moved to another agent folds for that one.
    cy = Agent("cy", FoldingModel(ScriptedModel(), "someone"))
    use_multi_agent_formatting(cy)
    assert isinstance(cy.model, FoldingModel)
    assert cy.model.self_name == "cy"


async def test_tool_traffic_and_thinking_are_not_broadcast() -> None:
    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: Which.
        """
        return f"{city}: sunny"

    thinking_answer = ChatResponse(
        content=[ThinkingBlock(thinking="hmm"), *Msg.assistant("Sunny in Oslo.").content]
    )
    alice = agent("alice", ScriptedModel.tool_call("lookup", {"city": "Oslo"}), thinking_answer)
    alice.toolkit.add(lookup)
    bob = agent("bob")

    async with MsgHub([alice, bob]):
        await alice.reply("Weather in Oslo?")

    assert texts(await bob.memory.get()) == [("alice", "Sunny in Oslo.")]
    [seen] = await bob.memory.get()
    assert not seen.has_blocks("thinking")
    assert len(await alice.memory.get()) == 4  # input, call, result, answer: all its own


def test_observable_keeps_text_and_media_only() -> None:
    call = ToolCallBlock(id="c1", name="f", input={})
    assert observable(Msg(role="assistant", content=[call])) is None
    mixed = Msg(role="assistant", name="a", content=[ThinkingBlock(thinking="t"), call])
    mixed.content.insert(1, Msg.assistant("hi").content[0])
    shared = observable(mixed)
    assert shared is not None
    assert [b.type for b in shared.content] == ["text"]
    assert shared.name == "a"
    assert shared.id == mixed.id
    assert [b.type for b in mixed.content] == ["thinking", "text", "tool_call"]  # untouched


async def test_broadcast_add_and_remove() -> None:
    alice = agent("alice", "A1", "A2")
    bob = agent("bob")
    ann = HumanParticipant("ann")
    hub = MsgHub([alice, bob])

    async with hub:
        await hub.broadcast(Msg.user("Hello all"))
        hub.add(ann)
        await alice.reply()
        hub.remove(bob)
        await alice.reply()
        await hub.broadcast(Msg.user("Bye", name="ann"), exclude=[ann])

    assert texts(await bob.memory.get()) == [(None, "Hello all"), ("alice", "A1")]
    assert texts(await ann.memory.get()) == [("alice", "A1"), ("alice", "A2")]
    assert texts(await alice.memory.get())[-1] == ("ann", "Bye")
    assert [p.name for p in hub.participants] == ["alice", "ann"]


async def test_nothing_is_broadcast_once_the_hub_is_closed() -> None:
    alice = agent("alice", "inside", "outside")
    bob = agent("bob")
    hub = MsgHub([alice, bob])

    async with hub:
        states = [hub.is_open]
        await alice.reply()
    await alice.reply()

    assert [*states, hub.is_open] == [True, False]
    assert alice.reply_listeners == []
    assert texts(await bob.memory.get()) == [("alice", "inside")]


async def test_auto_broadcast_off_leaves_broadcasting_to_the_caller() -> None:
    alice = agent("alice", "quiet")
    bob = agent("bob")

    async with MsgHub([alice, bob], auto_broadcast=False) as hub:
        answer = await alice.reply()
        assert await bob.memory.get() == []
        await hub.broadcast(answer, exclude=[alice])

    assert texts(await bob.memory.get()) == [("alice", "quiet")]


async def test_a_parked_run_is_not_broadcast_until_it_answers() -> None:
    @tool(requires_approval=True)
    def deploy() -> str:
        """Deploy."""
        return "deployed"

    alice = agent("alice", ScriptedModel.tool_call("deploy", {}, "c1"), "Deployed.")
    alice.toolkit.add(deploy)
    bob = agent("bob")

    async with MsgHub([alice, bob]):
        parked = await alice.reply("Deploy, please.")
        assert await bob.memory.get() == []
        await alice.resume(parked.metadata["interrupt_id"], approved=True)

    assert texts(await bob.memory.get()) == [("alice", "Deployed.")]


def test_the_sync_form() -> None:
    alice = agent("alice", "Hi.")
    bob = agent("bob")

    with MsgHub([alice, bob], announcement=[Msg.user("Say hi.")]) as hub:
        alice.reply_sync()
        hub.broadcast_sync(Msg.user("Thanks."))

    assert [m.text for m in run_sync(bob.memory.get())] == ["Say hi.", "Hi.", "Thanks."]


async def test_usage_mistakes() -> None:
    alice = agent("alice")
    with pytest.raises(UserError, match="already has a participant named 'alice'"):
        MsgHub([alice, agent("alice")])
    hub = MsgHub([alice])
    async with hub:
        with pytest.raises(UserError, match="open already"):
            await hub.__aenter__()
    with pytest.raises(UserError, match="user messages"):
        HumanParticipant("ann").message(Msg.assistant("no"))
