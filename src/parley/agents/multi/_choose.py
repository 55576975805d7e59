"""A model picks one name from a list, through structured output (routers, group chats)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parley.agents.multi.formatting import observable
from parley.errors import ModelOutputError
from parley.messages import Msg
from parley.models.base import ChatModel
from parley.models.formatter import fold_other_agents
from parley.models.response import ChatUsage

__all__ = ["Choice", "choice_prompt", "choice_schema", "choose"]


@dataclass(frozen=True)
class Choice:
    """What the model picked: `name` is None when its answer was not one of the names."""

    name: str | None
    reason: str | None = None
    usage: ChatUsage = field(default_factory=ChatUsage)


def choice_schema(names: Sequence[str], key: str) -> dict[str, Any]:
    """A JSON schema whose `key` is one of `names` (an enum), with an optional reason."""
    return {
        "type": "object",
        "description": "Pick who answers next.",
        "properties": {
            key: {"type": "string", "enum": list(names), "description": "The chosen name."},
            "reason": {"type": "string", "description": "Why, in one short sentence."},
        },
        "required": [key],
    }


def _roster(candidates: Mapping[str, str]) -> str:
    return "\n".join(
        f"- {name}: {about or '(no description)'}" for name, about in candidates.items()
    )


def choice_prompt(
    candidates: Mapping[str, str], conversation: Sequence[Msg], instructions: str, key: str
) -> list[Msg]:
    """The messages that ask for a choice: the roster, the conversation folded, the question.

    The conversation is folded into one user message naming each speaker (tool traffic and
    thinking left out), so any model reads it the same way.
    """
    seen = [m for msg in conversation if (m := observable(msg)) is not None]
    names = ", ".join(candidates)
    question = f"Choose who should answer next. Set `{key}` to exactly one of: {names}."
    return [
        Msg.system(f"{instructions}\n\nThe candidates:\n{_roster(candidates)}"),
        *fold_other_agents(seen),
        Msg.user(question),
    ]


async def choose(
    model: ChatModel,
    candidates: Mapping[str, str],
    conversation: Sequence[Msg],
    *,
    instructions: str,
    key: str = "agent",
) -> Choice:
    """Ask `model` to pick one of `candidates` (names to descriptions).

    A single candidate is picked without asking. An answer that is no candidate (after the
    correction `generate_structured_output` makes) gives `Choice(None)`; a model that fails
    raises as usual.
    """
    names = list(candidates)
    if len(names) == 1:
        return Choice(names[0])
    prompt = choice_prompt(candidates, conversation, instructions, key)
    try:
        answer = await model.generate_structured_output(prompt, choice_schema(names, key))
    except ModelOutputError:
        return Choice(None)
    picked = answer.content.get(key)
    reason = answer.content.get("reason")
    return Choice(
        picked if picked in candidates else None,
        reason if isinstance(reason, str) else None,
        answer.usage,
    )
