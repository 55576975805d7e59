"""`@tool`: a tool made from a typed Python function and its docstring.

The parameters' type hints make the JSON schema and the docstring's summary and argument
descriptions (Google, reST or NumPy style) fill it in; pydantic validates each call, so a
model's `"3"` for an `int` becomes `3` and a wrong shape is reported back to the model.

A parameter annotated `RunContext` (or `RunContext[Deps]`) is not shown to the model: each
call fills it with the run's context (run, thread, user, agent, the caller's `deps`).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema

from parley.errors import ToolArgumentsError, UserError
from parley.tools.arguments import parse_tool_arguments
from parley.tools.base import InstanceTool
from parley.tools.context import RunContext
from parley.tools.executor import run_in_tool_thread

__all__ = ["FunctionTool", "tool"]


def _docs(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    import docstring_parser  # noqa: PLC0415  (only when a tool is built)

    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    summary = "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
    return summary, {p.arg_name: p.description or "" for p in doc.params}


def _is_context(annotation: Any) -> bool:
    return annotation is RunContext or typing.get_origin(annotation) is RunContext


def _context_parameter(fn: Callable[..., Any], name: str) -> str | None:
    """The parameter that receives the `RunContext`, if the function has one."""
    hints = inspect.get_annotations(fn, eval_str=True)
    found = [p for p in inspect.signature(fn).parameters if _is_context(hints.get(p))]
    if len(found) > 1:
        raise UserError(f"{name}: only one parameter may take the RunContext ({found})")
    return found[0] if found else None


def _arguments_model(fn: Callable[..., Any], name: str, docs: dict[str, str]) -> type[BaseModel]:
    hints = inspect.get_annotations(fn, eval_str=True)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(f"{name}: a tool cannot take *args or **kwargs ({param.name})")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            continue  # filled in at each call, never by the model
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=docs.get(param.name) or None))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    return create_model(f"{name}_arguments", __config__=config, **fields)


class _NoTitles(GenerateJsonSchema):
    """Leaves out the titles pydantic derives from field names.

    They are tokens that tell a model nothing the name did not.
    """

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class FunctionTool(InstanceTool):
    """A tool that calls a Python function (sync or async).

    Args:
        fn: The function; its parameters need type hints.
        name: The tool's name (the function's name by default).
        description: What it does (the docstring by default).
        requires_approval: Park the agent's run for approval before each call.
        timeout: Seconds a call may take.
        idempotent: A second call with the same arguments changes nothing more (a run
            taken over after its process died may run a call of it again).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        timeout: float | None = 60.0,
        idempotent: bool = False,
    ) -> None:
        self.fn = fn
        self._name = name or fn.__name__
        summary, docs = _docs(fn)
        self._description = description if description is not None else summary
        self.arguments_model = _arguments_model(fn, self._name, docs)
        self.context_parameter = _context_parameter(fn, self._name)
        """The parameter that receives the call's `RunContext`, if any."""
        self._requires_approval = requires_approval
        self._timeout = timeout
        self._idempotent = idempotent
        self.__doc__ = fn.__doc__
        super().__init__()

    # Per-instance values, as `InstanceTool`'s name and description.
    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]
        """The JSON schema of the function's parameters."""
        schema = self.arguments_model.model_json_schema(schema_generator=_NoTitles)
        schema.pop("title", None)
        schema.pop("additionalProperties", None)
        return schema

    @property
    def requires_approval(self) -> bool:  # type: ignore[override]
        """Whether each call waits for a person's approval."""
        return self._requires_approval

    @property
    def timeout(self) -> float | None:  # type: ignore[override]
        """Seconds a call may take."""
        return self._timeout

    def prepare(self, raw: str | dict[str, Any] | None) -> dict[str, Any]:
        """Parse (with repair guided by the schema) and validate with pydantic."""
        value = parse_tool_arguments(raw, None, tool=self.name)
        try:
            model = self.arguments_model.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'/'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: {problems}", tool_name=self.name
            ) from None
        return {field: getattr(model, field) for field in type(model).model_fields}

    def _with_context(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if self.context_parameter is None:
            return arguments
        if ctx is None:
            ctx = RunContext.detached()  # called outside a run: a direct call, a test
        return {**arguments, self.context_parameter: ctx}

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> Any:
        """Call the function with validated arguments (sync)."""
        arguments = self._with_context(self.prepare(params), kwargs.get("ctx"))
        result = self.fn(**arguments)
        if inspect.isawaitable(result):
            raise UserError(f"{self.name} is async: call it with `await tool.acall(...)`")
        return result

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> Any:
        """Call the function; a sync one runs on a tool thread (`parley.tools.executor`)."""
        arguments = self._with_context(params, kwargs.get("ctx"))
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**arguments)
        return await run_in_tool_thread(self.fn, **arguments)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly: the decorated function stays callable as itself."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = 60.0,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = 60.0,
    idempotent: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a typed function: `@tool` or `@tool(name=..., requires_approval=True)`.

    `idempotent=True` marks a tool a second call of which changes nothing more (a lookup, a
    search): a run taken over after its process died runs its unanswered calls again.

    Examples:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.
        ...
        ...     Args:
        ...         a: The first.
        ...         b: The second.
        ...     '''
        ...     return a + b
        >>> add.tool_spec().parameters["properties"]["a"]
        {'description': 'The first.', 'type': 'integer'}
    """

    def build(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            function,
            name=name,
            description=description,
            requires_approval=requires_approval,
            timeout=timeout,
            idempotent=idempotent,
        )

    return build(fn) if fn is not None else build
