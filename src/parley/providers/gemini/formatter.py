"""Formatters for Gemini's `contents`: roles `user` and `model`, content in parts.

`GeminiChatFormatter` maps each message to a `Content`; `GeminiMultiAgentFormatter` first
folds other agents' turns into one user message that names them. Gemini has no system role
in `contents`: system messages come out as `{"role": "system", "parts": [...]}` entries, which
`GeminiChatModel` lifts into the request's `systemInstruction` (`split_system`).

Thought signatures (Gemini API guide, "Thought signatures") belong to parts: a thought part,
a function-call part (the first call of a step), or a text part (often the last one, or an
empty text part at the end of a stream). parley keeps them on thinking blocks:

- a thought part's own signature is the `ThinkingBlock`'s `signature`;
- the signature of a function-call or text part travels in the `extra` of a thinking block
  just before it (`extra={"gemini_part_signature": ...}`, most often with no thinking text),
  and is put back on the part that follows when the turn is sent again.

Thinking another provider made (`ThinkingBlock.provider`) is not sent: its signature is
no thought signature. A model turn another model wrote has no signatures of Gemini's, which
Gemini 3 requires on function calls: `fill_missing_signatures` (on for Gemini 3 models)
gives its first call Google's documented placeholder, `skip_thought_signature_validator`.

Signed parts are never merged with others, as Google's guide asks. A streamed thought run
(several thought parts, the last one signed) comes back as one thought part with the run's
text and signature: parley's accumulator joins a run into one thinking block.

Function calls and responses carry the call's `id` only when the API gave one (Gemini 3
does, and matches each response to its call by it). The id parley makes for a call that
came without one (`new_call_id`) is not sent: Gemini then matches responses to calls by
order and name, and an endpoint whose schema has no `id` (seen on Vertex AI, on the Gemini
API's `v1` and on proxies) refuses the field with a 400, `Unknown name "id"`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from parley.errors import MessageError
from parley.messages import (
    MediaBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from parley.models.formatter import Formatter, MultiAgentFormatter
from parley.providers.gemini._media import media_part

__all__ = [
    "PART_SIGNATURE",
    "GeminiChatFormatter",
    "GeminiMultiAgentFormatter",
    "split_system",
]

PART_SIGNATURE = "gemini_part_signature"
"""The `ThinkingBlock.extra` key holding the thought signature of the part that follows."""

PROVIDER = "gemini"
"""`ThinkingBlock.provider` of the blocks Gemini made: the only ones whose signatures go back."""

_MADE_ID = re.compile(r"call_[0-9a-f]{32}")
"""The form of the ids parley makes for calls that came without one (`new_call_id`)."""


def split_system(contents: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[Any]]:
    """`(systemInstruction, contents)`: every `system` entry's parts joined, the rest as is."""
    system = [part for c in contents if c.get("role") == "system" for part in c["parts"]]
    if not system:
        return None, contents
    rest = [c for c in contents if c.get("role") != "system"]
    return {"parts": system}, rest


