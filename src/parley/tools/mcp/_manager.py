"""`MCPManager`: the servers of one `mcpServers` config, opened and closed together."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, Self

from parley.errors import ConfigurationError
from parley.tools.base import Tool
from parley.tools.mcp._config import MCPServerConfig, parse_mcp_config
from parley.tools.mcp._connection import MCPServerConnection
from parley.tools.mcp._errors import MCPServerError
from parley.tools.mcp._tool import MCPTool

__all__ = ["MCPManager", "add_mcp_servers", "close_mcp_servers"]


class ToolSet(Protocol):
    """What `add_mcp_servers` needs of a toolkit: a `parley.tools.Toolkit` is one.

    Named by its shape, not by `Toolkit`, because `Toolkit.add_mcp_servers` imports this
    module: naming the class here would make the two import each other.
    """

    def __contains__(self, name: object, /) -> bool: ...

    def __iter__(self) -> Iterator[Tool]: ...

    def add(self, entry: Tool, *, replace: bool = False) -> Tool: ...


class MCPManager:
    """Connections to every server of an `mcpServers` config.

    Args:
        config: `{"mcpServers": {...}}` as Qwen-Agent takes it, or typed server configs.

    Raises:
        ConfigurationError: The config is malformed (checked before anything starts).
    """

    def __init__(self, config: Mapping[str, Any] | Iterable[MCPServerConfig]) -> None:
        servers = parse_mcp_config(config) if isinstance(config, Mapping) else list(config)
        self.connections = {server.name: MCPServerConnection(server) for server in servers}
        self.tools: list[MCPTool] = []

    async def connect(self) -> list[MCPTool]:
        """Open every server (concurrently) and list their tools.

        If any server fails, the others are closed again and the error names every one that
        failed, and why.

        Raises:
            MCPServerError: A server could not be started or reached.
            ConfigurationError: Two servers' tools end up with the same name.
        """
        outcomes = await asyncio.gather(
            *(c.list_tools() for c in self.connections.values()), return_exceptions=True
        )
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            await self.aclose()
            raise _combined(failures)
        tools = [t for listed in outcomes if isinstance(listed, list) for t in listed]
        names = [t.name for t in tools]
        if clashes := sorted({n for n in names if names.count(n) > 1}):
            await self.aclose()
            raise ConfigurationError(f"MCP tools with the same name: {', '.join(clashes)}")
        self.tools = tools
        return list(tools)

    async def aclose(self) -> None:
        """Close every server's session (stopping stdio servers)."""
        await asyncio.gather(*(c.close() for c in self.connections.values()))

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _combined(failures: list[BaseException]) -> BaseException:
    for failure in failures:
        if not isinstance(failure, Exception):
            return failure  # a cancellation goes on as it is
    if len(failures) == 1:
        return failures[0]
    servers = [getattr(f, "server", "?") for f in failures]
    error = MCPServerError(
        f"{len(failures)} MCP servers failed:\n" + "\n".join(f"- {f}" for f in failures),
        server=", ".join(servers),
    )
    error.__cause__ = failures[0]
    return error


async def add_mcp_servers(toolkit: ToolSet, config: Mapping[str, Any]) -> list[Tool]:
    """Open the servers of an `mcpServers` config and add all their tools to `toolkit`.

    Close them with `close_mcp_servers(toolkit)` (they also stop when the event loop ends).

    Raises:
        ConfigurationError: The config is malformed, or a tool's name is taken in the toolkit.
        MCPServerError: A server could not be started or reached.
    """
    manager = MCPManager(config)
    tools = await manager.connect()
    if taken := [t.name for t in tools if t.name in toolkit]:
        await manager.aclose()
        raise ConfigurationError(f"the toolkit already has tools named {', '.join(taken)}")
    for added in tools:
        toolkit.add(added)
    return list(tools)


async def close_mcp_servers(toolkit: ToolSet) -> None:
    """Close the sessions of every MCP server whose tools are in `toolkit`."""
    connections = {id(t.connection): t.connection for t in toolkit if isinstance(t, MCPTool)}
    await asyncio.gather(*(c.close() for c in connections.values()))
