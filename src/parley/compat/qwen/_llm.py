"""One model call as Qwen-Agent's `BaseChatModel.chat` makes it, on a parley chat model.

`prepare_call` reads the call (Qwen messages, Qwen-Agent function descriptions, the merged
`generate_cfg`s) into a parley `ChatRequest`; `ModelCall.stream` yields the response so far
after each delta, and the completed message last; `ModelCall.complete` returns it whole.

Which tool choice a call gets:

1. the call's own `function_choice` (its `extra_generate_cfg`), as Qwen-Agent applies it;
2. else the agent's (`Agent.extra_generate_cfg`, then the llm config's): `auto` and `none` on
   every call, a function's name on the first call after the latest user message only (as
   `FnCallAgent` forces it on a run's first call, so that it cannot repeat until the limit);
3. else the model's own policy (`ChatModel.default_tool_choice`) for the call's position
   after the latest user message: one tool round and then an answer on the embedded local
   model, whose tiny model otherwise calls a tool whenever it may.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from parley.agents import ContextBudget, MessageCompleted
from parley.agents.run import chunk_events, model_calls_since_question
from parley.compat.qwen._llm_config import LLMConfig, pop_agent_settings
from parley.compat.qwen._response import QwenMessages, QwenResponse, Response, output
from parley.compat.qwen.convert import as_dicts_like, to_msgs
from parley.errors import ConfigurationError, MessageError, ToolArgumentsError, UserError
from parley.messages import Msg
from parley.models.base import ChatModel, ChatRequest
from parley.models.tools import ToolSpec, to_tool_specs
from parley.tools.arguments import qwen_list_to_schema

__all__ = [
    "GenerateSettings",
    "InputBudget",
    "ModelCall",
    "budget_for",
    "generate_settings",
    "merge_generate_cfgs",
    "prepare_call",
    "with_model_stop",
]

T = TypeVar("T")


class InputBudget(ContextBudget):
    """Qwen-Agent's `max_input_tokens`: a bound on the prompt, whatever the model's window."""

    def __init__(self, model: ChatModel, max_input_tokens: int) -> None:
        super().__init__(model)
        self.max_input_tokens = max_input_tokens

    @property
    def limit(self) -> int | None:
        """The tokens a prompt may take (tools included); None (no trimming) if 0 or less."""
        return self.max_input_tokens if self.max_input_tokens > 0 else None


def budget_for(model: ChatModel, max_input_tokens: int | None) -> ContextBudget:
    """The context budget of `max_input_tokens`, else of the model's own context size."""
    if max_input_tokens is None:
        return ContextBudget(model)
    return InputBudget(model, max_input_tokens)