def _with_id(call_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` led by `id` when the id is the API's; as they are when parley made it."""
    return fields if _MADE_ID.fullmatch(call_id) else {"id": call_id, **fields}


def _arguments(call: ToolCallBlock) -> dict[str, Any]:
    """The call's arguments as an object: Gemini takes `args` as JSON, not a string."""
    if call.input or not call.raw_input:
        return call.input
    try:
        parsed = json.loads(call.raw_input)
    except ValueError:
        parsed = None
    # Arguments that never parsed go back as the model wrote them, so it sees its mistake.
    return parsed if isinstance(parsed, dict) else {"raw_arguments": call.raw_input}


class _Turn:
    """The parts of one model turn, with the signature waiting for the next part."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.signature: str | None = None

    def add(self, part: dict[str, Any]) -> None:
        if self.signature is not None:
            part["thoughtSignature"] = self.signature
            self.signature = None
        self.parts.append(part)

    def thinking(self, block: ThinkingBlock) -> None:
        if block.provider not in (None, PROVIDER):
            # Another provider's reasoning: its signature is no thought signature (Gemini
            # answers 400), and a thought part without one is Gemini's own to write. Dropped.
            return
        if block.thinking or block.signature:
            # Thought text, or an empty thought part that carries the run's signature.
            part: dict[str, Any] = {"text": block.thinking, "thought": True}
            if block.signature:
                part["thoughtSignature"] = block.signature
            self.parts.append(part)
        following = (block.extra or {}).get(PART_SIGNATURE)
        if isinstance(following, str) and following:
            self.signature = following

    def close(self) -> list[dict[str, Any]]:
        if self.signature is not None:
            # The signature came on an empty text part (the end of a stream): sent back so.
            self.parts.append({"text": "", "thoughtSignature": self.signature})
            self.signature = None
        return self.parts


class GeminiChatFormatter(Formatter):
    """Messages to Gemini `contents`, one `Content` per run of messages of the same role.

    - `user` messages are `user` contents; text as text parts, media as `inlineData` (base64
      data, local files read) or `fileData` (`http(s)` URLs: Files API, YouTube, public).
    - `assistant` messages are `model` contents: thinking as thought parts (`thought: true`),
      text, media, and tool calls as `functionCall` parts (`name`, `args`, and the API's
      `id`), with their thought signatures (see the module docstring).
    - `tool` messages are `user` contents of `functionResponse` parts (`name`, the API's
      `id`, `response: {"output": ...}`, or `{"error": ...}` for a failed call); media a tool
      returned follow the responses in the same content, introduced by a text part.
    - `system` messages are `system` entries, for `split_system`; they take text only.
    - Consecutive contents of one role are merged (Gemini wants all responses to one step's
      calls in one content), parts kept in order. Message names are not sent: Gemini's parts
      have no name (the multi-agent formatter writes them into the text).

    Args:
        fill_missing_signatures: Give the first function call of each model turn that has
            no thought signature Google's placeholder, `skip_thought_signature_validator`:
            Gemini 3 refuses (400) a history whose calls lack signatures, as one written by
            another model does (Google's thought-signatures guide).
    """

    SKIP_VALIDATOR: ClassVar[str] = "skip_thought_signature_validator"

    def __init__(self, *, fill_missing_signatures: bool = False) -> None:
        self.fill_missing_signatures = fill_missing_signatures

    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The Gemini contents for `msgs` (system entries included, see `split_system`)."""
        out: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []  # media of tool results, after the responses
        for msg in msgs:
            if msg.role != "tool" and pending:
                _append(out, "user", pending)
                pending = []
            if msg.role == "tool":
                _append(out, "user", [self._response(r, pending) for r in msg.tool_results])
            elif msg.role == "assistant":
                _append(out, "model", self._model_parts(msg))
            elif msg.role == "system":
                _append(out, "system", self._system_parts(msg))
            else:
                _append(out, "user", [self._part(block) for block in msg.content])
        if pending:
            _append(out, "user", pending)
        return out

    @staticmethod
    def _system_parts(msg: Msg) -> list[dict[str, Any]]:
        if any(not isinstance(b, TextBlock) for b in msg.content):
            raise MessageError(
                "Gemini takes only text in system instructions; put media in a user turn"
            )
        return [{"text": msg.text}]

    def _model_parts(self, msg: Msg) -> list[dict[str, Any]]:
        turn = _Turn()
        for block in msg.content:
            if isinstance(block, ThinkingBlock):
                turn.thinking(block)
            elif isinstance(block, ToolCallBlock):
                call = _with_id(block.id, {"name": block.name, "args": _arguments(block)})
                turn.add({"functionCall": call})
            else:
                turn.add(self._part(block))
        parts = turn.close()
        if self.fill_missing_signatures:
            first = next((p for p in parts if "functionCall" in p), None)
            if first is not None and "thoughtSignature" not in first:
                first["thoughtSignature"] = self.SKIP_VALIDATOR
        return parts

    def _response(self, result: ToolResultBlock, pending: list[dict[str, Any]]) -> dict[str, Any]:
        media = (
            []
            if isinstance(result.output, str)
            else [b for b in result.output if not isinstance(b, TextBlock)]
        )
        if media:
            pending.append({"text": f"Media returned by `{result.name}` ({result.tool_call_id}):"})
            pending.extend(self._part(block) for block in media)
        key = "error" if result.is_error else "output"
        response = _with_id(
            result.tool_call_id, {"name": result.name, "response": {key: result.text}}
        )
        return {"functionResponse": response}

    @staticmethod
    def _part(block: Any) -> dict[str, Any]:
        if isinstance(block, TextBlock):
            return {"text": block.text}
        if isinstance(block, MediaBlock):
            return media_part(block)
        raise MessageError(f"Gemini takes no {block.type} block in this place")


def _append(out: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    if not parts:
        return
    if out and out[-1]["role"] == role:
        out[-1]["parts"].extend(parts)
    else:
        out.append({"role": role, "parts": parts})


class GeminiMultiAgentFormatter(MultiAgentFormatter):
    """For several agents in one conversation: other agents' turns folded, then formatted.

    See `parley.models.formatter.MultiAgentFormatter`; the default inner formatter is
    a `GeminiChatFormatter`.
    """

    def chat_formatter(self) -> Formatter:
        """A `GeminiChatFormatter`, used when none is given."""
        return GeminiChatFormatter()
