"""`MCPTool`: one tool of an MCP server as a parley `Tool`, named `<server>-<tool>`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from parley.errors import UserError
from parley.tools.base import InstanceTool, ToolOutput
from parley.tools.mcp._errors import MCPToolError
from parley.tools.mcp._results import result_text, to_tool_output

if TYPE_CHECKING:
    from mcp_types import CallToolResult
    from mcp_types import Tool as MCPToolSpec

__all__ = ["MCPTool"]


class ServerConnection(Protocol):
    """What a tool needs of its connection: a `parley.tools.mcp.MCPServerConnection` is one.

    Named by its shape, not by the class, because the connection makes its tools
    (`list_tools`): naming the class here would make the two modules import each other.
    """

    @property
    def name(self) -> str:
        """The server's name in the config."""
        ...

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one of the server's tools by its own name."""
        ...

    async def close(self) -> None:
        """Close the session."""
        ...


class MCPTool(InstanceTool):
    """A tool an MCP server offers, called through its server's connection.

    Its name is `<server>-<tool>` (as Qwen-Agent names them), its description and parameters
    the server's. A result the server marks as an error raises `MCPToolError`, which a
    `Toolkit` hands to the model as an error result.

    It is `idempotent` when the server's annotations say so (`idempotentHint`), or say it
    changes nothing at all (`readOnlyHint`): MCP's annotations are the server's hints, and
    parley takes them as given.

    Args:
        connection: The server's connection.
        spec: The server's description of the tool.
    """

    tool_type: ClassVar[str] = "extension"  # runs in another program, the MCP server

    def __init__(self, connection: ServerConnection, spec: MCPToolSpec) -> None:
        self.connection = connection
        self.tool_name = spec.name
        self._name = f"{connection.name}-{spec.name}"
        self._description = spec.description or spec.title or ""
        schema = dict(spec.input_schema)
        schema.setdefault("type", "object")
        self._parameters = schema
        hints = spec.annotations
        self._idempotent = bool(hints and (hints.idempotent_hint or hints.read_only_hint))
        super().__init__()

    # Per-instance values, as `InstanceTool`'s name, description and idempotence.
    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]
        """The tool's input schema, as the server gave it."""
        return self._parameters

    @property
    def timeout(self) -> float | None:  # type: ignore[override]
        """None: the connection bounds each call (its `timeout`) and each reconnection."""
        return None

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> ToolOutput:
        """Call the tool on its server.

        Raises:
            MCPToolError: The tool reported an error, or the server refused the call.
            MCPTimeoutError: No answer within the server's `timeout`.
            MCPServerError: The server could not be reached, even after reconnecting once.
        """
        result = await self.connection.call_tool(self.tool_name, params)
        if result.is_error:
            raise MCPToolError(
                result_text(result) or "the tool reported an error",
                server=self.connection.name,
                tool_name=self.name,
            )
        return to_tool_output(result)

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> ToolOutput:
        """Call the tool from sync code (Qwen-Agent style), on a short-lived event loop.

        Each such call opens the server's session anew (a session belongs to its loop):
        prefer `await acall(...)`.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._call_once(self._verify_json_format_args(params)))
        raise UserError(f"{self.name} is async: call it with `await tool.acall(...)`")

    async def _call_once(self, params: dict[str, Any]) -> ToolOutput:
        try:
            return await self.acall(params)
        finally:
            await self.connection.close()
