"""`Toolkit`: the tools an agent holds, their schemas for the model, and running their calls.

Running a call never raises for what the model or the tool got wrong: an unknown tool,
arguments that cannot be parsed or break the schema, a tool that raises or runs past its
timeout all come back as an error result the model can read and act on.

The agent loop runs calls with the run's `RunContext`, which reaches the tools that declare
it (see `parley.tools.context`); `end_session` tells every tool a conversation is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from parley import tracing
from parley.errors import ConfigurationError, ToolArgumentsError, UserError
from parley.messages import ToolCallBlock, ToolResultBlock
from parley.models.tools import ToolSpec
from parley.tools.base import Tool, to_output
from parley.tools.context import RunContext
from parley.tools.function import FunctionTool
from parley.tools.registry import TOOL_REGISTRY

__all__ = ["ToolInput", "Toolkit"]

logger = logging.getLogger("parley.tools")

ToolInput = Tool | Callable[..., Any] | str | Mapping[str, Any]
"""A tool as a toolkit takes it: an instance, a typed function, a registered name, or
Qwen-Agent's `{"name": ..., **cfg}`."""


def _make(entry: ToolInput) -> Tool:
    if isinstance(entry, Tool):
        return entry
    if isinstance(entry, str):
        return _registered(entry, {})
    if isinstance(entry, Mapping):
        if "mcpServers" in entry:
            raise UserError("MCP servers are added with `await toolkit.add_mcp_servers(config)`")
        name = entry.get("name")
        if not isinstance(name, str):
            raise UserError(f"a tool config needs a 'name': {dict(entry)!r}")
        return _registered(name, dict(entry))
    if callable(entry):
        return FunctionTool(entry)
    raise UserError(f"cannot use {entry!r} as a tool")


def _registered(name: str, cfg: dict[str, Any]) -> Tool:
    if name not in TOOL_REGISTRY:
        # The built-in tools register themselves on import; they are imported on first need.
        import parley.tools.builtin  # noqa: F401, PLC0415
    cls = TOOL_REGISTRY.get(name)
    if cls is None:
        known = ", ".join(sorted(TOOL_REGISTRY)) or "none"
        raise ConfigurationError(f"no tool registered as {name!r}; registered: {known}")
    return cls(cfg)


def _error(
    call: ToolCallBlock,
    message: str,
    span: tracing.ToolScope,
    kind: str,
    error: BaseException | None = None,
) -> ToolResultBlock:
    span.failed(kind, message, error)  # `kind` is the span's error.type
    return ToolResultBlock(tool_call_id=call.id, name=call.name, output=message, is_error=True)


