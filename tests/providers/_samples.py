"""The conversations and the media the providers' tests share.

Each provider's `test_formatter.py` formats the conversations and asserts its own wire's
payload: the input is the same everywhere, the expected output is the provider's.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from parley import Msg
from parley.messages import Base64Source, ImageBlock, TextBlock, ToolCallBlock

__all__ = [
    "CALLS",
    "CALLS_AS_CHAT_COMPLETIONS",
    "DEBATE",
    "IMAGE_URL",
    "PDF",
    "PNG",
    "PNG_BYTES",
    "TOOL_MEDIA",
    "TOOL_SEQUENCE",
    "WAV",
    "images_three_ways",
    "png_file",
    "text_and_images",
]

PNG_BYTES = b"\x89PNG fake"
"""A PNG image's bytes."""
PNG = base64.b64encode(PNG_BYTES).decode()
"""`PNG_BYTES` in base64, as a block's `data` carries them."""
IMAGE_URL = "https://example.com/cat.png"
"""An image by URL."""
PDF = base64.b64encode(b"%PDF fake").decode()
"""A PDF file's bytes (base64)."""
WAV = base64.b64encode(b"RIFF fake").decode()
"""A WAV sound's bytes (base64)."""

CALLS = Msg.assistant(
    "Checking.",
    ToolCallBlock(id="c1", name="weather", input={}, raw_input='{"city":"Rome"}'),
    ToolCallBlock(id="c2", name="time", input={"tz": "CET"}),
)
"""An assistant's text and two calls, the first with its arguments kept as raw text."""

CALLS_AS_CHAT_COMPLETIONS = {
    "role": "assistant",
    "content": "Checking.",
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
        },
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "time", "arguments": '{"tz": "CET"}'},
        },
    ],
}
"""`CALLS` as the Chat Completions wire carries it (OpenAI's, DashScope's text endpoint)."""

TOOL_MEDIA = (
    Msg.assistant(ToolCallBlock(id="c1", name="snap", input={}), ToolCallBlock(id="c2", name="f")),
    Msg.tool_result(
        "c1",
        [
            TextBlock(text="Here it is."),
            ImageBlock(source=Base64Source(media_type="image/png", data=PNG)),
        ],
        name="snap",
    ),
    Msg.tool_result("c2", "done", name="f"),
    Msg.user("Thanks"),
)
"""Two calls, the first answered with text and an image (`snap`, c1), then the user's turn."""

DEBATE = (
    Msg.system("You are Bob."),
    Msg.user("Debate!", name="host"),
    Msg.assistant("Cats rule.", name="alice"),
    Msg.assistant("Dogs rule.", name="bob"),
    Msg.assistant("No, cats.", name="alice"),
)
"""Several agents' turns, as Bob sees them (the others' turns fold into history)."""

TOOL_SEQUENCE = (
    Msg.user("Weather?", name="ann"),
    Msg.assistant(ToolCallBlock(id="c1", name="weather", input={}), name="bob"),
    Msg.tool_result("c1", "Sunny", name="weather"),
)
"""Bob's tool call and its result, which stay in the wire's own roles."""


def png_file(folder: Path, name: str = "cat.png") -> Path:
    """`PNG_BYTES` written to a file `name` in `folder`."""
    path = folder / name
    path.write_bytes(PNG_BYTES)
    return path


def images_three_ways(folder: Path) -> Msg:
    """A user's "Look:" and the image `PNG` three ways: by URL (`IMAGE_URL`), inline, and from
    a local file (written in `folder`)."""
    return Msg.user(
        "Look:",
        ImageBlock.from_url(IMAGE_URL),
        ImageBlock(source=Base64Source(media_type="image/png", data=PNG)),
        ImageBlock.from_path(png_file(folder)),
    )


def text_and_images(folder: Path) -> list[Any]:
    """Inputs to embed: a string, a text block, and the image `PNG` by URL, as bytes and from a
    local file (written in `folder`)."""
    return [
        "a caption",
        TextBlock(text="a block of text"),
        ImageBlock.from_url(IMAGE_URL),
        ImageBlock.from_bytes(PNG_BYTES, "image/png"),
        ImageBlock.from_path(png_file(folder)),
    ]
