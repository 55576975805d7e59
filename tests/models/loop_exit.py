"""A script that never closes its model, run in a process of its own, and what it reported.

aiohttp reports connections that outlive their event loop ("Unclosed connector", "Unclosed
client session") when they are collected. A model on aiohttp closes each loop's client when
that loop shuts down (each `asyncio.run`), when the client is collected, or at exit for the
loop parley's sync twins run on (`parley.models._aiohttp.LoopClients`).
"""

from __future__ import annotations

import subprocess
import sys

__all__ = ["ENDINGS", "run_without_closing"]

ENDINGS = ["dropped", "kept"]
"""How the script ends: its model dropped and collected, or kept alive to the exit."""

_SCRIPT = """
import asyncio, gc, sys
from parley import Msg
{setup}
hi = [Msg.user("Hi")]
print(asyncio.run(model.chat(hi)).text)
print(asyncio.run(model.chat_stream(hi).collect()).text)
print(model.chat_sync(hi).text)
if sys.argv[2] == "dropped":
    del model
    gc.collect()
"""

_TROUBLE = ("Unclosed", "ResourceWarning", "never awaited", "destroyed but it is pending")


def run_without_closing(setup: str, url: str, ending: str) -> list[str]:
    """Run three calls (two loops, then a sync twin) on a model never closed; its output.

    Args:
        setup: Python that binds `model`, reading the server's URL from `sys.argv[1]`.
        url: The server's URL.
        ending: One of `ENDINGS`.

    Raises:
        AssertionError: The script failed, or reported something left open.
    """
    script = _SCRIPT.format(setup=setup)
    ran = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", script, url, ending],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    reported = [trouble for trouble in _TROUBLE if trouble in ran.stderr]
    assert not reported, ran.stderr
    return ran.stdout.split()
