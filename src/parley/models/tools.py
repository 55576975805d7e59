"""Tool descriptions as a model sees them, and the `tool_choice` rules.

A chat model takes tools as JSON-schema dicts (parley's `{"name", "description",
"parameters"}` or OpenAI's `{"type": "function", "function": {...}}`) or as objects that
describe themselves (`tool_spec()`, as parley's tools do), and normalizes them to `ToolSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from parley.errors import UserError

__all__ = [
    "ToolChoice",
    "ToolChoicePolicy",
    "ToolLike",
    "ToolSpec",
    "check_tool_choice",
    "one_tool_round",
    "to_tool_specs",
]

ToolChoice = Literal["auto", "none", "required"] | str
"""`auto` (the model decides), `none` (no tools), `required` (some tool), or a tool's name."""

ToolChoicePolicy = str | Callable[[int], str | None] | None
"""A `tool_choice` for the first model call of a run, or a function of the call's index
(0 for a run's first call, counted on across a resume) giving each call's choice.

An agent takes one (`Agent(tool_choice=...)`); a chat model may carry the one that suits it
(`ChatModel.default_tool_choice`), which agents use when they are given none."""


def one_tool_round(index: int) -> str:
    """A `ToolChoicePolicy`: tools in a run's first model call only, then an answer.

    For small models (the embedded local one) that call a tool whenever they may: the run
    makes one tool round and the next call must answer.
    """
    return "auto" if index == 0 else "none"


_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class ToolSpec(BaseModel):
    """A tool's name, description and JSON schema of its arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: dict(_EMPTY_OBJECT))
    strict: bool | None = None

    def openai(self) -> dict[str, Any]:
        """The OpenAI Chat Completions `tools` entry."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


@runtime_checkable
class ToolLike(Protocol):
    """Anything that can describe itself to a model as a tool."""

    def tool_spec(self) -> ToolSpec:
        """The tool's description for a model."""
        ...


def _from_mapping(data: Mapping[str, Any]) -> ToolSpec:
    if data.get("type") == "function" and isinstance(data.get("function"), Mapping):
        data = data["function"]
    try:
        return ToolSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise UserError(f"not a valid tool description {dict(data)!r}: {exc}") from None


def to_tool_specs(
    tools: Sequence[ToolSpec | ToolLike | Mapping[str, Any]] | None,
) -> list[ToolSpec]:
    """Normalize tools given in any accepted form; names must be unique.

    Raises:
        UserError: A tool is of no accepted form, or two share a name.
    """
    specs: list[ToolSpec] = []
    for tool in tools or ():
        if isinstance(tool, ToolSpec):
            specs.append(tool)
        elif isinstance(tool, Mapping):
            specs.append(_from_mapping(tool))
        elif isinstance(tool, ToolLike):
            specs.append(tool.tool_spec())
        else:
            raise UserError(
                f"cannot use {tool!r} as a tool: pass a JSON-schema dict, a ToolSpec or a tool"
            )
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UserError(f"two tools share the name {duplicates[0]!r}; tool names must be unique")
    return specs


def check_tool_choice(tool_choice: str | None, specs: Sequence[ToolSpec]) -> str | None:
    """Check `tool_choice` against the tools given.

    Raises:
        UserError: `required` or a tool name without tools, or a name that is not a tool's.
    """
    if tool_choice is None or tool_choice in ("auto", "none"):
        return tool_choice
    names = [spec.name for spec in specs]
    if not names:
        raise UserError(f"tool_choice={tool_choice!r} needs tools, and none were given")
    if tool_choice != "required" and tool_choice not in names:
        raise UserError(
            f"tool_choice={tool_choice!r} is not one of the tools given ({', '.join(names)}); "
            "use 'auto', 'none', 'required' or a tool's name"
        )
    return tool_choice
