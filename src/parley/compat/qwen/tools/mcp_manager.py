"""Qwen-Agent's `MCPManager`: tools from an `{"mcpServers": {...}}` config, from sync code.

Agents take the config in `function_list` directly (opened on their first run). This class
is for code that calls Qwen-Agent's manager itself: `MCPManager().initConfig(config)` opens
every server (stdio or HTTP, through the official `mcp` SDK: the `mcp` extra) and returns
their tools, named `<server>-<tool>` as Qwen-Agent names them; `shutdown()` closes them.
Unlike Qwen-Agent's, it is no process-wide singleton: each instance owns its servers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley._sync import run_sync
from parley.tools import Tool, Toolkit

__all__ = ["MCPManager"]


class MCPManager:
    """Opens `mcpServers` configs and keeps their servers until `shutdown`."""

    def __init__(self) -> None:
        self.toolkit = Toolkit()

    def initConfig(self, config: Mapping[str, Any]) -> list[Tool]:  # noqa: N802  (Qwen-Agent's name)
        """Open the config's servers; their tools.

        Raises:
            ConfigurationError: The config is malformed.
            MCPServerError: A server could not be started or reached.
        """
        return run_sync(self.toolkit.add_mcp_servers(config))

    def shutdown(self) -> None:
        """Close every server opened here (stdio servers stop)."""
        from parley.tools.mcp import close_mcp_servers  # noqa: PLC0415  (the mcp extra)

        run_sync(close_mcp_servers(self.toolkit))