class Toolkit:
    """A set of tools by name.

    Args:
        tools: Tool instances, typed functions, registered names or `{"name": ..., **cfg}`.
    """

    def __init__(self, tools: Iterable[ToolInput] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for entry in tools:
            self.add(entry)

    def add(self, entry: ToolInput, *, replace: bool = False) -> Tool:
        """Add a tool; a name already held is an error unless `replace`."""
        made = _make(entry)
        if made.name in self._tools and not replace:
            raise ConfigurationError(f"the toolkit already has a tool named {made.name!r}")
        self._tools[made.name] = made
        return made

    async def add_mcp_servers(self, config: Mapping[str, Any]) -> list[Tool]:
        """Open the servers of an `mcpServers` config and add their tools (`<server>-<tool>`).

        See `parley.tools.mcp` (the `mcp` extra); `close_mcp_servers(toolkit)` closes them.
        """
        from parley.tools.mcp import add_mcp_servers  # noqa: PLC0415  (the optional mcp extra)

        return await add_mcp_servers(self, config)

    def remove(self, name: str) -> None:
        """Remove a tool by name (no error if absent)."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        """The tool of that name, or None."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        """The tools' names, in the order they were added."""
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The tools' descriptions for a model."""
        return [t.tool_spec() for t in self._tools.values()]

    def needs_approval(self, call: ToolCallBlock) -> bool:
        """Whether this call must wait for a person's approval."""
        found = self._tools.get(call.name)
        return bool(found and found.requires_approval)

    def is_idempotent(self, call: ToolCallBlock) -> bool:
        """Whether this call may run again: its tool is known and marked `idempotent`."""
        found = self._tools.get(call.name)
        return bool(found and found.idempotent)

    async def run(
        self, call: ToolCallBlock, ctx: RunContext[Any] | None = None, **extra: Any
    ) -> ToolResultBlock:
        """Run one call; failures become error results, never exceptions.

        Args:
            call: The model's call.
            ctx: The run's context; the tool gets it (for this call) if it declares it.
            extra: More keyword arguments for the tool (Qwen-Agent style `messages=`, ...).
        """
        found = self._tools.get(call.name)
        with tracing.tool_call(call, found) as span:  # current while the tool runs
            result = await self._run(call, found, span, ctx, extra)
            span.result(result)
        return result

    async def _run(
        self,
        call: ToolCallBlock,
        found: Tool | None,
        span: tracing.ToolScope,
        ctx: RunContext[Any] | None,
        extra: dict[str, Any],
    ) -> ToolResultBlock:
        if found is None:
            available = ", ".join(self._tools)
            message = f"there is no tool {call.name!r}; available: {available}"
            return _error(call, message, span, "tool_not_found")
        try:
            arguments = found.prepare(call.raw_input if call.raw_input is not None else call.input)
        except ToolArgumentsError as exc:
            message = f"{exc}. Call the tool again with corrected arguments."
            return _error(call, message, span, "invalid_arguments", exc)
        if ctx is not None and found.takes_context:
            extra = {**extra, "ctx": ctx.for_call(call.id, call.name)}
        try:
            # `asyncio.timeout` rather than `wait_for`: no extra task per call (3.11).
            async with asyncio.timeout(found.timeout):
                output = await found.acall(arguments, **extra)
        except TimeoutError as exc:
            message = f"{call.name} did not finish within {found.timeout} seconds"
            return _error(call, message, span, "timeout", exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.info("tool %s failed: %r", call.name, exc)
            message = f"{call.name} failed: {type(exc).__name__}: {exc}"
            return _error(call, message, span, tracing.error_type(exc), exc)
        return ToolResultBlock(tool_call_id=call.id, name=call.name, output=to_output(output))

    async def run_all(
        self,
        calls: Sequence[ToolCallBlock],
        ctx: RunContext[Any] | None = None,
        *,
        parallel: bool = True,
        into: dict[str, ToolResultBlock] | None = None,
        **extra: Any,
    ) -> list[ToolResultBlock]:
        """Run several calls, concurrently when `parallel`; results in the calls' order.

        Cancelled, it cancels the calls running and raises `CancelledError` once they have
        ended. `into` (call id to result) then holds the results of the calls that returned,
        a tool's answer to the cancel among them (`Tool.acall`); after such an answer, the
        calls still to run one by one are not started.
        """
        results = {} if into is None else into

        async def one(call: ToolCallBlock) -> ToolResultBlock:
            results[call.id] = found = await self.run(call, ctx, **extra)
            return found

        if parallel and len(calls) > 1:
            return list(await asyncio.gather(*(one(c) for c in calls)))
        ran = []
        for call in calls:
            ran.append(await one(call))
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # a tool answered a cancel
                raise asyncio.CancelledError
        return ran

    async def end_session(self, user_id: str | None, thread_id: str) -> None:
        """Tell every tool a conversation is gone (its thread was deleted); never raises."""
        for found in list(self._tools.values()):
            try:
                await found.end_session(user_id, thread_id)
            except Exception as exc:  # one tool's failure must not keep the others' state
                logger.warning("tool %s failed to end session %s: %r", found.name, thread_id, exc)
