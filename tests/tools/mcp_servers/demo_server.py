"""A real MCP server for parley's MCP tests, written with the SDK's server API.

Usage: `python demo_server.py stdio`, `python demo_server.py http PORT`,
`python demo_server.py sse PORT`, or `python demo_server.py fail-at-start` (writes to stderr
and exits with code 3 before speaking MCP).
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import EmbeddedResource, TextResourceContents, ToolAnnotations

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
)

server = MCPServer("demo", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@server.tool()
def red_pixel() -> Image:
    """A 1x1 red PNG image."""
    return Image(data=PNG, format="png")


@server.tool()
def readme() -> EmbeddedResource:
    """A text resource."""
    return EmbeddedResource(
        resource=TextResourceContents(
            uri="file:///readme.txt", text="read me", mime_type="text/plain"
        )
    )


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(reason)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "done"


_arrived: dict[str, int] = {}
_everyone_here: dict[str, asyncio.Event] = {}


@server.tool()
async def meet(group: str, size: int, wait: float = 30.0) -> str:
    """Wait until `size` calls of `group` are here at once: only calls that overlap meet."""
    _arrived[group] = _arrived.get(group, 0) + 1
    everyone = _everyone_here.setdefault(group, asyncio.Event())
    if _arrived[group] >= size:
        everyone.set()
    try:
        # Bounded: calls made one after the other never meet, and say so.
        await asyncio.wait_for(everyone.wait(), wait)
    except TimeoutError:
        return f"alone: {_arrived[group]} of {size} arrived"
    return "met"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


def main() -> None:
    mode = sys.argv[1]
    if mode == "fail-at-start":
        print("demo server: cannot open the database", file=sys.stderr)
        raise SystemExit(3)
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif mode == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
