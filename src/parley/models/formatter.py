"""Formatters turn parley messages into a provider's wire payload.

Each wire API ships two: a chat formatter (each message maps to the provider's own roles) and
a multi-agent formatter (other agents' turns folded into one user message that names them,
tool-call sequences kept native). `fold_other_agents` is the provider-neutral half of the
latter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from parley.messages import Msg, TextBlock

__all__ = ["Formatter", "fold_other_agents"]


class Formatter(ABC):
    """Turns a list of messages into a provider's list of message payloads."""

    @abstractmethod
    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The provider's messages for `msgs`."""


def _speaker(msg: Msg) -> str:
    return msg.name or msg.role


def _is_plain_turn(msg: Msg, self_name: str | None) -> bool:
    """A turn to fold: a user turn or another agent's reply that holds no tool traffic."""
    if msg.role in {"system", "tool"} or msg.tool_calls:
        return False
    return not (msg.role == "assistant" and self_name is not None and msg.name == self_name)


def fold_other_agents(msgs: Sequence[Msg], self_name: str | None = None) -> list[Msg]:
    """Fold consecutive turns of users and other agents into one user message with names.

    Each run of such turns becomes one user message whose text is the conversation wrapped in
    `<history>` tags, one `name: text` line per turn, media kept after the text (other
    agents' thinking left out). The model's own replies (`name == self_name`), system
    messages and tool-call sequences stay as they are.
    """
    folded: list[Msg] = []
    run: list[Msg] = []

    def flush() -> None:
        if not run:
            return
        lines = [f"{_speaker(m)}: {m.text}" for m in run]
        # Other agents' thinking stays theirs: a user turn cannot hold it (role rules).
        media = [b for m in run for b in m.content if b.type not in ("text", "thinking")]
        text = "<history>\n" + "\n".join(lines) + "\n</history>"
        folded.append(Msg(role="user", content=[TextBlock(text=text), *media]))
        run.clear()

    for msg in msgs:
        if _is_plain_turn(msg, self_name):
            run.append(msg)
            continue
        flush()
        folded.append(msg)
    flush()
    return folded
