"""Which Qwen messages make one `Msg`, and which function call each function result answers.

Qwen-Agent spreads one model response over several assistant messages, one concern each and
in this order: the reasoning, the text, then one message per function call. Consecutive
assistant messages (of the same `name`) that keep to that order form one response, hence one
assistant `Msg`; consecutive function messages form one tool `Msg`. A message whose `extra`
holds parley's record (`extra["parley"]`) always starts a new `Msg`: that is how a conversion
from `Msg`s marks where each message began.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parley.compat.qwen.schema import ASSISTANT, FUNCTION, Message

__all__ = [
    "FID",
    "KEY",
    "Context",
    "Tracker",
    "continues",
    "generated_call_id",
    "has_record",
    "parts",
]

KEY = "parley"
"""The reserved key, in a Qwen message's `extra` and in a `Msg`'s `metadata`."""

FID = "function_id"
"""Qwen-Agent's key pairing a function call with its result, in `extra`."""

_STAGE = {"r": 0, "c": 1, "f": 2}


def parts(message: Message) -> str:
    """What a message holds, in stage order: `r`easoning, `c`ontent, a `f`unction call.

    A message holding none of them is an (empty) content message.
    """
    found = ""
    if message.reasoning_content is not None:
        found += "r"
    if message.content or (message.function_call is None and not found):
        found += "c"
    if message.function_call is not None:
        found += "f"
    return found


def has_record(message: Message) -> bool:
    """Whether the message carries parley's record, which starts a new `Msg`."""
    return message.extra is not None and KEY in message.extra


def continues(previous: Message, message: Message) -> bool:
    """Whether `message` belongs to the same `Msg` as `previous`, the message before it."""
    if has_record(message):
        return False
    if message.role == FUNCTION:
        return previous.role == FUNCTION
    if message.role != ASSISTANT or previous.role != ASSISTANT or message.name != previous.name:
        return False
    before, now = parts(previous), parts(message)
    # Stages strictly increase, except that calls follow calls.
    return _STAGE[now[0]] > _STAGE[before[-1]] or (now == "f" and before[-1] == "f")


def generated_call_id(index: int) -> str:
    """The id given to the function call at `index` in the Qwen list when it has none.

    Derived from the position so that converting the same list twice gives the same ids, and
    recognised on the way back so that it is not written out as a `function_id`.
    """
    return f"call_qwen_{index}"


@dataclass
class _Call:
    id: str
    name: str
    explicit: bool  # the Qwen message gave a function_id (rather than a generated one)


@dataclass
class Tracker:
    """The function calls not answered yet, in order, to pair function results with them."""

    pending: list[_Call] = field(default_factory=list)

    def copy(self) -> Tracker:
        """A copy, to try a conversion without changing this one."""
        return Tracker(list(self.pending))

    def add(self, call_id: str, name: str, *, explicit: bool) -> None:
        """Record a call."""
        self.pending.append(_Call(call_id, name, explicit))

    def answer(self, function_id: str | None, name: str | None) -> tuple[str, str] | None:
        """Pair a function result with a pending call; return the call's `(id, name)`.

        A result with a `function_id` answers the pending call with that id; failing that, a
        pending call that had no id (Qwen-Agent answers those with its default id `"1"`),
        preferring one of the same name; failing that, a call made before this list began,
        so None is returned. A result without a `function_id` answers the first pending call
        of its name, or else the first pending call; None when there is none.
        """
        index = self._find(function_id, name)
        if index is None:
            return None
        call = self.pending.pop(index)
        return call.id, call.name

    def _find(self, function_id: str | None, name: str | None) -> int | None:
        candidates = list(enumerate(self.pending))
        if function_id is not None:
            for index, call in candidates:
                if call.explicit and call.id == function_id:
                    return index
            candidates = [(i, call) for i, call in candidates if not call.explicit]
        for index, call in candidates:
            if call.name == name:
                return index
        return candidates[0][0] if candidates else None


@dataclass
class Context:
    """Where a group of Qwen messages sits in its list, for either direction.

    `index` is the position of the group's first message, `previous` the message before it,
    `tracker` the calls still waiting for results.
    """

    index: int
    previous: Message | None
    tracker: Tracker

    def trial(self) -> Context:
        """The same place with a copied tracker, to try a conversion."""
        return Context(self.index, self.previous, self.tracker.copy())
