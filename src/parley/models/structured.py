"""Structured output: an answer that validates against a pydantic model or a JSON schema.

The strategies, tried in the order the model class lists them (`structured_strategies`), each
falling back to the next when the provider refuses it (a 400-class error) or the model does
not answer through it:

- `native`: the provider constrains output to the schema itself (a JSON-schema grammar);
- `forced`: a tool whose parameters are the schema, with `tool_choice` set to it;
- `auto`: the same tool, the model left to call it (for providers without forced choice);
- `thinking_off`: `forced` again with reasoning switched off (reasoning models often refuse
  forced tool calls while thinking);
- `text`: the schema in the prompt and JSON read from the answer's text.

The output is repaired with `json-repair` guided by the schema, then validated; when it does
not validate, the error goes back to the model for one more try.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import json_repair
import jsonschema
from pydantic import BaseModel, ValidationError

from parley.errors import ModelHTTPError, ModelOutputError, UserError
from parley.messages import Msg, ToolCallBlock
from parley.models.response import ChatResponse, ChatUsage, StructuredResponse
from parley.models.tools import ToolSpec

if TYPE_CHECKING:
    from parley.models.request import ChatRequest, MessagesInput

__all__ = ["STRUCTURED_TOOL", "generate_structured_output"]


class StructuredModel(Protocol):
    """What structured output needs of a chat model: a `parley.models.ChatModel` is one.

    Named by its shape, not by the class, because `ChatModel.generate_structured_output`
    imports this module (lazily: JSON repair and schema validation load only when asked).
    """

    provider: ClassVar[str]
    model: str

    def build_request(
        self,
        messages: MessagesInput,
        tools: Any = None,
        tool_choice: str | None = None,
        response_format: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> ChatRequest: ...

    async def complete(self, request: ChatRequest) -> ChatResponse: ...


STRUCTURED_TOOL = "generate_response"
"""The name of the tool the structured answer is asked through."""

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


@dataclass
class _Target:
    """The schema to meet and how to check an answer against it."""

    schema: dict[str, Any]
    model: type[BaseModel] | None

    def check(self, data: Any) -> tuple[dict[str, Any], Any]:
        """Validate `data`: `(content, parsed)`; raises ValueError saying what is wrong."""
        if self.model is not None:
            parsed = self.model.model_validate(data)
            return parsed.model_dump(mode="json"), parsed
        try:
            jsonschema.validate(data, self.schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            raise ValueError(f"at {where}: {exc.message}") from None
        if not isinstance(data, dict):
            raise ValueError("the answer must be a JSON object")
        return data, None


def _target(schema: type[BaseModel] | Mapping[str, Any]) -> _Target:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return _Target(schema.model_json_schema(), schema)
    if not isinstance(schema, Mapping):
        raise UserError("schema must be a pydantic model class or a JSON schema dict")
    try:
        jsonschema.Draft202012Validator.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise UserError(f"not a valid JSON schema: {exc.message}") from None
    if schema.get("type") != "object":
        raise UserError("the JSON schema must describe an object (`type: object`)")
    return _Target(dict(schema), None)


def _tool(target: _Target) -> ToolSpec:
    description = target.schema.get("description") or "Give the final answer as structured data."
    return ToolSpec(name=STRUCTURED_TOOL, description=description, parameters=target.schema)


def _repair(raw: str, target: _Target) -> Any:
    try:
        return json_repair.loads(raw, schema=target.model or target.schema)
    except (ValueError, TypeError):
        # Schema-guided repair refuses what it cannot map; plain repair may still read it.
        return json_repair.loads(raw)


def _from_text(text: str) -> str:
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def _answer(response: ChatResponse, via_tool: bool) -> tuple[str, ToolCallBlock | None] | None:
    """The raw answer: the structured tool's arguments, or the text. None if absent."""
    if via_tool:
        call = next((c for c in response.tool_calls if c.name == STRUCTURED_TOOL), None)
        if call is None:
            return None
        return call.raw_input or json.dumps(call.input, ensure_ascii=False), call
    text = response.text.strip()
    return (_from_text(text), None) if text else None


@dataclass
class _Strategy:
    name: str
    via_tool: bool
    tool_choice: str | None
    overrides: dict[str, Any]
    response_format: bool = False
    instruct: bool = False


