"""The `mcp` SDK, imported on first use and checked to be the major version parley speaks."""

from __future__ import annotations

import importlib.metadata

from parley.errors import MissingDependencyError, UserError

__all__ = ["require_mcp"]

# mcp 2 renamed FastMCP to MCPServer, moved HTTP to httpx2 and changed its types' field names;
# parley is written against mcp 2.
_MAJOR = 2


def require_mcp() -> None:
    """Make sure a usable `mcp` is installed.

    Raises:
        MissingDependencyError: `mcp` is not installed.
        UserError: The installed `mcp` is of another major version.
    """
    try:
        import mcp  # noqa: F401, PLC0415  (optional, and slow to import)
    except ImportError as exc:
        raise MissingDependencyError("mcp", "mcp") from exc
    version = importlib.metadata.version("mcp")
    if int(version.split(".")[0]) != _MAJOR:
        raise UserError(
            f"parley needs mcp {_MAJOR}.x, found mcp {version}; "
            "install it with `pip install 'parley[mcp]'`"
        )