def merge_generate_cfgs(
    base: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`new` over `base`, as Qwen-Agent merges them: keys replaced, `stop` lists united."""
    merged = dict(base or {})
    for key, value in (new or {}).items():
        if key == "stop":
            merged["stop"] = _united(merged.get("stop"), value)
        else:
            merged[key] = value
    return merged


def _united(stop: Any, more: Any) -> list[Any]:
    before = _stop_list(stop)
    return before + [s for s in _stop_list(more) if s not in before]


def _stop_list(stop: Any) -> list[Any]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


@dataclass
class GenerateSettings:
    """What one `generate_cfg` says: the agent's settings, and the model's parameters."""

    function_choice: str | None = None
    parallel_tool_calls: bool | None = None
    max_input_tokens: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)


def generate_settings(cfg: Mapping[str, Any] | None, where: str) -> GenerateSettings:
    """Read a `generate_cfg` (`where` names it in errors).

    Raises:
        ConfigurationError: It is not a dict, or an agent setting has a bad value.
    """
    if cfg is not None and not isinstance(cfg, Mapping):
        raise ConfigurationError(f"{where} must be a dict, got {cfg!r}")
    generate = dict(cfg or {})
    # Qwen-Agent's agents pass their `lang` in every call's config: it only picks prompts.
    generate.pop("lang", None)
    agent = pop_agent_settings(generate, where)
    return GenerateSettings(parameters=generate, **agent)


def with_model_stop(model: ChatModel, parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` with their `stop` united with the model's own, as Qwen-Agent's llm cfg is."""
    if "stop" in parameters:
        parameters = {**parameters, "stop": _united(model.parameters.stop, parameters["stop"])}
    return parameters


def function_specs(functions: Sequence[Mapping[str, Any]] | None) -> list[ToolSpec]:
    """The tool specs of Qwen-Agent function descriptions (`BaseTool.function`, OpenAI's form).

    Raises:
        UserError: A description without a name, or two of the same name.
    """
    described = []
    for given in functions or ():
        if not isinstance(given, Mapping):
            raise UserError(f"a function description is a dict, got {given!r:.80}")
        inner = given.get("function")
        # OpenAI's {"type": "function", "function": {...}}, or Qwen-Agent's own.
        function = inner if isinstance(inner, Mapping) else given
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if isinstance(parameters, list):  # Qwen-Agent's list form
            parameters = qwen_list_to_schema(parameters)
        described.append(
            {
                "name": function.get("name") or function.get("name_for_model"),
                "description": function.get("description") or "",
                "parameters": parameters,
            }
        )
    return to_tool_specs(described)


def _tool_choice(
    model: ChatModel, call: GenerateSettings, agent: str | None, history: Sequence[Msg]
) -> str | None:
    if call.function_choice is not None:
        return call.function_choice
    index = model_calls_since_question(history)
    if agent is not None:
        return agent if agent in ("auto", "none") or index == 0 else None
    default = model.default_tool_choice
    if callable(default):
        return default(index)
    return default if index == 0 else None


@dataclass
class ModelCall:
    """A prepared model call; `stream` or `complete` it (once)."""

    model: ChatModel
    request: ChatRequest
    as_dicts: bool

    async def stream(self) -> AsyncIterator[QwenResponse]:
        """The response so far after each delta; last, the completed message(s)."""
        response = Response(None)
        seen: set[str] = set()
        async with self.model.open_stream(self.request) as stream:
            async for chunk in stream:
                if chunk.is_last:
                    break
                changed = [response.feed(event) for event in chunk_events(chunk, seen)]
                if any(changed):
                    yield output(response.messages(), self.as_dicts)
            final = stream.response
        assert final is not None  # the stream ended: its final chunk is set
        response.feed(MessageCompleted(msg=final.to_msg()))
        yield output(response.messages(), self.as_dicts)

    async def complete(self) -> QwenResponse:
        """The whole response."""
        response = Response(None)
        answer = await self.model.complete(self.request)
        response.feed(MessageCompleted(msg=answer.to_msg()))
        return output(response.messages(), self.as_dicts)


def prepare_call(
    config: LLMConfig,
    budget: ContextBudget,
    agent_cfg: Mapping[str, Any] | None,
    messages: QwenMessages,
    functions: Sequence[Mapping[str, Any]] | None,
    call_cfg: Mapping[str, Any] | None,
) -> ModelCall:
    """Read one `_call_llm` call into a request to `config.model`.

    `agent_cfg` is the agent's `extra_generate_cfg`, `call_cfg` the call's; both go over the
    llm config's settings as Qwen-Agent merges them (see the module docstring for the tool
    choice). `budget` fits the prompt, unless either sets its own `max_input_tokens`.

    Raises:
        ValidationError: An item is not a Qwen message.
        MessageError: No messages, or messages a `Msg` cannot hold.
        ConfigurationError: A function description, setting or parameter parley cannot use.
    """
    history = to_msgs(messages)
    if not history:
        raise MessageError("messages can not be empty")
    agent = generate_settings(agent_cfg, "extra_generate_cfg of the agent")
    call = generate_settings(call_cfg, "extra_generate_cfg")
    model = config.model
    parameters = merge_generate_cfgs(agent.parameters, call.parameters)
    parameters = with_model_stop(model, parameters)
    parallel = _first(call.parallel_tool_calls, agent.parallel_tool_calls)
    parallel = _first(parallel, config.parallel_tool_calls)
    max_input = _first(call.max_input_tokens, agent.max_input_tokens)
    try:
        specs = function_specs(functions)
        if max_input is not None:
            budget = InputBudget(model, max_input)
        prompt = budget.fit(history, specs)
        choice = _tool_choice(
            model, call, _first(agent.function_choice, config.function_choice), history
        )
        if specs and parallel is not None:
            parameters["parallel_tool_calls"] = parallel
        if not specs and choice in ("auto", "none"):
            choice = None  # no tools to choose from (a name still fails, as in Qwen-Agent)
        request = model.build_request(prompt, specs, choice, **parameters)
    except (UserError, ToolArgumentsError) as exc:  # parameters, tools, the tool choice
        raise ConfigurationError(f"_call_llm: {exc}") from None
    return ModelCall(model, request, as_dicts_like(messages))


def _first(value: T | None, fallback: T | None) -> T | None:
    return value if value is not None else fallback
