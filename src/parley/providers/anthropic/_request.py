"""The parts of a Messages API request body that parameters and tools make.

Sources: the Messages API reference (`tools`, `tool_choice`, `thinking`, `output_config`,
`stop_sequences`, `metadata`, `service_tier`), the tool-use guide (with thinking on, only
`auto` and `none` tool choices are taken; Claude Sonnet 5.5, Opus 5.5 and Fable 5.1 take no
forced choice at all, each model's "What's new" page), and the prompt-caching guide (`cache_control`
breakpoints: at most four; thinking blocks take none of their own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley.errors import MissingDependencyError, UserError
from parley.models.base import ChatRequest
from parley.providers.anthropic.parameters import AnthropicParameters

__all__ = ["mark_cache", "parameter_fields", "tool_fields"]

Payload = dict[str, Any]


def _marked(block: Payload, cache: Payload) -> Payload:
    # A copy: blocks kept raw in messages are the stored ones, never to be changed.
    return {**block, "cache_control": cache}


def _cache_control(parameters: AnthropicParameters) -> Payload:
    cache: Payload = {"type": "ephemeral"}
    if parameters.cache_ttl is not None:
        cache["ttl"] = parameters.cache_ttl
    return cache


def tool_fields(request: ChatRequest, parameters: AnthropicParameters, *, thinks: bool) -> Payload:
    """`tools` (function tools, then server tools) and `tool_choice`; nothing without tools.

    Raises:
        UserError: A forced tool choice while the model thinks (the API refuses it).
    """
    tools: list[Payload] = [
        {"name": s.name, "description": s.description, "input_schema": s.parameters}
        | ({"strict": s.strict} if s.strict is not None else {})
        for s in request.tools
    ]
    tools += parameters.server_tools or []
    if not tools:
        return {}
    if parameters.cache_tools:
        tools[-1] = _marked(tools[-1], _cache_control(parameters))
    fields: Payload = {"tools": tools}
    choice = _tool_choice(request.tool_choice, parameters, thinks=thinks)
    if choice is not None:
        fields["tool_choice"] = choice
    return fields


def _tool_choice(
    choice: str | None, parameters: AnthropicParameters, *, thinks: bool
) -> Payload | None:
    serial = parameters.parallel_tool_calls is False
    if choice is None:
        return {"type": "auto", "disable_parallel_tool_use": True} if serial else None
    if choice == "none":
        return {"type": "none"}
    if choice == "auto":
        wire: Payload = {"type": "auto"}
    else:
        if thinks:
            raise UserError(
                f"Claude refuses a forced tool choice ({choice!r}) while it thinks: use "
                "tool_choice='auto', or turn thinking off (thinking='disabled', on a model "
                "whose card takes it)"
            )
        wire = {"type": "any"} if choice == "required" else {"type": "tool", "name": choice}
    if serial:
        wire["disable_parallel_tool_use"] = True
    return wire


def parameter_fields(
    request: ChatRequest,
    parameters: AnthropicParameters,
    max_tokens: int,
    *,
    default_thinking: str | None = None,
) -> Payload:
    """`thinking`, `output_config`, `stop_sequences`, `metadata` and `service_tier`.

    Args:
        request: The request.
        parameters: Its parameters.
        max_tokens: The `max_tokens` sent.
        default_thinking: The thinking mode the model uses unless told (its card's), which a
            `thinking_display` alone is sent with.

    Raises:
        UserError: A thinking budget not below `max_tokens`, a `thinking_display` for a model
            that does not think, or a response schema the API's structured outputs cannot
            take.
    """
    fields: Payload = {}
    thinking = _thinking(parameters, max_tokens, default_thinking)
    if thinking is not None:
        fields["thinking"] = thinking
    output: Payload = {}
    if parameters.effort is not None:
        output["effort"] = parameters.effort
    if request.response_format is not None:
        output["format"] = {"type": "json_schema", "schema": _api_schema(request.response_format)}
    if output:
        fields["output_config"] = output
    if parameters.stop:
        fields["stop_sequences"] = parameters.stop
    if parameters.user_id is not None:
        fields["metadata"] = {"user_id": parameters.user_id}
    if parameters.service_tier is not None:
        fields["service_tier"] = parameters.service_tier
    return fields


def _thinking(
    parameters: AnthropicParameters, max_tokens: int, default: str | None
) -> Payload | None:
    mode = parameters.thinking
    budget = parameters.thinking_budget
    if budget is not None:
        if budget >= max_tokens:
            raise UserError(f"thinking_budget ({budget}) must be below max_tokens ({max_tokens})")
        mode = "enabled"
    if mode is None and parameters.thinking_display is not None:
        # `display` goes inside `thinking`, which then has to name the mode: the model's own
        # (adaptive; a default of extended thinking would need a budget).
        if default != "adaptive":
            raise UserError(
                "thinking_display applies while the model thinks: set thinking (or "
                "thinking_budget) too"
            )
        mode = "adaptive"
    if mode is None:
        return None
    thinking: Payload = {"type": mode}
    if budget is not None:
        thinking["budget_tokens"] = budget
    if parameters.thinking_display is not None and mode in ("enabled", "adaptive"):
        thinking["display"] = parameters.thinking_display
    return thinking


def mark_cache(body: Payload, parameters: AnthropicParameters) -> None:
    """Put the system prompt's and the last message's cache breakpoints in `body`."""
    cache = _cache_control(parameters)
    system = body.get("system")
    if parameters.cache_system and system:
        body["system"] = [*system[:-1], _marked(system[-1], cache)]
    messages: list[Payload] = body["messages"]
    if parameters.cache_messages and messages:
        last = messages[-1]
        content = list(last["content"])
        for position in range(len(content) - 1, -1, -1):
            if content[position].get("type") not in ("thinking", "redacted_thinking"):
                content[position] = _marked(content[position], cache)
                break
        messages[-1] = {**last, "content": content}


def _api_schema(schema: dict[str, Any]) -> Mapping[str, Any]:
    """A response schema as the API's structured outputs take it (the SDK's `transform_schema`).

    Raises:
        UserError: The schema has a form the API cannot take.
        MissingDependencyError: The `anthropic` package is not installed.
    """
    try:
        from anthropic import transform_schema  # noqa: PLC0415  (`import anthropic`: ~1 s)
    except ImportError as exc:
        raise MissingDependencyError("anthropic", "anthropic") from exc
    try:
        return transform_schema(schema)
    except (ValueError, TypeError) as exc:
        raise UserError(f"Claude's structured outputs cannot take this schema: {exc}") from None
