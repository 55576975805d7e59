"""Formatters for Ollama's `/api/chat` messages.

`OllamaChatFormatter` maps each message to Ollama's roles; `OllamaMultiAgentFormatter` first
folds other agents' turns into one user message that names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from parley.messages.blocks import Block, MediaBlock
from parley.models import _media
from parley.models.formatter import Formatter, MultiAgentFormatter

__all__ = ["OllamaChatFormatter", "OllamaMultiAgentFormatter", "media_data"]

# What newer servers recognize as audio among a message's `images` (llm/media.go: WAV by its
# RIFF header, MP3 by its ID3 tag or frame sync).
_AUDIO_TYPES = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/mp3"})
_NOT_MEDIA = frozenset({"text", "thinking", "tool_call", "tool_result"})


def media_data(block: MediaBlock | Block) -> str:
    """A media block's base64 data, as a message's `images` entry takes it.

    Ollama takes media inline only: base64 data is sent as it is and `file://` files are
    read and inlined.

    Raises:
        MessageError: The block is not an image or a WAV/MP3 recording, its source is a
            remote URL, or its file cannot be read.
    """
    if not isinstance(block, ImageBlock | AudioBlock):
        raise MessageError(
            f"Ollama takes images (and, on newer servers, WAV or MP3 audio), not {block.type} "
            "content: turn it into text or images first"
        )
    if url := _media.remote_url(block):
        raise MessageError(
            f"Ollama takes {block.type} content inline, not by URL ({url[:80]}): download it, "
            "or pass base64 data or a file:// path"
        )
    data, media_type = _media.base64_data(block)
    if isinstance(block, AudioBlock) and media_type.split(";")[0].strip() not in _AUDIO_TYPES:
        raise MessageError(f"Ollama reads audio as WAV or MP3 only, not {media_type!r}")
    return data


def _tool_call(call: ToolCallBlock) -> dict[str, Any]:
    # Ollama's arguments are a JSON object; the call's id goes back as sent (servers from
    # v0.12 match it with the result's `tool_call_id`; older ones ignore it).
    return {"id": call.id, "function": {"name": call.name, "arguments": call.input}}


class OllamaChatFormatter(Formatter):
    """Messages to `/api/chat` `messages`, one (or more) per `Msg`.

    - Text goes in `content` (text blocks joined by newlines); images, and WAV or MP3 audio,
      go in `images` as base64 (local `file://` media read and inlined; remote URLs
      refused: Ollama fetches nothing). Video and files are refused with a clear error.
    - An assistant's tool calls carry their id and their arguments as an object; each tool
      result is one `tool` message with `tool_name` and `tool_call_id`. Media a tool
      returned go in a user message after the run of tool messages.
    - Thinking goes back in the assistant message's `thinking` (unless `send_thinking` is
      off): the model's template decides whether the model sees it (gpt-oss's does).
    - Names are not sent (Ollama's messages have none); `OllamaMultiAgentFormatter` puts
      them in the text.

    Args:
        send_thinking: Send thinking back in `thinking`.
    """

    def __init__(self, *, send_thinking: bool = True) -> None:
        self.send_thinking = send_thinking

    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The `/api/chat` messages for `msgs`."""
        out: list[dict[str, Any]] = []
        pending: list[str] = []  # media waiting for the tool messages to end
        for msg in msgs:
            if msg.role != "tool" and pending:
                out.append(_tool_media(pending))
                pending = []
            if msg.role == "tool":
                out.extend(self._tool_message(result, pending) for result in msg.tool_results)
            elif msg.role == "assistant":
                out.append(self._assistant(msg))
            else:
                out.append(self._plain(msg))
        if pending:
            out.append(_tool_media(pending))
        return out

    @staticmethod
    def _plain(msg: Msg) -> dict[str, Any]:
        entry: dict[str, Any] = {"role": msg.role, "content": msg.text}
        images = [media_data(b) for b in msg.content if b.type not in _NOT_MEDIA]
        if images:
            entry["images"] = images
        return entry

    def _assistant(self, msg: Msg) -> dict[str, Any]:
        entry = self._plain(msg)
        if self.send_thinking and (thinking := msg.thinking):
            entry["thinking"] = thinking
        if calls := msg.tool_calls:
            entry["tool_calls"] = [_tool_call(call) for call in calls]
        return entry

    @staticmethod
    def _tool_message(result: ToolResultBlock, pending: list[str]) -> dict[str, Any]:
        text = result.text
        if not isinstance(result.output, str):
            media = [media_data(b) for b in result.output if not isinstance(b, TextBlock)]
            if media:
                note = f"[{len(media)} media item(s) returned; attached in the next message]"
                text = f"{text}\n{note}" if text else note
                pending.extend(media)
        entry: dict[str, Any] = {"role": "tool", "content": text}
        if result.name:
            entry["tool_name"] = result.name
        entry["tool_call_id"] = result.tool_call_id
        return entry


def _tool_media(images: list[str]) -> dict[str, Any]:
    return {"role": "user", "content": "Media returned by the tools above:", "images": images}


class OllamaMultiAgentFormatter(MultiAgentFormatter):
    """For several agents in one conversation: other agents' turns folded, then formatted.

    See `parley.models.formatter.MultiAgentFormatter`; the default inner formatter is
    an `OllamaChatFormatter`.
    """

    def chat_formatter(self) -> Formatter:
        """An `OllamaChatFormatter`, used when none is given."""
        return OllamaChatFormatter()
