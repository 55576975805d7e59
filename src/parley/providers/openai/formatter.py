"""Formatters for OpenAI's Chat Completions wire format.

`OpenAIChatFormatter` maps each message to OpenAI's roles; `OpenAIMultiAgentFormatter` first
folds other agents' turns into one user message that names them. The Responses API's
formatter is in `parley.providers.openai.responses_formatter`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from parley.models import _media
from parley.models.formatter import (
    Formatter,
    MultiAgentFormatter,
    tool_arguments,
)

__all__ = ["OpenAIChatFormatter", "OpenAIMultiAgentFormatter"]

# OpenAI refuses a `name` outside this pattern (API reference, chat messages' `name`).
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")

ImageDetail = Literal["auto", "low", "high"]

_MEDIA = (ImageBlock, AudioBlock, VideoBlock, FileBlock)


def _safe_name(name: str) -> str:
    return _NAME_CHARS.sub("_", name)[:64]


def _tool_call(call: ToolCallBlock) -> dict[str, Any]:
    function = {"name": call.name, "arguments": tool_arguments(call)}
    return {"id": call.id, "type": "function", "function": function}


class OpenAIChatFormatter(Formatter):
    """Messages to Chat Completions `messages`, one (or more) per `Msg`.

    - Text-only content is sent as a string; media as content parts: images by URL or as
      `data:` URLs (local `file://` images are read and inlined), audio as `input_audio`,
      files as `file` parts with `file_data`, videos as `video_url` (DashScope, vLLM).
    - Tool calls carry their arguments as the model wrote them; each tool result is one
      `tool` message. Tool messages hold text only, so media a tool returned go in a user
      message after the run of tool messages, and the tool message says so.
    - Thinking is dropped unless `send_thinking` is set: then it goes back as
      `reasoning_content`, which DeepSeek and Kimi require on assistant turns that called
      tools (their thinking-mode guides) and other providers ignore or refuse.

    Args:
        send_thinking: Send thinking back as `reasoning_content`.
        image_detail: OpenAI's image `detail` (`auto`, `low`, `high`) for every image.
    """

    def __init__(
        self, *, send_thinking: bool = False, image_detail: ImageDetail | None = None
    ) -> None:
        self.send_thinking = send_thinking
        self.image_detail = image_detail

    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The Chat Completions messages for `msgs`."""
        out: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []  # media parts waiting for the tool messages to end
        for msg in msgs:
            if msg.role != "tool" and pending:
                out.append({"role": "user", "content": pending})
                pending = []
            if msg.role == "tool":
                out.extend(self._tool_message(result, pending) for result in msg.tool_results)
            elif msg.role == "assistant":
                out.append(self._assistant(msg, pending))
            elif msg.role == "system":
                out.append(self._system(msg))
            else:
                out.append(self._user(msg))
        if pending:
            out.append({"role": "user", "content": pending})
        return out

    # -- roles ----------------------------------------------------------------------------

    def _system(self, msg: Msg) -> dict[str, Any]:
        if any(not isinstance(b, TextBlock) for b in msg.content):
            raise MessageError(
                "OpenAI takes only text in system messages; put media in a user turn"
            )
        return self._named({"role": "system", "content": msg.text}, msg)

    def _user(self, msg: Msg) -> dict[str, Any]:
        if all(isinstance(b, TextBlock) for b in msg.content):
            return self._named({"role": "user", "content": msg.text}, msg)
        parts = [self._part(block) for block in msg.content]
        return self._named({"role": "user", "content": parts}, msg)

    def _assistant(self, msg: Msg, pending: list[dict[str, Any]]) -> dict[str, Any]:
        calls = msg.tool_calls
        entry: dict[str, Any] = {"role": "assistant", "content": msg.text or None}
        if calls:
            entry["tool_calls"] = [_tool_call(call) for call in calls]
        elif entry["content"] is None:
            entry["content"] = ""  # OpenAI wants content unless there are tool calls
        if self.send_thinking and (msg.thinking or calls):
            # DeepSeek refuses a tool-calling turn without it, even when empty.
            entry["reasoning_content"] = msg.thinking
        media = [b for b in msg.content if isinstance(b, _MEDIA)]
        if media:
            # Assistant content may hold only text: media the model made go in a user turn.
            pending.append({"type": "text", "text": "Media from the assistant's previous turn:"})
            pending.extend(self._part(block) for block in media)
        return self._named(entry, msg)

    def _tool_message(
        self, result: ToolResultBlock, pending: list[dict[str, Any]]
    ) -> dict[str, Any]:
        media = (
            []
            if isinstance(result.output, str)
            else [b for b in result.output if not isinstance(b, TextBlock)]
        )
        text = result.text
        if media:
            note = f"[{len(media)} media item(s) returned; attached in the next user message]"
            text = f"{text}\n{note}" if text else note
            pending.append(
                {
                    "type": "text",
                    "text": f"Media returned by `{result.name}` ({result.tool_call_id}):",
                }
            )
            pending.extend(self._part(block) for block in media)
        return {"role": "tool", "tool_call_id": result.tool_call_id, "content": text}

    @staticmethod
    def _named(entry: dict[str, Any], msg: Msg) -> dict[str, Any]:
        if msg.name:
            entry["name"] = _safe_name(msg.name)
        return entry

    # -- content parts --------------------------------------------------------------------

    def _part(self, block: Any) -> dict[str, Any]:
        if isinstance(block, TextBlock):
            return {"type": "text", "text": block.text}
        if isinstance(block, ImageBlock):
            image: dict[str, Any] = {"url": _media.url_or_data(block)}
            if self.image_detail:
                image["detail"] = self.image_detail
            return {"type": "image_url", "image_url": image}
        if isinstance(block, AudioBlock):
            data, media_type = _media.base64_data(block)
            return {
                "type": "input_audio",
                "input_audio": {"data": data, "format": _media.audio_format(media_type)},
            }
        if isinstance(block, FileBlock):
            file = {"file_data": _media.data_url(block), "filename": _media.filename(block)}
            return {"type": "file", "file": file}
        if isinstance(block, VideoBlock):
            return {"type": "video_url", "video_url": {"url": _media.url_or_data(block)}}
        raise MessageError(f"a {block.type} block cannot be sent as message content")


class OpenAIMultiAgentFormatter(MultiAgentFormatter):
    """For several agents in one conversation: other agents' turns folded, then formatted.

    See `parley.models.formatter.MultiAgentFormatter`; the default inner formatter is
    an `OpenAIChatFormatter` (pass an `OpenAIResponsesFormatter` for the Responses API).
    """

    def chat_formatter(self) -> Formatter:
        """An `OpenAIChatFormatter`, used when none is given."""
        return OpenAIChatFormatter()
