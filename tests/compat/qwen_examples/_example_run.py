"""The examples' `test()` run, as the Assistant examples write it, shared by their tests."""

from __future__ import annotations

from typing import Any

from parley.compat.qwen.agent import Agent
from parley.compat.qwen.utils.output_beautify import typewriter_print


def typewriter_run(bot: Agent, query: str) -> tuple[list[Any], str]:
    """Run `bot` on the user's `query`, printing the response as it grows.

    Returns the last response and the text printed. The bot is closed after the run (a
    parley addition: the test leaves nothing open).
    """
    try:
        messages = [{"role": "user", "content": query}]
        response: list[Any] = []
        response_plain_text = ""
        for response in bot.run(messages=messages):
            response_plain_text = typewriter_print(response, response_plain_text)
    finally:
        bot.close_sync()
    return response, response_plain_text
