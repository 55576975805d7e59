"""`Tool`: the base of every tool, compatible with Qwen-Agent's `BaseTool`.

A Qwen-Agent style tool class (class attributes `name`, `description`, `parameters` as a JSON
schema or Qwen's list form, a sync `call(params, **kwargs)` that reads the arguments, JSON
text, with `self._verify_json_format_args(params)` or `json5.loads(params)`) works
unchanged. parley calls tools through
`acall`, which runs a sync `call` on the tools' own threads (`parley.tools.executor`) so the
event loop keeps going; async tools override `acall` itself.

A tool whose `call` (or `acall`) takes a `ctx` parameter or `**kwargs` receives the call's
`RunContext` as `ctx` (see `parley.tools.context`).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from parley.errors import ToolArgumentsError, ToolError
from parley.messages import AudioBlock, FileBlock, ImageBlock, OutputBlock, TextBlock, VideoBlock
from parley.models.tools import ToolSpec
from parley.tools._qwen_content import QwenContentItem, block_from_content
from parley.tools.arguments import parse_tool_arguments, qwen_list_to_schema
from parley.tools.executor import run_in_tool_thread

__all__ = ["Tool", "ToolOutput", "to_output"]

ToolOutput = str | list[OutputBlock]
"""What a tool result holds: text, or a list of text and media blocks."""

_CJK = re.compile(r"[\u4e00-\u9fff]")
_OUTPUT_CLASSES = (TextBlock, ImageBlock, AudioBlock, VideoBlock, FileBlock)


def _block_output(value: Sequence[Any]) -> list[OutputBlock] | None:
    """A list of output blocks (or Qwen-Agent ContentItems), or None if it is other data."""
    if not value:
        return None
    if all(isinstance(item, _OUTPUT_CLASSES) for item in value):
        return list(value)
    # Known by their shape: parley.compat.qwen sits above tools (and Qwen-Agent's own count).
    if all(isinstance(item, QwenContentItem) for item in value):
        return [block_from_content(*item.get_type_and_value()) for item in value]
    return None


def to_output(value: Any) -> ToolOutput:
    """Turn what a tool returned into a tool result's output.

    Text stays text; a block or a list of blocks (or Qwen-Agent ContentItems) is kept as
    media; anything else is written as JSON.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, _OUTPUT_CLASSES):
        return [value]
    if isinstance(value, (list, tuple)) and (blocks := _block_output(value)) is not None:
        return blocks
    return json.dumps(value, ensure_ascii=False, default=str)


def _as_json_text(params: dict[str, Any]) -> str | dict[str, Any]:
    """The arguments as JSON text; as they are if they are no JSON (a caller's objects)."""
    try:
        return json.dumps(params, ensure_ascii=False)
    except (TypeError, ValueError):
        return params


_CONTEXT_TAKERS: dict[type[Tool], bool] = {}


def _takes_context(cls: type[Tool]) -> bool:
    found = _CONTEXT_TAKERS.get(cls)
    if found is None:
        # `acall` when the class overrides it, else the `call` the base `acall` passes to.
        method = cls.acall if cls.acall is not Tool.acall else cls.call
        parameters = inspect.signature(method).parameters.values()
        found = any(p.name == "ctx" or p.kind is p.VAR_KEYWORD for p in parameters)
        _CONTEXT_TAKERS[cls] = found
    return found


