"""The formatter for OpenAI's Responses API: messages to `input` items.

Assistant turns become a sequence of items in block order: `reasoning` items (kept in
`ThinkingBlock.extra` when the Responses API produced them), assistant messages, and
`function_call` items; tool results become `function_call_output` items, media included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parley.errors import MessageError
from parley.messages import (
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from parley.models import _media
from parley.models.formatter import Formatter, tool_arguments
from parley.providers.openai.formatter import ImageDetail

__all__ = ["OpenAIResponsesFormatter", "reasoning_item"]


def reasoning_item(block: ThinkingBlock) -> dict[str, Any] | None:
    """The `reasoning` input item a thinking block came from; None if not from OpenAI.

    Reasoning from another provider cannot be replayed to OpenAI, which accepts only its
    own items (by `id`, with `encrypted_content` when nothing is stored server-side).
    """
    extra = block.extra or {}
    item_id = extra.get("id")
    if not isinstance(item_id, str) or not item_id.startswith("rs_"):
        return None
    summary = extra.get("summary")
    texts = summary if isinstance(summary, list) else ([block.thinking] if block.thinking else [])
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": str(text)} for text in texts],
    }
    if extra.get("encrypted_content"):
        item["encrypted_content"] = extra["encrypted_content"]
    return item


class OpenAIResponsesFormatter(Formatter):
    """Messages to Responses API `input` items.

    Images go by URL or as `data:` URLs, files as `input_file` (by URL or inline); the
    Responses API takes no audio or video input. Message names are dropped (the API has no
    field for them; use `OpenAIMultiAgentFormatter` to keep other agents' names).

    Args:
        image_detail: OpenAI's image `detail` for every image (`auto` by default).
    """

    def __init__(self, *, image_detail: ImageDetail = "auto") -> None:
        self.image_detail = image_detail

    def format(self, msgs: Sequence[Msg]) -> list[dict[str, Any]]:
        """The `input` items for `msgs`."""
        items: list[dict[str, Any]] = []
        for msg in msgs:
            if msg.role == "tool":
                items.extend(self._tool_output(result) for result in msg.tool_results)
            elif msg.role == "assistant":
                items.extend(self._assistant(msg))
            else:
                items.append({"role": msg.role, "content": self._content(msg)})
        return items

    def _content(self, msg: Msg) -> str | list[dict[str, Any]]:
        if all(isinstance(b, TextBlock) for b in msg.content):
            return msg.text
        return [self._part(block) for block in msg.content]

    def _assistant(self, msg: Msg) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        texts: list[str] = []

        def flush() -> None:
            if texts:
                items.append({"role": "assistant", "content": "\n".join(texts)})
                texts.clear()

        for block in msg.content:
            if isinstance(block, TextBlock):
                texts.append(block.text)
                continue
            flush()
            if isinstance(block, ThinkingBlock):
                if (item := reasoning_item(block)) is not None:
                    items.append(item)
            elif isinstance(block, ToolCallBlock):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": block.id,
                        "name": block.name,
                        "arguments": tool_arguments(block),
                    }
                )
            else:
                raise MessageError(
                    f"the Responses API takes no {block.type} in assistant turns; "
                    "put media in a user turn"
                )
        flush()
        return items

    def _tool_output(self, result: ToolResultBlock) -> dict[str, Any]:
        output: str | list[dict[str, Any]]
        if isinstance(result.output, str):
            output = result.output
        else:
            output = [self._part(block) for block in result.output]
        return {"type": "function_call_output", "call_id": result.tool_call_id, "output": output}

    def _part(self, block: Any) -> dict[str, Any]:
        if isinstance(block, TextBlock):
            return {"type": "input_text", "text": block.text}
        if isinstance(block, ImageBlock):
            return {
                "type": "input_image",
                "image_url": _media.url_or_data(block),
                "detail": self.image_detail,
            }
        if isinstance(block, FileBlock):
            if url := _media.remote_url(block):
                return {"type": "input_file", "file_url": url}
            return {
                "type": "input_file",
                "file_data": _media.data_url(block),
                "filename": _media.filename(block),
            }
        raise MessageError(
            f"the Responses API takes no {block.type} input; send it through Chat Completions"
        )
