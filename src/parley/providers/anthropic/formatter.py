"""Formatters for Anthropic's Messages API.

`AnthropicChatFormatter` maps each message to the Messages API's roles;
`AnthropicMultiAgentFormatter` first folds other agents' turns into one user message that
names them. Both return the messages with the leading system messages first, as
`{"role": "system", ...}` entries: `AnthropicChatModel` moves those to the request's
top-level `system` (see `split_system`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import json_repair

from parley.errors import MessageError
from parley.messages import (
    FileBlock,
    ImageBlock,
    MediaBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from parley.models.formatter import Formatter, MultiAgentFormatter
from parley.providers.anthropic import _media

__all__ = [
    "RAW_BLOCK",
    "AnthropicChatFormatter",
    "AnthropicMultiAgentFormatter",
    "split_system",
    "tool_input",
]

RAW_BLOCK = "anthropic_block"
"""The `ThinkingBlock.extra` key holding a content block parley has no class for, as the API
sent it (redacted thinking, server tool use and results, container uploads): the formatter
sends it back unchanged, as Anthropic asks for these blocks."""

Payload = dict[str, Any]

PROVIDER = "anthropic"
"""`ThinkingBlock.provider` of the blocks Claude made: the only ones whose signatures and raw
blocks go back."""


def tool_input(call: ToolCallBlock) -> dict[str, Any]:
    """A tool call's input as an object: parsed, or repaired from the raw argument text."""
    if call.input or not call.raw_input:
        return call.input
    repaired = json_repair.loads(call.raw_input)
    return repaired if isinstance(repaired, dict) else {}


def split_system(messages: list[Payload]) -> tuple[list[Payload], list[Payload]]:
    """`(system blocks, messages)`: the leading `system` entries' blocks, and the rest."""
    system: list[Payload] = []
    start = 0
    for entry in messages:
        if entry.get("role") != "system":
            break
        content = entry.get("content")
        if isinstance(content, str):
            system.append({"type": "text", "text": content})
        else:
            system.extend(content or ())
        start += 1
    return system, messages[start:]


def _text(block: TextBlock) -> Payload | None:
    # The API refuses empty text blocks.
    return {"type": "text", "text": block.text} if block.text else None


def _thinking(block: ThinkingBlock) -> Payload | None:
    if block.provider not in (None, PROVIDER):
        # Another provider's reasoning: its signature would fail Claude's check (a 400), and
        # Claude takes no unsigned thinking. Dropped.
        return None
    raw = (block.extra or {}).get(RAW_BLOCK)
    if isinstance(raw, dict):
        return raw
    if block.signature:
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    # Unsigned reasoning is refused by Claude: dropped.
    return None


def _media_block(block: Any) -> Payload:
    if isinstance(block, ImageBlock):
        return _media.image_block(block)
    if isinstance(block, FileBlock):
        return _media.document_block(block)
    if isinstance(block, MediaBlock):  # audio or video
        raise MessageError(f"Claude takes no {block.type} input; transcribe or describe it first")
    raise MessageError(f"a {block.type} block cannot be sent as message content")


def _tool_result(result: ToolResultBlock) -> Payload:
    entry: Payload = {"type": "tool_result", "tool_use_id": result.tool_call_id}
    if isinstance(result.output, str):
        if result.output:
            entry["content"] = result.output
    else:
        parts = [
            part
            for block in result.output
            if (part := _text(block) if isinstance(block, TextBlock) else _media_block(block))
        ]
        if parts:
            entry["content"] = parts
    if result.is_error:
        entry["is_error"] = True
    return entry


_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
"""Calls Anthropic's side runs; each is answered by a block naming it in `tool_use_id`."""


def _add(turns: list[tuple[str, list[Payload]]], role: str, blocks: list[Payload]) -> None:
    """Add a message's blocks: a turn of their own, or the previous one's if of the same role."""
    if not blocks:
        return
    if turns and turns[-1][0] == role:
        turns[-1][1].extend(blocks)
    else:
        turns.append((role, blocks))


def _settled(turns: list[tuple[str, list[Payload]]]) -> list[tuple[str, list[Payload]]]:
    """The turns with server tool calls left unanswered dropped where others follow them.

    A server tool's result follows its call in the same assistant turn. A turn that ended
    before it came (paused at `max_iters`, cancelled) may be sent back last, which continues
    it; followed by another message, the API refuses it (400, a call "without a
    corresponding result"), so the calls without results are dropped from it. Not when the
    turn also calls client tools: the API runs its server tools once their results are sent
    (Anthropic's server tools guide).
    """
    out: list[tuple[str, list[Payload]]] = []
    last = len(turns) - 1
    for position, (role, blocks) in enumerate(turns):
        followed = role == "assistant" and position < last
        _add(out, role, _answered(blocks) if followed else blocks)
    return out


