"""Formatters turn parley messages into a provider's wire payload.

Each wire API ships two: a chat formatter (each message maps to the provider's own roles) and
a multi-agent formatter (other agents' turns folded into one user message that names them,
tool-call sequences kept native). `fold_other_agents` is the provider-neutral half of the
latter. It has two layouts (`HistoryLayout`): parley's `history` (a run of turns in one user
message, wrapped in `<history>` tags) and AgentScope's `entries` (one `[Name]: text` user
message per turn, as seed 004 shows AgentScope's formatter writing them).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal, get_args

from parley.errors import UserError
from parley.messages import Msg, TextBlock, ToolCallBlock

__all__ = [
    "Formatter",
    "HistoryLayout",
    "MultiAgentFormatter",
    "check_layout",
    "fold_other_agents",
    "tool_arguments",
]

HistoryLayout = Literal["history", "entries"]
"""How other agents' turns reach a model: `history`, runs of them in one user message inside
`<history>` tags (`name: text` lines); `entries`, one user message per turn, `[name]: text`
(AgentScope's layout)."""


def check_layout(layout: str) -> HistoryLayout:
    """`layout` if it is a `HistoryLayout`.

    Raises:
        UserError: It is not.
    """
    if layout not in get_args(HistoryLayout):
        raise UserError(f"unknown history layout {layout!r}; use 'history' or 'entries'")
    return layout  # type: ignore[return-value]


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


def fold_other_agents(
    msgs: Sequence[Msg], self_name: str | None = None, layout: HistoryLayout = "history"
) -> list[Msg]:
    """Fold turns of users and other agents into user messages that name the speakers.

    `history` (the default): each run of such turns becomes one user message whose text is
    the conversation wrapped in `<history>` tags, one `name: text` line per turn, media kept
    after the text. `entries`: each such turn becomes a user message of its own, its text
    `[name]: text`, its media after. Either way other agents' thinking is left out, and the
    model's own replies (`name == self_name`), system messages and tool-call sequences stay
    as they are.
    """
    folded: list[Msg] = []
    run: list[Msg] = []

    def flush() -> None:
        if not run:
            return
        if layout == "entries":
            folded.extend(_entry(m) for m in run)
            run.clear()
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


def _entry(msg: Msg) -> Msg:
    media = [b for b in msg.content if b.type not in ("text", "thinking")]
    text = TextBlock(text=f"[{_speaker(msg)}]: {msg.text}")
    return Msg(role="user", content=[text, *media])


def tool_arguments(call: ToolCallBlock) -> str:
    """A tool call's argument string: as the model wrote it, else the input as JSON."""
    return call.raw_input or json.dumps(call.input, ensure_ascii=False)


class MultiAgentFormatter(Formatter):
    """For several agents in one conversation: other agents' turns folded, then formatted.

    Consecutive turns of users and of other agents become one user message wrapped in
    `<history>` tags, one `name: text` line each (`fold_other_agents`); this model's own turns
    (`name == self_name`), system messages and tool-call sequences keep their native form.
    Each provider's multi-agent formatter is this with its chat formatter as the default.

    Args:
        self_name: The name this model's agent speaks under.
        formatter: Formats the folded messages; the provider's chat formatter by default.
        layout: `history` (one `<history>` user message per run of turns) or `entries`
            (AgentScope's: one `[name]: text` user message per turn).
    """

    def __init__(
        self,
        self_name: str | None = None,
        formatter: Formatter | None = None,
        *,
        layout: HistoryLayout = "history",
    ) -> None:
        self.self_name = self_name
        self.formatter = formatter or self.chat_formatter()
        self.layout: HistoryLayout = check_layout(layout)

    def chat_formatter(self) -> Formatter:
        """The provider's chat formatter, used when none is given.

        Raises:
            UserError: This is the generic class: give it the formatter to wrap.
        """
        raise UserError(f"{type(self).__name__} needs the chat formatter to wrap: formatter=...")

    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The provider's messages for `msgs`, other agents' turns folded."""
        return self.formatter.format(fold_other_agents(msgs, self.self_name, self.layout))
