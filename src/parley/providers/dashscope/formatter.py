"""Formatters for DashScope's native `messages` (text generation and multimodal generation).

The two endpoints take the same roles in two content shapes (Model Studio's API reference):

- text generation (`Generation.call`): `content` is a string;
- multimodal generation (`MultiModalConversation.call`, Qwen-VL and Qwen-Omni): system and
  user `content` is a list of parts, each one key: `{"text": ...}`, `{"image": ...}`,
  `{"audio": ...}`, `{"video": ...}`, the media given as a URL, a `data:` URI or an
  `oss://` location (see `_media`); a video given by its frames as the list of them.

Assistant turns carry `tool_calls` in OpenAI's shape and `content` as a string; each tool
result is a `tool` message with `tool_call_id` and the tool's `name`. Thinking is not sent
back (DashScope's deep-thinking guide: earlier turns' `reasoning_content` need not be sent)
unless `send_thinking` is set. Text documents (`text/*`, JSON, XML, YAML) are sent as text;
other documents are refused, as neither endpoint takes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from parley.models.formatter import (
    Formatter,
    MultiAgentFormatter,
    tool_arguments,
)
from parley.providers.dashscope._media import file_text, media_value

__all__ = ["DashScopeChatFormatter", "DashScopeMultiAgentFormatter", "has_media"]

_MEDIA = (ImageBlock, AudioBlock, VideoBlock)


def has_media(msgs: Sequence[Msg]) -> bool:
    """Whether any message (or tool result) holds an image, audio or video."""
    for msg in msgs:
        for block in msg.content:
            if isinstance(block, _MEDIA):
                return True
            if (
                isinstance(block, ToolResultBlock)
                and not isinstance(block.output, str)
                and any(isinstance(b, _MEDIA) for b in block.output)
            ):
                return True
    return False


def _tool_call(call: ToolCallBlock) -> dict[str, Any]:
    function = {"name": call.name, "arguments": tool_arguments(call)}
    return {"id": call.id, "type": "function", "function": function}


class DashScopeChatFormatter(Formatter):
    """Messages to native `messages`, one (or more) per `Msg`.

    Args:
        multimodal: Format for the multimodal-generation endpoint (list content, media);
            else for text generation (string content, no media).
        send_thinking: Send thinking back as `reasoning_content` on assistant turns.
        inline_local_files: Read local (`file://`) media and send them as `data:` URIs;
            when False they stay `file://` URLs, for the model to upload (the SDK's way).
        continue_final: A conversation ending on an assistant's text asks the model to go on
            from it: that message is sent with `partial: true` (DashScope's partial mode, as
            Qwen-Agent's `qwen_dashscope` sends it).
    """

    def __init__(
        self,
        *,
        multimodal: bool = False,
        send_thinking: bool = False,
        inline_local_files: bool = True,
        continue_final: bool = False,
    ) -> None:
        self.multimodal = multimodal
        self.send_thinking = send_thinking
        self.inline_local_files = inline_local_files
        self.continue_final = continue_final

    def for_endpoint(self, *, multimodal: bool, inline_local_files: bool) -> DashScopeChatFormatter:
        """This formatter's options, for the endpoint (and upload setting) a call uses."""
        if (multimodal, inline_local_files) == (self.multimodal, self.inline_local_files):
            return self
        return DashScopeChatFormatter(
            multimodal=multimodal,
            send_thinking=self.send_thinking,
            inline_local_files=inline_local_files,
            continue_final=self.continue_final,
        )

    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The native messages for `msgs`.

        Raises:
            MessageError: Media for the text-generation endpoint, a document that is not
                text, or a local file that cannot be read.
        """
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
            else:
                out.append(self._plain(msg))
        if pending:
            out.append({"role": "user", "content": pending})
        last = out[-1] if out else {}
        if self.continue_final and last.get("role") == "assistant" and "tool_calls" not in last:
            last["partial"] = True
        return out

    # -- roles ----------------------------------------------------------------------------

    def _plain(self, msg: Msg) -> dict[str, Any]:
        if msg.role == "system" and any(not isinstance(b, TextBlock) for b in msg.content):
            raise MessageError(
                "DashScope takes only text in system messages; put media in a user turn"
            )
        if not self.multimodal:
            return {"role": msg.role, "content": self._text_only(msg.content)}
        return {"role": msg.role, "content": [self._part(block) for block in msg.content]}

    def _assistant(self, msg: Msg, pending: list[dict[str, Any]]) -> dict[str, Any]:
        entry: dict[str, Any] = {"role": "assistant", "content": msg.text}
        if calls := msg.tool_calls:
            entry["tool_calls"] = [_tool_call(call) for call in calls]
        if self.send_thinking and msg.thinking:
            entry["reasoning_content"] = msg.thinking
        media = [b for b in msg.content if isinstance(b, (*_MEDIA, FileBlock))]
        if media:
            # Assistant content is text: media the model made go in a user turn.
            pending.append({"text": "Media from the assistant's previous turn:"})
            pending.extend(self._part(block) for block in media)
        return entry

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
            pending.append({"text": f"Media returned by `{result.name}` ({result.tool_call_id}):"})
            pending.extend(self._part(block) for block in media)
        entry = {"role": "tool", "content": text, "tool_call_id": result.tool_call_id}
        if result.name:
            entry["name"] = result.name
        return entry

    # -- content --------------------------------------------------------------------------

    def _text_only(self, blocks: Sequence[Any]) -> str:
        return "\n".join(self._part(block)["text"] for block in blocks)

    def _media(self, block: ImageBlock | AudioBlock | VideoBlock) -> str:
        return media_value(block, inline_local=self.inline_local_files)

    def _part(self, block: Any) -> dict[str, Any]:
        if isinstance(block, TextBlock):
            return {"text": block.text}
        if isinstance(block, _MEDIA):
            if not self.multimodal:
                raise MessageError(
                    f"a {block.type} block needs DashScope's multimodal endpoint: use a "
                    "Qwen-VL or Qwen-Omni model, or DashScopeChatModel(multimodal=True)"
                )
            if isinstance(block, VideoBlock) and block.frames:
                # DashScope takes a video given by its frames as the list of their images.
                frames = [ImageBlock(source=frame) for frame in block.frames]
                return {"video": [self._media(frame) for frame in frames]}
            return {block.type: self._media(block)}
        if isinstance(block, FileBlock):
            text = file_text(block)
            if text is None:
                raise MessageError(
                    f"DashScope's chat APIs take no {block.source.media_type or 'document'} "
                    "files: extract the text first (parley.tools' doc_parser), or pass an "
                    "image of each page"
                )
            return {"text": text}
        raise MessageError(f"a {block.type} block cannot be sent as message content")


class DashScopeMultiAgentFormatter(MultiAgentFormatter):
    """For several agents in one conversation: other agents' turns folded, then formatted.

    See `parley.models.formatter.MultiAgentFormatter`; the default inner formatter is a
    `DashScopeChatFormatter`, set for the endpoint each call uses (`for_endpoint`).
    """

    def chat_formatter(self) -> Formatter:
        """A `DashScopeChatFormatter`, used when none is given."""
        return DashScopeChatFormatter()

    def for_endpoint(
        self, *, multimodal: bool, inline_local_files: bool
    ) -> DashScopeMultiAgentFormatter:
        """This formatter, its inner one set for the endpoint a call uses."""
        if not isinstance(self.formatter, DashScopeChatFormatter):
            return self  # a formatter of the caller's own: used as it is
        inner = self.formatter.for_endpoint(
            multimodal=multimodal, inline_local_files=inline_local_files
        )
        return (
            self if inner is self.formatter else DashScopeMultiAgentFormatter(self.self_name, inner)
        )
