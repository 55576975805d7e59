"""The conversations the providers' formatter tests share, and their sample media.

Each provider's `test_formatter.py` formats these and asserts its own wire's payload: the input
is the same everywhere, the expected output is the provider's.
"""

from __future__ import annotations

import base64

from parley import Msg
from parley.messages import Base64Source, ImageBlock, TextBlock, ToolCallBlock

__all__ = ["DEBATE", "PDF", "PNG", "TOOL_MEDIA", "TOOL_SEQUENCE", "WAV"]

PNG = base64.b64encode(b"\x89PNG fake").decode()
"""A PNG image's bytes (base64), as a block's `data` carries them."""
PDF = base64.b64encode(b"%PDF fake").decode()
"""A PDF file's bytes (base64)."""
WAV = base64.b64encode(b"RIFF fake").decode()
"""A WAV sound's bytes (base64)."""

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