class Tool:
    """A tool a model can call, in Qwen-Agent's shape.

    Subclasses set `name` (or get it from `@register_tool`), `description` and `parameters`,
    and implement `call` (sync, Qwen-Agent style) or `acall` (async).

    Args:
        cfg: Per-instance configuration (Qwen-Agent's `cfg`: `name_for_human`, `args_format`,
            and whatever the tool reads).

    Attributes:
        requires_approval: The agent parks the run for a person's approval before calling it.
        timeout: Seconds a call may take before it is reported to the model as failed.
        idempotent: Calling it again with the same arguments has no further effect (a
            search, a read). A run taken over after its process died runs a call left
            without a result again only for such a tool; any other gets an error result
            saying it was interrupted (`parley.agents.run`).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {}
    requires_approval: ClassVar[bool] = False
    timeout: ClassVar[float | None] = 60.0
    idempotent: ClassVar[bool] = False
    tool_type: ClassVar[str] = "function"
    """What tracing calls it (`gen_ai.tool.type`): `function`, `extension` (an outside
    service's, as MCP tools are) or `datastore` (a search of documents)."""

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        self.cfg: dict[str, Any] = dict(cfg or {})
        if not self.name:
            raise ToolError(
                f"{type(self).__name__} has no name: set the class attribute `name` or "
                "decorate it with @register_tool('<name>')"
            )
        self.json_schema = self._schema()

    def _schema(self) -> dict[str, Any]:
        parameters = self.parameters
        if isinstance(parameters, list):
            return qwen_list_to_schema(parameters)
        if not isinstance(parameters, dict):
            raise ToolError(f"{self.name}: parameters must be a JSON schema or a list of dicts")
        if not parameters:
            return {"type": "object", "properties": {}}
        if parameters.get("type") != "object":
            raise ToolError(f"{self.name}: the parameters schema must be of `type: object`")
        return dict(parameters)

    # -- Qwen-Agent's surface ---------------------------------------------------------------

    @property
    def name_for_human(self) -> str:
        """A display name (Qwen-Agent's `name_for_human`)."""
        return str(self.cfg.get("name_for_human", self.name))

    @property
    def args_format(self) -> str:
        """How the model should format arguments (Qwen-Agent's `args_format`)."""
        fmt = self.cfg.get("args_format")
        if fmt:
            return str(fmt)
        if _CJK.search(self.description):
            return "此工具的输入应为JSON对象。"
        return "Format the arguments as a JSON object."

    @property
    def file_access(self) -> bool:
        """Whether the tool reads files the conversation mentions (Qwen-Agent's flag)."""
        return False

    @property
    def function(self) -> dict[str, Any]:
        """The tool's description as Qwen-Agent lays it out."""
        return {
            "name_for_human": self.name_for_human,
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "args_format": self.args_format,
        }

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> Any:
        """Run the tool (sync, Qwen-Agent style); override this or `acall`."""
        raise NotImplementedError(f"{type(self).__name__} implements neither call nor acall")

    def _verify_json_format_args(
        self, params: str | dict[str, Any], strict_json: bool = False
    ) -> dict[str, Any]:
        """Parse and check arguments as Qwen-Agent does; raises `ToolArgumentsError`.

        `ToolArgumentsError` is also a `ValueError`, which is what Qwen-Agent raises here.
        """
        if isinstance(params, str) and strict_json:
            try:
                params = json.loads(params)
            except ValueError:
                raise ToolArgumentsError(
                    "Parameters cannot be converted to Json Format!", tool_name=self.name
                ) from None
        return parse_tool_arguments(params, self.json_schema, tool=self.name)

    # -- parley's surface ---------------------------------------------------------------------

    def tool_spec(self) -> ToolSpec:
        """The tool's description for a model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.json_schema)

    def prepare(self, raw: str | dict[str, Any] | None) -> dict[str, Any]:
        """Arguments as the model wrote them, parsed and validated; raises ToolArgumentsError."""
        return parse_tool_arguments(raw, self.json_schema, tool=self.name)

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> Any:
        """Run the tool; by default the sync `call` on a tool thread.

        `call` gets the checked arguments as JSON text, as Qwen-Agent hands a tool the
        model's arguments: its documented tools read them with `json5.loads(params)`, and
        `_verify_json_format_args` takes either form.

        A cancelled run cancels the calls it runs: `CancelledError` is raised in `acall`.
        A tool that can stop its work may catch it, stop, and return what happened (the
        code interpreter returns "Stopped by cancel" with the output so far, through
        `parley.tools.executor.run_interruptible`); the agent loop records that result.
        A tool that lets it propagate is recorded as `CANCELLED`.
        """
        return await run_in_tool_thread(self.call, _as_json_text(params), **kwargs)

    @property
    def local_only(self) -> bool:
        """Whether only this machine's users may call it (the service refuses others).

        For tools that cannot protect the machine from whoever drives the model: the code
        interpreter in a sandbox weaker than bubblewrap.
        """
        return False

    @property
    def takes_context(self) -> bool:
        """Whether calls get the `RunContext` (as `ctx`): `call`/`acall` take `ctx` or **kwargs."""
        return _takes_context(type(self))

    async def end_session(self, user_id: str | None, thread_id: str) -> None:
        """Free what the tool holds for one conversation: its thread was deleted.

        Tools that keep per-conversation state (keyed by `RunContext.session_key`) override
        it; the default holds nothing.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
