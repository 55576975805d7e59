"""Qwen-Agent's message and file helpers (`qwen_agent.utils.utils`) its agents and examples use.

Text out of messages, Chinese detection, `generate_cfg` merging, and saving a URL or a path
to a local folder.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parley.compat.qwen.schema import ContentItem, Message

__all__ = [
    "extract_files_from_messages",
    "extract_text_from_message",
    "format_as_text_message",
    "get_basename_from_url",
    "has_chinese_chars",
    "is_http_url",
    "merge_generate_cfgs",
    "save_url_to_local_work_dir",
]

logger = logging.getLogger("parley.compat.qwen")

_CHINESE = re.compile(r"[\u4e00-\u9fff]")
_DOWNLOAD_TIMEOUT = 60.0
_UPLOAD = {
    "en": {"file": "[file]({name})", "image": "[image]({name})", "audio": "[audio]({name})"},
    "zh": {"file": "[文件]({name})", "image": "[图片]({name})", "audio": "[音频]({name})"},
}


def has_chinese_chars(data: Any) -> bool:
    """Whether the text of `data` (anything, as `str(data)`) holds a Chinese character."""
    return _CHINESE.search(str(data)) is not None


def is_http_url(path_or_url: str) -> bool:
    """Whether it is an `http://` or `https://` URL."""
    return path_or_url.startswith(("http://", "https://"))


def get_basename_from_url(path_or_url: str) -> str:
    """The file name a path or URL ends in (a URL with no path: its host)."""
    path = urllib.parse.unquote(urllib.parse.urlparse(path_or_url.replace("\\", "/")).path)
    name = os.path.basename(path).strip()
    if not name:
        name = [part for part in path_or_url.split("/") if part.strip()][-1].strip()
    return name


def merge_generate_cfgs(
    base_generate_cfg: Mapping[str, Any] | None, new_generate_cfg: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`new_generate_cfg` over `base_generate_cfg`: keys replaced, `stop` lists united."""
    merged = dict(base_generate_cfg or {})
    for key, value in (new_generate_cfg or {}).items():
        if key == "stop":
            before = _listed(merged.get("stop"))
            merged["stop"] = before + [s for s in _listed(value) if s not in before]
        else:
            merged[key] = value
    return merged


def _listed(stop: Any) -> list[Any]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def _item_text(item: ContentItem, add_upload_info: bool, lang: str) -> str:
    if item.text is not None:
        return item.text
    if not add_upload_info:
        return ""
    for kind in ("file", "image", "audio"):
        value = getattr(item, kind)
        if isinstance(value, str) and value:
            # The name only: the tools that read files get them copied in by name.
            return _UPLOAD[lang][kind].format(name=get_basename_from_url(value))
    return ""


def format_as_text_message(msg: Message, add_upload_info: bool, lang: str = "auto") -> Message:
    """A copy of `msg` with text content: its text items, uploads shown by name if asked.

    Args:
        msg: The message.
        add_upload_info: Whether files, images and audio appear as `[file](name)` notes.
        lang: `en`, `zh`, or `auto` (`zh` when the text holds Chinese).
    """
    message = msg.model_copy(deep=True)
    content = message.content
    if isinstance(content, str):
        return message
    if lang == "auto":
        lang = "zh" if has_chinese_chars([i.text for i in content if i.text]) else "en"
    texts = [
        _item_text(item, add_upload_info, lang if lang in _UPLOAD else "en") for item in content
    ]
    notes = [t for t, item in zip(texts, content, strict=True) if item.text is None and t]
    said = "".join(t for t, item in zip(texts, content, strict=True) if item.text is not None)
    message.content = "\n".join([*notes, said]) if notes else said
    return message


def extract_text_from_message(msg: Message, add_upload_info: bool, lang: str = "auto") -> str:
    """The message's text, stripped (uploads shown by name if asked)."""
    return str(format_as_text_message(msg, add_upload_info, lang).content).strip()


def extract_files_from_messages(messages: Sequence[Message], include_images: bool) -> list[str]:
    """The files (and, if asked, images) the messages carry, each once, in order."""
    found: list[str] = []
    for message in messages:
        if isinstance(message.content, str):
            continue
        for item in message.content:
            for value in (item.file, item.image if include_images else None):
                if value and value not in found:
                    found.append(value)
    return found


def save_url_to_local_work_dir(url: str, save_dir: str, save_filename: str = "") -> str:
    """Save a URL's body (or copy a local path, `file://` URLs too) into `save_dir`.

    Args:
        url: An `http(s)://` URL, a `file://` URL or a path.
        save_dir: The folder to save in.
        save_filename: The file name (default: the URL's).

    Returns:
        The saved file's path (an earlier file of that name is replaced).

    Raises:
        ValueError: The download failed (its status or error says why).
    """
    path = Path(save_dir) / (save_filename or get_basename_from_url(url))
    logger.info("Saving %s to %s", url, path)
    if not is_http_url(url):
        source = urllib.parse.unquote(url[len("file://") :]) if url.startswith("file://") else url
        shutil.copyfile(source, path)
        return str(path)
    import httpx  # noqa: PLC0415  (the tools extra)

    try:
        response = httpx.get(url, follow_redirects=True, timeout=_DOWNLOAD_TIMEOUT)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise ValueError(f"could not download {url}: {exc}") from exc
    path.write_bytes(response.content)
    return str(path)