def _answered(blocks: list[Payload]) -> list[Payload]:
    if any(block.get("type") == "tool_use" for block in blocks):
        return blocks
    answered = {block.get("tool_use_id") for block in blocks}
    return [b for b in blocks if b.get("type") not in _SERVER_CALLS or b.get("id") in answered]


class AnthropicChatFormatter(Formatter):
    """Messages to Messages API `messages` (leading system messages first, see the module).

    - Consecutive messages of one role are merged into one turn; messages left empty (an
      empty text, unsigned thinking) are dropped, as the API refuses empty content. A server
      tool call without its result (a paused or cancelled turn's last) is dropped when a
      message follows its turn (see `_settled`).
    - User turns: text, images (`image` blocks: URL, base64 or a local file read and
      inlined) and files (`document` blocks: PDFs by URL, base64 or file; text files
      inline).
    - Tool results (`tool` messages) go in the next user turn as `tool_result` blocks, ahead
      of its text, as the API requires; a tool's text and media become the result's content.
    - Assistant turns: text, `tool_use` blocks, thinking blocks with their signature (the API
      checks it; unsigned thinking, and thinking another provider made, are dropped), and
      the blocks kept raw in `ThinkingBlock.extra["anthropic_block"]` (redacted thinking,
      server tool blocks) as they came. Media in an assistant turn are refused (API version
      2026-10-21 answers 400 to a document there).
    - A system message after the first other message is sent in place as a `system` turn
      when `mid_conversation_system` is set (Claude Opus 4.8 and later take these: Anthropic's
      "mid-conversation system messages" guide); otherwise it goes in a user turn, wrapped in
      `<system>` tags. Message names are not sent (the API has none; the multi-agent
      formatter puts them in the text).

    Args:
        mid_conversation_system: Send later system messages as `system` turns.
    """

    def __init__(self, *, mid_conversation_system: bool = False) -> None:
        self.mid_conversation_system = mid_conversation_system

    def format(self, msgs: Sequence[Msg]) -> list[Payload]:
        """The Messages API messages for `msgs`, leading system messages first."""
        turns: list[tuple[str, list[Payload]]] = []
        leading = True
        for msg in msgs:
            role, blocks = self._turn(msg, leading)
            leading = leading and role == "system"
            _add(turns, role, blocks)
        return [{"role": role, "content": blocks} for role, blocks in _settled(turns)]

    def _turn(self, msg: Msg, leading: bool) -> tuple[str, list[Payload]]:
        if msg.role == "system":
            return self._system(msg, leading)
        if msg.role == "assistant":
            return "assistant", self._assistant(msg)
        if msg.role == "tool":
            return "user", [_tool_result(result) for result in msg.tool_results]
        return "user", self._user(msg)

    def _system(self, msg: Msg, leading: bool) -> tuple[str, list[Payload]]:
        if any(not isinstance(b, TextBlock) for b in msg.content):
            raise MessageError(
                "Claude takes only text in system messages; put media in a user turn"
            )
        if leading or self.mid_conversation_system:
            return "system", [p for b in msg.get_blocks("text") if (p := _text(b))]
        text = msg.text
        return "user", [{"type": "text", "text": f"<system>\n{text}\n</system>"}] if text else []

    def _user(self, msg: Msg) -> list[Payload]:
        parts: list[Payload] = []
        for block in msg.content:
            if isinstance(block, TextBlock):
                if part := _text(block):
                    parts.append(part)
            else:
                parts.append(_media_block(block))
        return parts

    def _assistant(self, msg: Msg) -> list[Payload]:
        parts: list[Payload] = []
        for block in msg.content:
            if isinstance(block, TextBlock):
                part = _text(block)
            elif isinstance(block, ThinkingBlock):
                part = _thinking(block)
            elif isinstance(block, ToolCallBlock):
                part = {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": tool_input(block),
                }
            else:
                raise MessageError(
                    f"Claude takes no {block.type} block in an assistant turn; "
                    "put media in a user turn"
                )
            if part is not None:
                parts.append(part)
        return parts


class AnthropicMultiAgentFormatter(MultiAgentFormatter):
    """For several agents in one conversation: other agents' turns folded, then formatted.

    See `parley.models.formatter.MultiAgentFormatter`; the default inner formatter is
    an `AnthropicChatFormatter`.
    """

    def chat_formatter(self) -> Formatter:
        """An `AnthropicChatFormatter`, used when none is given."""
        return AnthropicChatFormatter()
