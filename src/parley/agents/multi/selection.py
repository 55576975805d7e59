"""Who speaks next in a group chat: @mentions first, then the chat's selection method.

- `@name` in the last message, naming a participant other than its speaker, picks them
  (the first such mention in the text);
- `round_robin`: the participant after the last speaker, in the chat's order;
- `random`: any participant, drawn from the chat's seedable generator (not the last speaker
  again unless `allow_repeat`);
- `manual`: a function of the chat returns the next speaker (a participant or a name; None
  ends the chat); it may be async;
- `auto`: a model picks through structured output (an enum of the names, their descriptions
  in the prompt); a pick that is no candidate falls back to round robin.
"""

from __future__ import annotations

import inspect
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

from parley.agents.agent import Agent
from parley.agents.multi._choose import choose
from parley.agents.multi.human import HumanParticipant
from parley.errors import UserError
from parley.messages import Msg
from parley.models.base import ChatModel

if TYPE_CHECKING:
    from parley.agents.multi.group import GroupChat

__all__ = [
    "SELECTION_INSTRUCTIONS",
    "ChatParticipant",
    "ManualSelector",
    "Selection",
    "mentioned",
    "pick_auto",
    "pick_manual",
    "pick_random",
    "round_robin",
]

ChatParticipant = Agent | HumanParticipant
"""Who takes part in a group chat: agents, and people (whose turn pauses the chat)."""

Selection = Literal["round_robin", "random", "manual", "auto"]
"""How a group chat picks the next speaker when no one is @mentioned."""

Picked = ChatParticipant | str | None

ManualSelector = Callable[["GroupChat"], Picked | Awaitable[Picked]]
"""Picks the next speaker from the chat's state: a participant, a name, or None to end."""

SELECTION_INSTRUCTIONS = (
    "You moderate a group conversation. Read it and pick who should speak next, so that "
    "the conversation moves towards its goal."
)


def mentioned(msg: Msg, participants: Sequence[ChatParticipant]) -> ChatParticipant | None:
    """The first participant `@name`d in `msg`'s text, other than its speaker."""
    others = {p.name: p for p in participants if p.name != msg.name}
    if not others or "@" not in msg.text:
        return None
    # Longest names first, so `@ann` does not win over `@anna`.
    names = "|".join(re.escape(n) for n in sorted(others, key=len, reverse=True))
    found = re.search(rf"(?<![\w@])@({names})(?![\w-])", msg.text)
    return others[found.group(1)] if found else None


def round_robin(
    participants: Sequence[ChatParticipant], last: ChatParticipant | None
) -> ChatParticipant:
    """The participant after `last` (the first when no one has spoken)."""
    if last is None or last not in participants:
        return participants[0]
    return participants[(participants.index(last) + 1) % len(participants)]


def _candidates(
    participants: Sequence[ChatParticipant], last: ChatParticipant | None, allow_repeat: bool
) -> list[ChatParticipant]:
    if allow_repeat or len(participants) == 1:
        return list(participants)
    return [p for p in participants if p is not last]


def pick_random(
    rng: random.Random,
    participants: Sequence[ChatParticipant],
    last: ChatParticipant | None,
    allow_repeat: bool,
) -> ChatParticipant:
    """A participant drawn by `rng` (not `last` again unless `allow_repeat`)."""
    return rng.choice(_candidates(participants, last, allow_repeat))


async def pick_manual(selector: ManualSelector, chat: GroupChat) -> ChatParticipant | None:
    """The speaker `selector` returns for `chat`.

    Raises:
        UserError: It returned a name or a participant that is not in the chat.
    """
    picked = selector(chat)
    if inspect.isawaitable(picked):
        picked = await picked
    if picked is None:
        return None
    name = picked if isinstance(picked, str) else picked.name
    found = chat.participant(name)
    if not isinstance(picked, str) and found is not picked:
        raise UserError(f"the selector picked {name!r}, who is not in the chat")
    return found


async def pick_auto(
    model: ChatModel,
    chat: GroupChat,
    allow_repeat: bool,
    instructions: str = SELECTION_INSTRUCTIONS,
) -> ChatParticipant:
    """The speaker `model` picks for `chat`; round robin when its pick is not valid."""
    candidates = _candidates(chat.participants, chat.last_speaker, allow_repeat)
    roster = {p.name: p.description for p in candidates}
    choice = await choose(model, roster, chat.messages, instructions=instructions, key="speaker")
    if choice.name is None:
        return round_robin(chat.participants, chat.last_speaker)
    return chat.participant(choice.name)