def _strategies(model: StructuredModel) -> list[_Strategy]:
    thinking_off: dict[str, Any] = dict(getattr(model, "thinking_off", {}) or {})
    table: dict[str, Callable[[], _Strategy | None]] = {
        "native": lambda: _Strategy("native", False, None, {}, response_format=True),
        "forced": lambda: _Strategy("forced", True, STRUCTURED_TOOL, {}),
        "auto": lambda: _Strategy("auto", True, "auto", {}, instruct=True),
        "thinking_off": lambda: (
            _Strategy("thinking_off", True, STRUCTURED_TOOL, thinking_off) if thinking_off else None
        ),
        "text": lambda: _Strategy("text", False, None, {}, instruct=True),
    }
    names: tuple[str, ...] = getattr(model, "structured_strategies", ())
    return [s for n in names if (s := table[n]()) is not None]


def _instruction(target: _Target, via_tool: bool) -> Msg:
    if via_tool:
        return Msg.user(f"Answer by calling the `{STRUCTURED_TOOL}` tool with your result.")
    schema = json.dumps(target.schema, ensure_ascii=False)
    return Msg.user(
        "Reply with only a JSON object, no other text, that follows this JSON schema:\n" + schema
    )


def _feedback(response: ChatResponse, call: ToolCallBlock | None, error: str) -> list[Msg]:
    """Messages telling the model why its answer was refused."""
    hint = f"That answer does not fit the schema: {error}. Please answer again, corrected."
    if call is not None:
        return [
            Msg(role="assistant", content=[call]),
            Msg.tool_result(call.id, hint, name=STRUCTURED_TOOL, is_error=True),
        ]
    return [Msg(role="assistant", content=[*response.content]), Msg.user(hint)]


async def _ask(
    model: StructuredModel, msgs: list[Msg], strategy: _Strategy, target: _Target, overrides: Any
) -> ChatResponse:
    request = model.build_request(
        msgs,
        tools=[_tool(target)] if strategy.via_tool else None,
        tool_choice=strategy.tool_choice,
        response_format=target.schema if strategy.response_format else None,
        **{**overrides, **strategy.overrides},
    )
    return await model.complete(request)


async def _attempt(
    model: StructuredModel,
    msgs: list[Msg],
    strategy: _Strategy,
    target: _Target,
    overrides: dict[str, Any],
    usage: list[ChatUsage],
) -> StructuredResponse | None:
    """Run one strategy with one corrective retry; None when the model did not use it."""
    if strategy.instruct:
        msgs = [*msgs, _instruction(target, strategy.via_tool)]
    error = ""
    for attempt in (1, 2):
        response = await _ask(model, msgs, strategy, target, overrides)
        usage.append(response.usage or ChatUsage())
        answer = _answer(response, strategy.via_tool)
        if answer is None:
            return None
        raw, call = answer
        try:
            content, parsed = target.check(_repair(raw, target))
        except (ValueError, ValidationError) as exc:
            error = str(exc)
            msgs = [*msgs, *_feedback(response, call, error)]
            continue
        return StructuredResponse(
            content=content,
            parsed=parsed,
            usage=sum(usage, ChatUsage()),
            response=response,
            strategy=strategy.name,
            attempts=attempt,
        )
    raise ModelOutputError(
        f"the model's structured answer did not fit the schema after a retry: {error}",
        model=model.model,
        provider=model.provider,
    )


async def generate_structured_output(
    model: StructuredModel,
    messages: MessagesInput,
    schema: type[BaseModel] | Mapping[str, Any],
    **overrides: Any,
) -> StructuredResponse:
    """Ask `model` for an answer that validates against `schema`; see the module docstring.

    Raises:
        UserError: The schema is not a pydantic model or an object JSON schema.
        ModelOutputError: No strategy produced an answer that fits the schema.
    """
    target = _target(schema)
    msgs = model.build_request(messages).messages
    usage: list[ChatUsage] = []
    refusals: list[str] = []
    for strategy in _strategies(model):
        try:
            result = await _attempt(model, msgs, strategy, target, overrides, usage)
        except ModelHTTPError as exc:
            if exc.status_code not in (400, 404, 422):
                raise
            refusals.append(f"{strategy.name}: {exc}")
            continue
        except UserError as exc:
            refusals.append(f"{strategy.name}: {exc}")
            continue
        if result is not None:
            return result
        refusals.append(f"{strategy.name}: the model did not answer that way")
    raise ModelOutputError(
        "no structured answer: " + "; ".join(refusals), model=model.model, provider=model.provider
    )
