"""Stand-ins for the MCP servers Qwen-Agent's Qwen3 examples start (which `uvx`/`npx` would
download): the same tool names and arguments, over stdio, written with the official `mcp`
SDK's server API.

Usage: `python stand_in_mcp_servers.py time --local-timezone=Asia/Shanghai` (as
`mcp-server-time`: `get_current_time`, `convert_time`), `... fetch` (as `mcp-server-fetch`:
`fetch`, for the tests' local URLs only), `... filesystem DIR` (as
`@modelcontextprotocol/server-filesystem`: `read_text_file`, `write_file`,
`list_directory`, `create_directory`, `list_allowed_directories`, inside DIR).
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

parser = argparse.ArgumentParser()
parser.add_argument("kind", choices=["time", "fetch", "filesystem"])
parser.add_argument("root", nargs="?")
parser.add_argument("--local-timezone", default="UTC")
ARGS = parser.parse_args()

server = MCPServer(ARGS.kind, log_level="WARNING")


def _time_at(zone: str, moment: datetime | None = None) -> dict[str, object]:
    now = (moment or datetime.now(ZoneInfo(zone))).astimezone(ZoneInfo(zone))
    return {
        "timezone": zone,
        "datetime": now.isoformat(timespec="seconds"),
        "is_dst": bool(now.dst()),
    }


def get_current_time(timezone: str) -> str:
    """Get current time in a specific timezone (IANA name; the local one if none given)."""
    return json.dumps(_time_at(timezone or ARGS.local_timezone))


def convert_time(source_timezone: str, time: str, target_timezone: str) -> str:
    """Convert a time (HH:MM, today) between timezones."""
    hour, minute = (int(part) for part in time.split(":"))
    today = datetime.now(ZoneInfo(source_timezone))
    moment = today.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return json.dumps(
        {"source": _time_at(source_timezone, moment), "target": _time_at(target_timezone, moment)}
    )


def fetch(url: str, max_length: int = 5000, start_index: int = 0, raw: bool = False) -> str:
    """Fetches a URL from the internet and extracts its contents (here: local URLs only)."""
    if not url.startswith("http://127.0.0.1:"):
        raise ToolError(f"the stand-in fetches local URLs only, not {url}")
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return f"Contents of {url}:\n{text[start_index : start_index + max_length]}"


def _inside(path: str) -> Path:
    root = Path(ARGS.root).expanduser().resolve()  # `~` expanded, as the reference server does
    target = (root / Path(path).expanduser()).resolve()
    if not target.is_relative_to(root):
        raise ToolError(f"Access denied - path outside allowed directories: {path}")
    return target


def read_text_file(path: str) -> str:
    """Read the complete contents of a file as text."""
    return _inside(path).read_text()


def write_file(path: str, content: str) -> str:
    """Create a new file or completely overwrite an existing file with new content."""
    _inside(path).write_text(content)
    return f"Successfully wrote to {path}"


def list_directory(path: str) -> str:
    """Get a detailed listing of all files and directories in a specified path."""
    entries = sorted(_inside(path).iterdir())
    return "\n".join(f"[{'DIR' if e.is_dir() else 'FILE'}] {e.name}" for e in entries)


def create_directory(path: str) -> str:
    """Create a new directory or ensure a directory exists."""
    _inside(path).mkdir(parents=True, exist_ok=True)
    return f"Successfully created directory {path}"


def list_allowed_directories() -> str:
    """Returns the list of directories that this server is allowed to access."""
    return f"Allowed directories:\n{Path(ARGS.root).expanduser().resolve()}"


TOOLS = {
    "time": [get_current_time, convert_time],
    "fetch": [fetch],
    "filesystem": [
        read_text_file,
        write_file,
        list_directory,
        create_directory,
        list_allowed_directories,
    ],
}

if __name__ == "__main__":
    for tool in TOOLS[ARGS.kind]:
        server.tool()(tool)
    server.run("stdio")
