"""Media in a conversation written as text, for the text models of Qwen-Agent's types.

Qwen-Agent's text models (`oai`, `qwen_dashscope`, `azure`) do not read images, audio,
video or files: a system or user message that holds them gets a note naming each one
(`(Uploaded ![image](dog.jpeg)) `, in Chinese when the message is), before its text, and the
media are left out; other messages keep their text only. The multimodal types (`qwenvl_*`,
`qwenomni_oai`, `qwenaudio_dashscope`) and parley models passed in get the media.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from parley.compat.qwen.schema import SYSTEM, USER, ContentItem, Message

__all__ = ["TEXT_ONLY_TYPES", "as_text_messages"]

TEXT_ONLY_TYPES = frozenset({"oai", "qwen_dashscope", "azure"})
_CHINESE = re.compile(r"[\u4e00-\u9fff]")
_LABELS = {
    "image": ("image", "图片"),
    "video": ("video", "视频"),
    "audio": ("audio", "音频"),
}


def _basename(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]


def _note(kind: str, value: object, chinese: bool) -> str:
    if isinstance(value, dict):
        value = value.get("data") or value.get("url") or ""
    if isinstance(value, list):
        return " ".join(_note(kind, v, chinese) for v in value)
    name = _basename(str(value))
    if kind in _LABELS:
        return f"![{_LABELS[kind][chinese]}]({name})"
    return f"[{'文件' if chinese else 'file'}]({name})"


def as_text_messages(messages: Sequence[Message]) -> list[Message]:
    """The messages with their media as notes in the text (see the module docs)."""
    out = []
    for msg in messages:
        if not isinstance(msg.content, list):
            out.append(msg)
            continue
        texts = [item for item in msg.content if item.text is not None]
        media = [item.get_type_and_value() for item in msg.content if item.text is None]
        if not media:
            out.append(msg)
            continue
        content = texts
        if msg.role in (SYSTEM, USER):
            chinese = any(_CHINESE.search(item.text or "") for item in texts)
            notes = " ".join(_note(kind, value, chinese) for kind, value in media)
            note = f"（上传了 {notes}）" if chinese else f"(Uploaded {notes}) "  # noqa: RUF001
            content = [ContentItem(text=note), *texts]
        out.append(msg.model_copy(update={"content": content or ""}))
    return out
