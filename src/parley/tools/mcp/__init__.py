"""MCP servers as parley tools, through the official `mcp` SDK (the `mcp` extra).

From an `mcpServers` config as Qwen-Agent takes it, stdio servers are started as subprocesses
and HTTP servers (streamable HTTP, or SSE) are connected to; each tool of a server becomes a
parley `Tool` named `<server>-<tool>`::

    toolkit = Toolkit()
    await toolkit.add_mcp_servers({"mcpServers": {
        "calc": {"command": "python", "args": ["calc_server.py"]},
        "search": {"url": "http://127.0.0.1:8000/mcp"},
    }})
    ...
    await close_mcp_servers(toolkit)

or, holding the connections yourself::

    async with MCPManager(config) as manager:
        toolkit = Toolkit(manager.tools)

Each call has a timeout (the server's `timeout`, 60 s by default). A server that fails to start
or dies raises `MCPServerError` saying which server and why (the command not found, its exit
code and the end of its stderr, the connection refused...). A call that finds its session gone
reconnects once and is sent again: a call in flight when the connection dropped may have run
already, so a tool that is not idempotent may run twice. A tool's own error (`isError`) raises
`MCPToolError`, which a `Toolkit` returns to the model as an error result.
"""

from parley.tools.mcp._config import (
    HTTPServerConfig,
    MCPServerConfig,
    StdioServerConfig,
    parse_mcp_config,
)
from parley.tools.mcp._connection import MCPServerConnection
from parley.tools.mcp._errors import MCPServerError, MCPTimeoutError, MCPToolError
from parley.tools.mcp._manager import MCPManager, add_mcp_servers, close_mcp_servers
from parley.tools.mcp._results import to_tool_output
from parley.tools.mcp._tool import MCPTool

__all__ = [
    "HTTPServerConfig",
    "MCPManager",
    "MCPServerConfig",
    "MCPServerConnection",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPTool",
    "MCPToolError",
    "StdioServerConfig",
    "add_mcp_servers",
    "close_mcp_servers",
    "parse_mcp_config",
    "to_tool_output",
]
