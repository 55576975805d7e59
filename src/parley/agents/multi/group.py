"""`GroupChat`: agents (and people) take turns in one conversation.

Each turn, a speaker is picked (see `parley.agents.multi.selection`: an `@name` in the last
message first, then round robin, random, manual or auto selection) and speaks; everything
said is broadcast to every participant through a `MsgHub`, so each agent answers from its
own memory with nothing more passed in. The chat ends after `max_rounds` turns of a run,
when the stop condition holds for the conversation, or when a manual selector picks no one.

A `HumanParticipant`'s turn pauses the chat, as does an agent's tool call that needs
approval: `run()` returns a paused result (and `stream()` ends with `ChatPaused`) naming who
it waits for, and `resume(...)` goes on::

    chat = GroupChat([planner, critic, HumanParticipant("ann")], max_rounds=6)
    result = await chat.run("Plan a weekend in Lisbon.")   # planner, critic, then ann...
    assert result.status == "paused" and result.waiting_for == "ann"
    result = await chat.resume("Add a day trip to Sintra, @critic.")

`run()` again, after a chat ended, continues the same conversation with a new task and a
new round count.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from parley._sync import iterate_sync, run_sync
from parley.agents.agent import Agent, AgentInput
from parley.agents.agent import _as_msgs as as_msgs  # the agents' own input rules
from parley.agents.approval import PendingApproval
from parley.agents.multi.events import (
    ChatEnded,
    ChatMessage,
    ChatPaused,
    EndReason,
    GroupChatEvent,
    SelectionMethod,
    SpeakerSelected,
)
from parley.agents.multi.formatting import observable
from parley.agents.multi.hub import MsgHub
from parley.agents.multi.human import HumanParticipant
from parley.agents.multi.selection import (
    SELECTION_INSTRUCTIONS,
    ChatParticipant,
    ManualSelector,
    Selection,
    mentioned,
    pick_auto,
    pick_manual,
    pick_random,
    round_robin,
)
from parley.agents.run import AgentRun
from parley.errors import UserError
from parley.messages import Msg
from parley.models.base import ChatModel
from parley.models.formatter import HistoryLayout

__all__ = ["ChatStatus", "GroupChat", "GroupChatResult", "StopCondition"]

ChatStatus = Literal["idle", "running", "paused", "finished"]
"""Where a chat is: not started (or stopped early), under way, waiting, or ended."""

StopCondition = Callable[[Sequence[Msg]], bool]
"""Ends the chat when true of the conversation (checked after each turn)."""

Approval = bool | Mapping[str, bool]


@dataclass
class GroupChatResult:
    """How a run of the chat went.

    Attributes:
        status: `paused` (see `waiting_for`) or `finished` (see `reason`).
        messages: The whole conversation, oldest first: tasks, replies, people's words.
        rounds: Turns taken in this run.
        reason: Why it finished.
        waiting_for: Whose turn it paused on.
        interrupt_id: The approval it waits for, when an agent's tool call needs one.
    """

    status: Literal["paused", "finished"]
    messages: list[Msg] = field(default_factory=list)
    rounds: int = 0
    reason: EndReason | None = None
    waiting_for: str | None = None
    interrupt_id: str | None = None

    @property
    def last(self) -> Msg | None:
        """The conversation's last message."""
        return self.messages[-1] if self.messages else None


def _unique(participants: Sequence[ChatParticipant]) -> list[ChatParticipant]:
    if not participants:
        raise UserError("a group chat needs at least one participant")
    names = [p.name for p in participants]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"participant names must be unique; repeated: {', '.join(twice)}")
    return list(participants)


