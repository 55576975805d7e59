"""Group chats on scripted models: selection, mentions, people, approvals, limits, events."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

import pytest

from parley.agents import Agent, RunEnded, RunError, RunStarted
from parley.agents.multi import (
    ChatEnded,
    ChatMessage,
    ChatPaused,
    FoldingModel,
    GroupChat,
    GroupChatEventAdapter,
    HumanParticipant,
    SpeakerSelected,
)
from parley.errors import ModelHTTPError, UserError
from parley.messages import Msg
from parley.models import ChatResponse
from parley.models.structured import STRUCTURED_TOOL
from parley.models.testing import ScriptedModel
from parley.tools import tool


def agent(name: str, *steps: Any, description: str = "") -> Agent:
    return Agent(name, ScriptedModel(list(steps)), description=description)


def talker(name: str, turns: int) -> Agent:
    """An agent that says `<name> <n>` on its n-th turn."""
    return agent(name, *(f"{name} {n}" for n in range(1, turns + 1)))


def scripted(participant: Agent) -> ScriptedModel:
    """The scripted model under an agent's model (a hub wraps it to fold others' turns)."""
    model = participant.model
    inner = model.inner if isinstance(model, FoldingModel) else model
    assert isinstance(inner, ScriptedModel)
    return inner


def speakers(chat: GroupChat) -> list[str | None]:
    return [m.name for m in chat.messages if m.role == "assistant"]


def pick(name: str) -> ChatResponse:
    return ScriptedModel.tool_call(STRUCTURED_TOOL, {"speaker": name})


# -- selection -------------------------------------------------------------------------------------


async def test_round_robin_takes_turns_in_order_until_max_rounds() -> None:
    a, b, c = talker("a", 2), talker("b", 2), talker("c", 1)
    chat = GroupChat([a, b, c], max_rounds=5)

    result = await chat.run("Count off.")

    assert result.status == "finished"
    assert result.reason == "max_rounds"
    assert result.rounds == 5
    assert [m.text for m in result.messages] == ["Count off.", "a 1", "b 1", "c 1", "a 2", "b 2"]
    for participant in (a, b, c):
        scripted(participant).assert_consumed()


async def test_random_selection_is_repeatable_with_a_seed() -> None:
    def chat(seed: int) -> GroupChat:
        return GroupChat(
            [talker("a", 6), talker("b", 6), talker("c", 6)],
            selection="random",
            max_rounds=6,
            seed=seed,
        )

    first, again = chat(7), chat(7)
    await first.run("Go.")
    await again.run("Go.")

    order = speakers(first)
    assert order == speakers(again)
    # What the seeded generator draws, never the same speaker twice in a row.
    rng, last, expected = random.Random(7), None, []
    for _ in range(6):
        last = rng.choice([n for n in "abc" if n != last])
        expected.append(last)
    assert order == expected
    assert all(x != y for x, y in itertools.pairwise(order))


async def test_manual_selection_asks_a_function_which_may_end_the_chat() -> None:
    plan = iter(["b", "a", "b", None])
    seen: list[int] = []

    def choose(chat: GroupChat) -> str | None:
        seen.append(len(chat.messages))
        return next(plan)

    a, b = talker("a", 1), talker("b", 2)
    chat = GroupChat([a, b], selection="manual", selector=choose)

    result = await chat.run("Start.")

    assert speakers(chat) == ["b", "a", "b"]
    assert result.reason == "no_speaker"
    assert seen == [1, 2, 3, 4]


async def test_an_async_manual_selector_may_return_a_participant() -> None:
    a, b = talker("a", 1), talker("b", 1)

    async def choose(chat: GroupChat) -> Agent | None:
        return b if not chat.messages[1:] else None

    result = await GroupChat([a, b], selection="manual", selector=choose).run("Hi.")

    assert [m.name for m in result.messages[1:]] == ["b"]


async def test_a_manual_pick_outside_the_chat_is_a_usage_error() -> None:
    chat = GroupChat([talker("a", 0)], selection="manual", selector=lambda _: "zed")

    with pytest.raises(UserError, match="no participant named 'zed'"):
        await chat.run("Hi.")


async def test_auto_selection_asks_the_selector_model() -> None:
    a = talker("a", 1)
    b = agent("b", "b 1", description="Reviews.")
    c = agent("c", "c 1", description="Tests.")
    a.description = "Writes."
    selector = ScriptedModel([pick("c"), pick("b"), pick("a")])
    chat = GroupChat([a, b, c], selection="auto", selector_model=selector, max_rounds=3)

    await chat.run("Ship the feature.")

    assert speakers(chat) == ["c", "b", "a"]
    selector.assert_consumed()
    first = selector.requests[0]
    assert first.tools[0].parameters["properties"]["speaker"]["enum"] == ["a", "b", "c"]
    assert "- b: Reviews." in first.messages[0].text
    assert "user: Ship the feature." in first.messages[1].text
    # The last speaker is not offered again, and the conversation reaches the selector.
    second = selector.requests[1]
    assert second.tools[0].parameters["properties"]["speaker"]["enum"] == ["a", "b"]
    assert "c: c 1" in second.messages[1].text


async def test_an_invalid_auto_pick_falls_back_to_round_robin() -> None:
    a, b = talker("a", 1), talker("b", 1)
    # Two names only: the selector is asked; "nobody" twice (with the correction) is refused.
    selector = ScriptedModel([pick("nobody"), pick("nobody"), pick("a")])
    chat = GroupChat([a, b], selection="auto", selector_model=selector, max_rounds=2)

    events = [event async for event in chat.stream("Hi.")]

    assert speakers(chat) == ["a", "b"]
    methods = [e.method for e in events if isinstance(e, SpeakerSelected)]
    assert methods == ["auto", "auto"]
    assert len(selector.requests) == 2  # the second turn had one candidate left: no call
    assert selector.steps  # so the third step stayed unused


async def test_a_mention_picks_the_next_speaker() -> None:
    a = agent("a", "What do you think, @c?", "a 2")
    b, c = talker("b", 1), talker("c", 1)
    chat = GroupChat([a, b, c], max_rounds=4)

    events = [event async for event in chat.stream("Discuss.")]

    assert speakers(chat) == ["a", "c", "a", "b"]
    methods = [(e.speaker, e.method) for e in events if isinstance(e, SpeakerSelected)]
    assert methods[1] == ("c", "mention")
    assert methods[2] == ("a", "round_robin")  # round robin goes on after the mentioned one


async def test_mentions_of_oneself_unknown_names_or_emails_do_not_count() -> None:
    a = agent("a", "I am @a; mail me at x@b.org, or ask @zed.")
    b, c = talker("b", 1), talker("c", 0)
    chat = GroupChat([a, b, c], max_rounds=2)

    await chat.run("Hi.")

    assert speakers(chat) == ["a", "b"]


async def test_mentions_can_be_switched_off() -> None:
    a = agent("a", "Over to you, @c.")
    b, c = talker("b", 1), talker("c", 0)

    chat = GroupChat([a, b, c], max_rounds=2, mentions=False)
    await chat.run("Hi.")

    assert speakers(chat) == ["a", "b"]


async def test_a_task_mentioning_someone_starts_with_them() -> None:
    a, b = talker("a", 0), talker("b", 1)

    result = await GroupChat([a, b], max_rounds=1).run("@b, you first.")

    assert [m.name for m in result.messages[1:]] == ["b"]


# -- ending ----------------------------------------------------------------------------------------


async def test_a_stop_condition_ends_the_chat() -> None:
    a = agent("a", "Working.", "DONE")
    b = talker("b", 1)

    def done(msgs: Sequence[Msg]) -> bool:
        return msgs[-1].text == "DONE"

    result = await GroupChat([a, b], max_rounds=10, stop_condition=done).run("Go.")

    assert result.reason == "stopped"
    assert result.rounds == 3
    assert result.last is not None
    assert result.last.text == "DONE"


async def test_a_model_failure_ends_the_chat_and_raises_from_run() -> None:
    a = agent("a", ModelHTTPError(500, message="down"))
    chat = GroupChat([a, talker("b", 0)])

    with pytest.raises(ModelHTTPError):
        await chat.run("Hi.")

    assert chat.status == "finished"
    assert chat.reason == "error"


async def test_a_model_failure_ends_the_stream_with_chat_ended() -> None:
    a = agent("a", ModelHTTPError(500, message="down"))
    chat = GroupChat([a, talker("b", 0)])

    events = [event async for event in chat.stream("Hi.")]

    assert isinstance(events[-3], RunError)
    assert events[-1] == ChatEnded(reason="error", rounds=0)


async def test_run_again_goes_on_with_a_new_task_and_round_count() -> None:
    a, b = talker("a", 2), talker("b", 2)
    chat = GroupChat([a, b], max_rounds=2)

    await chat.run("One.")
    result = await chat.run("Two.")

    assert [m.text for m in result.messages] == ["One.", "a 1", "b 1", "Two.", "a 2", "b 2"]
    assert result.rounds == 2
    assert result.reason == "max_rounds"


# -- broadcasting ----------------------------------------------------------------------------------


async def test_every_message_reaches_every_participant() -> None:
    a, b = talker("a", 1), talker("b", 1)
    ann = HumanParticipant("ann")
    chat = GroupChat([a, b, ann], max_rounds=3)

    await chat.run("Plan a trip.")
    await chat.resume("Lisbon!")

    everything = [
        (None, "Plan a trip."),
        ("a", "a 1"),
        ("b", "b 1"),
        ("ann", "Lisbon!"),
    ]
    for memory in (a.memory, b.memory, ann.memory):
        assert [(m.name, m.text) for m in await memory.get()] == everything
    # b answered from its memory: the task and a's turn, folded with names.
    [request] = scripted(b).requests
    assert request.messages[0].text == "<history>\nuser: Plan a trip.\na: a 1\n</history>"


# -- people ----------------------------------------------------------------------------------------


async def test_a_human_turn_pauses_the_chat_until_resumed() -> None:
    a = agent("a", "Where to, @ann?", "Lisbon it is.")
    ann = HumanParticipant("ann")
    chat = GroupChat([a, ann], max_rounds=4)

    paused = await chat.run("Plan a trip.")

    assert paused.status == "paused"
    assert paused.waiting_for == "ann"
    assert paused.interrupt_id is None
    assert chat.status == "paused"
    with pytest.raises(UserError, match="paused: resume it"):
        await chat.run("Another task.")
    with pytest.raises(UserError, match="waits for ann to speak"):
        await chat.resume()

    resumed = await chat.resume("Lisbon, @a.")

    assert resumed.status == "paused"  # a answered, then it was ann's turn again
    assert resumed.waiting_for == "ann"
    assert [(m.name, m.text) for m in resumed.messages[-3:]] == [
        ("a", "Where to, @ann?"),
        ("ann", "Lisbon, @a."),
        ("a", "Lisbon it is."),
    ]
    assert resumed.rounds == 3
    final = await chat.resume(Msg.user("Thanks."))
    assert final.status == "finished"
    assert final.reason == "max_rounds"
    assert final.last is not None
    assert final.last.name == "ann"


async def test_the_stream_ends_paused_and_resume_stream_goes_on() -> None:
    ann = HumanParticipant("ann")
    a = talker("a", 1)
    chat = GroupChat([ann, a], max_rounds=2)

    events = [event async for event in chat.stream()]

    assert events == [
        SpeakerSelected(speaker="ann", round=1, method="round_robin"),
        ChatPaused(waiting_for="ann"),
    ]
    events = [event async for event in chat.resume_stream("Hello, a.")]

    assert [type(e).__name__ for e in events][:3] == [
        "ChatMessage",
        "SpeakerSelected",
        "RunStarted",
    ]
    assert isinstance(events[-2], ChatMessage)
    assert events[-2].msg.text == "a 1"
    assert events[-1] == ChatEnded(reason="max_rounds", rounds=2)
    for event in events:  # a stream of them is JSON, read back into the same classes
        assert GroupChatEventAdapter.validate_json(event.model_dump_json()) == event


async def test_resume_when_not_paused_is_a_usage_error() -> None:
    chat = GroupChat([talker("a", 0)])

    with pytest.raises(UserError, match="idle, not paused"):
        await chat.resume("hi")


def test_sync_twins() -> None:
    ann = HumanParticipant("ann")
    chat = GroupChat([talker("a", 2), ann], max_rounds=3)

    assert chat.run_sync("Hi.").waiting_for == "ann"
    result = chat.resume_sync("Hello.")

    assert result.reason == "max_rounds"
    assert [m.text for m in result.messages] == ["Hi.", "a 1", "Hello.", "a 2"]
    events = list(GroupChat([talker("b", 1)], max_rounds=1).stream_sync("Go."))
    assert isinstance(events[-1], ChatEnded)


# -- approvals -------------------------------------------------------------------------------------


async def test_a_tool_call_awaiting_approval_pauses_the_chat() -> None:
    @tool(requires_approval=True)
    def book(city: str) -> str:
        """Book a trip.

        Args:
            city: Where.
        """
        return f"booked {city}"

    a = agent("a", ScriptedModel.tool_call("book", {"city": "Lisbon"}, "c1"), "Booked Lisbon.")
    a.toolkit.add(book)
    b = talker("b", 1)
    chat = GroupChat([a, b], max_rounds=2)

    paused = await chat.run("Book it.")

    assert paused.status == "paused"
    assert paused.waiting_for == "a"
    assert paused.interrupt_id is not None
    assert await b.memory.get() == [paused.messages[0]]  # nothing of a's yet
    with pytest.raises(UserError, match="pass approved="):
        await chat.resume("yes")

    events = [event async for event in chat.resume_stream(approved=True)]

    assert speakers(chat) == ["a", "b"]
    assert any(isinstance(e, RunStarted) and e.agent == "a" for e in events)
    assert [m.text for m in await b.memory.get()] == ["Book it.", "Booked Lisbon.", "b 1"]
    assert chat.reason == "max_rounds"


# -- events and usage mistakes ---------------------------------------------------------------------


async def test_the_events_of_one_turn() -> None:
    chat = GroupChat([talker("a", 1)], max_rounds=1)

    events = [event async for event in chat.stream("Hi.")]

    assert isinstance(events[0], ChatMessage)
    assert events[1] == SpeakerSelected(speaker="a", round=1, method="round_robin")
    assert isinstance(events[2], RunStarted)
    ended = [i for i, e in enumerate(events) if isinstance(e, RunEnded)]
    assert isinstance(events[ended[0] + 1], ChatMessage)
    assert events[-1] == ChatEnded(reason="max_rounds", rounds=1)


async def test_stopping_the_stream_early_leaves_the_chat_idle() -> None:
    chat = GroupChat([talker("a", 1), talker("b", 0)])
    stream = chat.stream("Hi.")

    async for event in stream:
        if isinstance(event, RunStarted):
            break
    await stream.aclose()

    assert chat.status == "idle"
    assert not chat.hub.is_open


def test_usage_mistakes() -> None:
    a = talker("a", 0)
    with pytest.raises(UserError, match="at least one participant"):
        GroupChat([])
    with pytest.raises(UserError, match="repeated: a"):
        GroupChat([a, talker("a", 0)])
    with pytest.raises(UserError, match="unknown selection"):
        GroupChat([a], selection="loudest")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="needs a selector function"):
        GroupChat([a], selection="manual")
    with pytest.raises(UserError, match="needs a selector_model"):
        GroupChat([a], selection="auto")
    with pytest.raises(UserError, match="max_rounds must be at least 1"):
        GroupChat([a], max_rounds=0)
