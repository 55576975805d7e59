"""The errors of MCP servers and their tools, under `ToolError`.

    ToolError
    ├── MCPServerError            a server could not be started, reached or kept (`.server`)
    │   └── MCPTimeoutError       a call ran past its timeout
    └── ToolExecutionError
        └── MCPToolError          the server ran the tool and reported an error (`isError`)

Bad configuration (unknown keys, a server with neither `command` nor `url`) raises
`parley.errors.ConfigurationError` before anything starts.
"""

from __future__ import annotations

from parley.errors import ToolError, ToolExecutionError

__all__ = ["MCPServerError", "MCPTimeoutError", "MCPToolError"]


class MCPServerError(ToolError):
    """An MCP server could not be started, reached or kept connected.

    Args:
        message: What went wrong, naming the server.
        server: The server's name in the `mcpServers` config.
        tool_name: The parley tool being called, when there was one.
    """

    def __init__(self, message: str, *, server: str, tool_name: str | None = None) -> None:
        self.server = server
        super().__init__(message, tool_name=tool_name)


class MCPTimeoutError(MCPServerError):
    """An MCP call did not finish within its timeout (the server is told to cancel it)."""


class MCPToolError(ToolExecutionError):
    """The server ran the tool, and the tool reported an error (`isError` in its result).

    Args:
        message: The tool's own error text.
        server: The server's name in the `mcpServers` config.
        tool_name: The parley tool's name (`<server>-<tool>`).
    """

    def __init__(self, message: str, *, server: str, tool_name: str) -> None:
        self.server = server
        super().__init__(message, tool_name=tool_name)