class GroupChat:
    """Participants take turns in one conversation; see the module docstring.

    Args:
        participants: Agents and `HumanParticipant`s, names unique, in round-robin order.
        selection: `round_robin`, `random`, `manual` (needs `selector`) or `auto` (needs
            `selector_model`), used when the last message @mentions no one.
        max_rounds: Most turns in one run (`run`, then its resumes).
        selector: For `manual`: a function of the chat returning the next speaker (or None
            to end), sync or async.
        selector_model: For `auto`: the model that picks the next speaker.
        seed: Seeds `random` selection, for a repeatable order.
        allow_repeat: Let `random` and `auto` pick the last speaker again.
        mentions: Let an `@name` in the last message pick the next speaker.
        stop_condition: Ends the chat when it returns true for the conversation.
        instructions: What the `auto` selector model is told, before the participant list.
        multi_agent_format: Switch agents' models to multi-agent formatting: True or a
            `HistoryLayout` (`"history"`, `"entries"`), see `MsgHub`; False: off.
    """

    def __init__(
        self,
        participants: Sequence[ChatParticipant],
        selection: Selection = "round_robin",
        max_rounds: int = 10,
        *,
        selector: ManualSelector | None = None,
        selector_model: ChatModel | None = None,
        seed: int | None = None,
        allow_repeat: bool = False,
        mentions: bool = True,
        stop_condition: StopCondition | None = None,
        instructions: str = SELECTION_INSTRUCTIONS,
        multi_agent_format: bool | HistoryLayout = True,
    ) -> None:
        self._check_selection(selection, selector, selector_model, max_rounds)
        self.participants = _unique(participants)
        self.selection: Selection = selection
        self.max_rounds = max_rounds
        self.selector = selector
        self.selector_model = selector_model
        self.rng = random.Random(seed)  # not for security: a repeatable speaking order
        self.allow_repeat = allow_repeat
        self.mentions = mentions
        self.stop_condition = stop_condition
        self.instructions = instructions
        self.hub = MsgHub(self.participants, multi_agent_format=multi_agent_format)
        self.messages: list[Msg] = []
        """The whole conversation, oldest first."""
        self.status: ChatStatus = "idle"
        self.rounds = 0
        self.last_speaker: ChatParticipant | None = None
        self.reason: EndReason | None = None
        self.error: Exception | None = None
        self.waiting_for: ChatParticipant | None = None
        self.pending: PendingApproval | None = None

    @staticmethod
    def _check_selection(
        selection: str,
        selector: ManualSelector | None,
        selector_model: ChatModel | None,
        max_rounds: int,
    ) -> None:
        if selection not in ("round_robin", "random", "manual", "auto"):
            raise UserError(f"unknown selection {selection!r}: round_robin, random, manual or auto")
        if selection == "manual" and selector is None:
            raise UserError("manual selection needs a selector function")
        if selection == "auto" and selector_model is None:
            raise UserError("auto selection needs a selector_model")
        if max_rounds < 1:
            raise UserError(f"max_rounds must be at least 1, got {max_rounds}")

    def __repr__(self) -> str:
        names = [p.name for p in self.participants]
        return f"GroupChat({names}, selection={self.selection!r}, status={self.status!r})"

    def participant(self, name: str) -> ChatParticipant:
        """The participant called `name`.

        Raises:
            UserError: No participant has that name.
        """
        for participant in self.participants:
            if participant.name == name:
                return participant
        names = ", ".join(p.name for p in self.participants)
        raise UserError(f"no participant named {name!r} in the chat (participants: {names})")

    def result(self) -> GroupChatResult:
        """Where the chat stands, as `run` and `resume` return it."""
        pending = self.pending
        return GroupChatResult(
            status="paused" if self.status == "paused" else "finished",
            messages=list(self.messages),
            rounds=self.rounds,
            reason=self.reason,
            waiting_for=self.waiting_for.name if self.waiting_for else None,
            interrupt_id=pending.interrupt_id if pending else None,
        )

    # -- entry points ------------------------------------------------------------------------------

    def stream(self, task: AgentInput = None) -> AsyncGenerator[GroupChatEvent, None]:
        """Start a run with `task` (broadcast first) and iterate its events.

        Raises:
            UserError: The chat is running, or paused (resume it instead).
        """
        if self.status in ("running", "paused"):
            hint = ": resume it" if self.status == "paused" else ""
            raise UserError(f"the chat is {self.status}{hint}")
        return self._events(as_msgs(task), None)

    async def run(self, task: AgentInput = None) -> GroupChatResult:
        """Run the chat with `task` until it pauses or ends.

        Raises:
            UserError: The chat is running or paused.
            ModelError: An agent's model failed (the chat ends with reason `error`).
        """
        return await self._result(self.stream(task))

    def resume_stream(
        self, message: str | Msg | None = None, *, approved: Approval | None = None
    ) -> AsyncGenerator[GroupChatEvent, None]:
        """Go on with a paused chat and iterate its events.

        Args:
            message: The words of the person the chat waits for.
            approved: When it waits for approval: one verdict for every awaiting call, or
                one per call id (see `Agent.resume`).

        Raises:
            UserError: The chat is not paused, or not given what it waits for.
        """
        self._check_resumable(message, approved)
        return self._events([], (message, approved))

    async def resume(
        self, message: str | Msg | None = None, *, approved: Approval | None = None
    ) -> GroupChatResult:
        """Go on with a paused chat until it pauses again or ends; see `resume_stream`."""
        return await self._result(self.resume_stream(message, approved=approved))

    def _check_resumable(self, message: str | Msg | None, approved: Approval | None) -> None:
        if self.status != "paused" or self.waiting_for is None:
            raise UserError(f"the chat is {self.status}, not paused: nothing to resume")
        who = self.waiting_for.name
        if self.pending is not None and (approved is None or message is not None):
            raise UserError(f"the chat waits for approval of {who}'s tool calls: pass approved=")
        if self.pending is None and (message is None or approved is not None):
            raise UserError(f"the chat waits for {who} to speak: pass their message")

    async def _result(self, events: AsyncGenerator[GroupChatEvent, None]) -> GroupChatResult:
        async with contextlib.aclosing(events):
            async for _ in events:
                pass
        if self.error is not None:
            raise self.error
        return self.result()

    # -- sync twins --------------------------------------------------------------------------------

    def run_sync(self, task: AgentInput = None) -> GroupChatResult:
        """`run`, from synchronous code."""
        return run_sync(self.run(task))

    def stream_sync(self, task: AgentInput = None) -> Iterator[GroupChatEvent]:
        """`stream`, from synchronous code; closing the iterator stops the chat."""
        return iterate_sync(self.stream(task))

    def resume_sync(
        self, message: str | Msg | None = None, *, approved: Approval | None = None
    ) -> GroupChatResult:
        """`resume`, from synchronous code."""
        return run_sync(self.resume(message, approved=approved))

    def resume_stream_sync(
        self, message: str | Msg | None = None, *, approved: Approval | None = None
    ) -> Iterator[GroupChatEvent]:
        """`resume_stream`, from synchronous code."""
        return iterate_sync(self.resume_stream(message, approved=approved))

    # -- the run -----------------------------------------------------------------------------------

    async def _events(
        self, task: list[Msg], resume: tuple[str | Msg | None, Approval | None] | None
    ) -> AsyncGenerator[GroupChatEvent, None]:
        self._begin(fresh=resume is None)
        try:
            async with self.hub:
                if resume is None:
                    for msg in task:
                        yield await self._say(msg)
                else:
                    async with contextlib.aclosing(self._resumed_turn(*resume)) as resumed:
                        async for event in resumed:
                            yield event
                async with contextlib.aclosing(self._turns()) as turns:
                    async for event in turns:
                        yield event
        finally:
            if self.status == "running":  # the consumer stopped early
                self.status = "idle"

    def _begin(self, *, fresh: bool) -> None:
        self.status = "running"
        self.error = None
        if fresh:
            self.rounds = 0
            self.reason = None

    async def _say(self, msg: Msg) -> ChatMessage:
        """A message from outside the agents' runs: everyone observes it."""
        await self.hub.broadcast(msg)
        self.messages.append(msg)
        return ChatMessage(msg=msg)

    async def _turns(self) -> AsyncGenerator[GroupChatEvent, None]:
        while self.status == "running":
            if self.rounds >= self.max_rounds:
                yield self._end("max_rounds")
                return
            speaker, method = await self._next_speaker()
            if speaker is None:
                yield self._end("no_speaker")
                return
            self.last_speaker = speaker
            yield SpeakerSelected(speaker=speaker.name, round=self.rounds + 1, method=method)
            if isinstance(speaker, HumanParticipant):
                yield self._pause(speaker)
                return
            async with contextlib.aclosing(self._agent_turn(speaker, speaker.stream())) as turn:
                async for event in turn:
                    yield event

    async def _next_speaker(self) -> tuple[ChatParticipant | None, SelectionMethod]:
        if self.mentions and self.messages:
            named = mentioned(self.messages[-1], self.participants)
            if named is not None:
                return named, "mention"
        last = self.last_speaker
        if self.selection == "random":
            return pick_random(self.rng, self.participants, last, self.allow_repeat), "random"
        if self.selection == "manual":
            assert self.selector is not None  # checked on construction
            return await pick_manual(self.selector, self), "manual"
        if self.selection == "auto":
            assert self.selector_model is not None  # checked on construction
            model = self.selector_model
            return await pick_auto(model, self, self.allow_repeat, self.instructions), "auto"
        return round_robin(self.participants, last), "round_robin"

    async def _agent_turn(
        self, agent: Agent, run: AgentRun
    ) -> AsyncGenerator[GroupChatEvent, None]:
        # The hub broadcasts the answer as the run ends; this keeps the chat's record.
        async with run:
            async for event in run:
                yield event
        if run.status == "awaiting_approval":
            self.pending = run.pending
            yield self._pause(agent)
        elif run.status in ("completed", "max_iters"):
            shared = observable(run.final) if run.final is not None else None
            async with contextlib.aclosing(self._after_turn(shared)) as after:
                async for chat_event in after:
                    yield chat_event
        else:
            self.error = run.error
            yield self._end("error")

    async def _resumed_turn(
        self, message: str | Msg | None, approved: Approval | None
    ) -> AsyncGenerator[GroupChatEvent, None]:
        speaker, pending = self.waiting_for, self.pending
        self.waiting_for = self.pending = None
        if isinstance(speaker, Agent) and pending is not None and approved is not None:
            turn = self._agent_turn(speaker, speaker.resume_stream(pending, approved))
        elif isinstance(speaker, HumanParticipant) and message is not None:
            msg = speaker.message(message)
            await self.hub.broadcast(msg)
            turn = self._after_turn(msg)
        else:  # pragma: no cover - _check_resumable rules it out
            return
        async with contextlib.aclosing(turn) as events:
            async for event in events:
                yield event

    async def _after_turn(self, msg: Msg | None) -> AsyncGenerator[GroupChatEvent, None]:
        self.rounds += 1
        if msg is not None:
            self.messages.append(msg)
            yield ChatMessage(msg=msg)
        if self.stop_condition is not None and self.stop_condition(self.messages):
            yield self._end("stopped")

    def _pause(self, speaker: ChatParticipant) -> ChatPaused:
        self.status = "paused"
        self.waiting_for = speaker
        interrupt = self.pending.interrupt_id if self.pending else None
        return ChatPaused(waiting_for=speaker.name, interrupt_id=interrupt)

    def _end(self, reason: EndReason) -> ChatEnded:
        self.status = "finished"
        self.reason = reason
        return ChatEnded(reason=reason, rounds=self.rounds)
