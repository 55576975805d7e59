"""`MsgHub`: agents that hear each other (AgentScope's MsgHub).

Inside `async with MsgHub([alice, bob, carol]) as hub:`, every answer a participant's run
ends with is observed by all the others: added to their memories as it is (an assistant
message carrying the speaker's name), without its thinking and tool traffic. So each agent
can be asked in turn with no input at all::

    async with MsgHub([alice, bob], announcement="Discuss: tabs or spaces?"):
        await alice.reply()
        await bob.reply()     # bob's memory holds the announcement and alice's answer

On entering, each agent's model is switched to multi-agent formatting (the others' turns
folded into a user message naming them; see `parley.agents.multi.formatting`), and the
announcement is broadcast. `hub.broadcast(msg)` hands anything to everyone; `add` and
`remove` change who is in, also while the hub is open. Participants take turns: an answer
observed while the observer is in the middle of its own run lands inside that run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Self

from parley._sync import run_sync
from parley.agents.agent import Agent
from parley.agents.multi.formatting import observable, use_multi_agent_formatting
from parley.agents.multi.human import Participant
from parley.errors import UserError
from parley.messages import Msg
from parley.models.formatter import HistoryLayout, check_layout

__all__ = ["Announcement", "MsgHub"]

Announcement = str | Msg | Sequence[Msg] | None
"""What a hub says on opening: text (a user message), a message, several, or nothing."""


def _as_list(items: Participant | Iterable[Participant]) -> list[Participant]:
    if isinstance(items, Iterable):
        return list(items)
    return [items]


def _announcement(announcement: Announcement) -> list[Msg]:
    if announcement is None:
        return []
    if isinstance(announcement, str):
        return [Msg.user(announcement)]
    if isinstance(announcement, Msg):
        return [announcement]
    return list(announcement)


class MsgHub:
    """A broadcast hub: while it is open, each participant's answers reach all the others.

    Args:
        participants: Agents (and `HumanParticipant`s), names unique.
        announcement: Broadcast to everyone on entering.
        auto_broadcast: Broadcast each agent's answers (off: only `broadcast` does).
        multi_agent_format: Switch each agent's model to multi-agent formatting on entering:
            True or `"history"` (others' turns in a `<history>` block), `"entries"`
            (AgentScope's layout: one `[name]: text` user message per turn), False: off.
    """

    def __init__(
        self,
        participants: Iterable[Participant],
        announcement: Announcement = None,
        *,
        auto_broadcast: bool = True,
        multi_agent_format: bool | HistoryLayout = True,
    ) -> None:
        if isinstance(multi_agent_format, str):
            check_layout(multi_agent_format)
        self._participants: list[Participant] = []
        self.announcement = _announcement(announcement)
        self.auto_broadcast = auto_broadcast
        self.multi_agent_format = multi_agent_format
        self._open = False
        self.add(participants)

    def __repr__(self) -> str:
        return f"MsgHub({[p.name for p in self._participants]})"

    @property
    def participants(self) -> list[Participant]:
        """Who is in the hub, in the order they joined."""
        return list(self._participants)

    @property
    def is_open(self) -> bool:
        """Whether the hub is entered (answers are being broadcast)."""
        return self._open

    # -- membership --------------------------------------------------------------------------------

    def add(self, participants: Participant | Iterable[Participant]) -> None:
        """Let participants in (listening at once when the hub is open).

        Raises:
            UserError: A name already in the hub.
        """
        for participant in _as_list(participants):
            if any(p.name == participant.name for p in self._participants):
                raise UserError(f"the hub already has a participant named {participant.name!r}")
            self._participants.append(participant)
            if self._open:
                self._join(participant)

    def remove(self, participants: Participant | Iterable[Participant]) -> None:
        """Let participants out; one not in the hub is ignored."""
        for participant in _as_list(participants):
            if participant in self._participants:
                self._participants.remove(participant)
                if self._open:
                    self._leave(participant)

    def _join(self, participant: Participant) -> None:
        if not isinstance(participant, Agent):
            return
        if self.multi_agent_format:
            layout = "history" if self.multi_agent_format is True else self.multi_agent_format
            use_multi_agent_formatting(participant, layout)
        if self.auto_broadcast:
            participant.reply_listeners.append(self._on_reply)

    def _leave(self, participant: Participant) -> None:
        if isinstance(participant, Agent) and self._on_reply in participant.reply_listeners:
            participant.reply_listeners.remove(self._on_reply)

    # -- opening and closing -----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._open:
            raise UserError("this hub is open already")
        self._open = True
        for participant in self._participants:
            self._join(participant)
        if self.announcement:
            await self.broadcast(self.announcement)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for participant in self._participants:
            self._leave(participant)
        self._open = False

    def __enter__(self) -> Self:
        return run_sync(self.__aenter__())

    def __exit__(self, *exc_info: object) -> None:
        run_sync(self.__aexit__(*exc_info))

    # -- broadcasting ------------------------------------------------------------------------------

    async def broadcast(
        self, msgs: Msg | Sequence[Msg], *, exclude: Iterable[Participant] = ()
    ) -> None:
        """Have every participant (but those in `exclude`) observe `msgs`."""
        skipped = list(exclude)
        for participant in list(self._participants):
            if not any(participant is s for s in skipped):
                await participant.observe(msgs)

    def broadcast_sync(
        self, msgs: Msg | Sequence[Msg], *, exclude: Iterable[Participant] = ()
    ) -> None:
        """`broadcast`, from synchronous code."""
        run_sync(self.broadcast(msgs, exclude=exclude))

    async def _on_reply(self, agent: Agent, msg: Msg) -> None:
        """An agent's answer: the others observe what can be shared of it."""
        shared = observable(msg)
        if shared is not None and any(p is agent for p in self._participants):
            await self.broadcast(shared, exclude=[agent])
