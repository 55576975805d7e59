"""Qwen-Agent's `Agent` base class and its `BasicAgent`, on parley's models and tools.

A Qwen-Agent agent is a workflow: a subclass implements `_run(messages, lang, **kwargs)`, a
generator of the response so far, and calls the model with `_call_llm` and tools with
`_call_tool`. Such an agent runs here unchanged::

    class WeatherBot(Agent):
        def _run(self, messages, lang="en", **kwargs):
            messages, response = copy.deepcopy(messages), []
            functions = [tool.function for tool in self.function_map.values()]
            for _ in range(MAX_LLM_CALL_PER_RUN):
                output = []
                for output in self._call_llm(messages=messages, functions=functions):
                    yield response + output
                response += output
                messages += output
                calls = [self._detect_tool(m) for m in output]
                if not any(use for use, *_ in calls):
                    break
                for use, name, args, _ in calls:
                    if use:
                        result = Message(FUNCTION, self._call_tool(name, args), name=name)
                        messages.append(result)
                        response.append(result)
                yield response

    bot = WeatherBot(function_list=["get_weather"], llm={"model": "qwen3", ...})
    for response in bot.run([{"role": "user", "content": "Weather in Paris?"}]):
        ...

- `run(messages, **kwargs)` copies the messages (dicts or `Message`s), picks `lang` (`zh`
  when a system or user message holds Chinese, else `en`) unless given, puts the agent's
  `system_message` first (merged into a leading system message, the two texts apart by a
  blank line), and yields what `_run` yields, each message named after the agent when it has
  no name; dicts in give dicts out, `Message`s give `Message`s. Other keyword arguments go to
  `_run`. `run_nonstream` returns the last list.
- `self.llm` is a Qwen-Agent model (`parley.compat.qwen.llm.BaseChatModel`): custom agents
  call `self.llm.chat(...)` as in Qwen-Agent. `_call_llm(messages, functions=None,
  stream=True, extra_generate_cfg=None)` calls it: with `stream`, an iterator of the response
  so far (a reasoning message, a content message, one message per function call with
  `extra["function_id"]`); without, the whole list. `functions` are Qwen-Agent function
  descriptions (`BaseTool.function`), written into the prompt unless the config sets
  `use_raw_api`; `extra_generate_cfg` goes over the agent's `extra_generate_cfg` and the llm
  config's `generate_cfg` (see `parley.compat.qwen._llm` for which tool choice a call
  gets). The completed message is converted by `from_msgs`, so its `extra` holds parley's
  record (id, time, usage). A model failure raises `ModelServiceError`.
- `_call_tool(tool_name, tool_args="{}", **kwargs)` runs a tool of `function_map` through a
  parley `Toolkit` (arguments checked against its schema, its timeout) and returns its result:
  text, or a list of `ContentItem`s for media; a failure comes back as text, never raised.
  Keyword arguments go to the tool.
- `_init_tool(tool)` adds a `function_list` entry to `function_map`: a registered name,
  `{"name": ..., **cfg}`, a tool instance or a typed function (the later of two of one name
  wins, with a warning); `{"mcpServers": {...}}` is opened on the first run (the constructor
  cannot wait) and its tools join `function_map` then.
- `_detect_tool(message)` returns `(has a function call, its name, its arguments, the
  content)`.

An agent that adds to the conversation before its work, as Qwen-Agent's `Assistant` puts
retrieved knowledge in the system message, overrides `_run` to change `messages` and hands
them on to `super()._run(...)`.

Deliberate differences from Qwen-Agent 0.0.34:

- `llm` is a Qwen-Agent llm config dict (`get_chat_model`'s), a `BaseChatModel`, and also
  a parley `ChatModel` (tools go to it natively, unless it is a `PromptedToolsModel`) or
  None for the embedded local model.
- Unknown constructor arguments raise `ConfigurationError` (Qwen-Agent ignores them), and so
  do `files` and `rag_cfg`, which only `FnCallAgent` and `Assistant` use.
- `_call_tool` gives parley's texts for an unknown tool, bad arguments and a failing tool
  (Qwen-Agent gives its own, or a traceback, and re-raises its tool-service errors), and a
  result that is neither text nor media as compact JSON (Qwen-Agent indents it).
- `_call_llm`'s tool choice, above; `max_input_tokens` counts with parley's token counter,
  tool descriptions included, and without it the model's context bounds the prompt
  (Qwen-Agent: 58000 tokens). The response cache, retries and timeouts are the model's.
- MCP servers open on the first run, not in the constructor; `close()` closes them, and the
  model's connections when the agent built the model from a config.
- `arun` and `arun_nonstream` (async twins, a parley addition) run `run` on a worker thread.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import copy
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, cast, overload

from pydantic import TypeAdapter

from parley._sync import run_sync
from parley.compat.qwen._llm import merge_generate_cfgs
from parley.compat.qwen._llm_config import LLMConfig
from parley.compat.qwen._media import item_from_block
from parley.compat.qwen._response import QwenMessages, QwenResponse, output
from parley.compat.qwen.convert import as_dicts_like
from parley.compat.qwen.llm.base import BaseChatModel, ParleyChatModel, has_chinese
from parley.compat.qwen.schema import (
    CONTENT,
    DEFAULT_SYSTEM_MESSAGE,
    ROLE,
    SYSTEM,
    USER,
    ContentItem,
    Message,
)
from parley.compat.qwen.tools.code_interpreter import user_files_from_working_directory
from parley.errors import ConfigurationError, UserError
from parley.messages import ToolCallBlock
from parley.models.base import ChatModel
from parley.tools import Tool, Toolkit
from parley.tools.base import ToolOutput

__all__ = [
    "Agent",
    "BasicAgent",
    "FunctionListEntry",
    "QwenMessages",
    "QwenResponse",
    "as_qwen_model",
    "has_chinese",
]

logger = logging.getLogger("parley.compat.qwen")

T = TypeVar("T")

FunctionListEntry = str | Mapping[str, Any] | Tool | Callable[..., Any]
"""A `function_list` entry: a registered name, `{"name": ..., **cfg}`, `{"mcpServers":
{...}}`, a tool instance, or a typed function."""

_RETRIEVAL_ARGUMENTS = ("files", "rag_cfg")
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_RETRIEVAL = (
    "{owner} takes no {argument}=: the agents that answer from files are FnCallAgent (a "
    "retrieval tool over them) and Assistant (retrieves for every question)"
)


def refuse_arguments(owner: str, arguments: Mapping[str, Any]) -> None:
    """Refuse constructor arguments parley does not take, saying why.

    Raises:
        ConfigurationError: `files` or `rag_cfg` (for FnCallAgent and Assistant), or unknown
            arguments.
    """
    for argument in _RETRIEVAL_ARGUMENTS:
        if arguments.get(argument):
            raise ConfigurationError(_RETRIEVAL.format(owner=owner, argument=argument))
    # Retrieval's arguments left empty ask for nothing: they pass.
    unknown = sorted(key for key in arguments if key not in _RETRIEVAL_ARGUMENTS)
    if unknown:
        raise ConfigurationError(f"{owner} got unknown arguments: {unknown}")


LLMArgument = BaseChatModel | ChatModel | Mapping[str, Any] | None
"""What an agent's `llm` may be: a config dict, a Qwen-Agent model, a parley model, None."""


def as_qwen_model(llm: LLMArgument) -> BaseChatModel:
    """The Qwen-Agent model an agent's `llm` argument comes to.

    Raises:
        ConfigurationError: `llm` is none of the accepted forms, or a config parley cannot
            honour.
    """
    if isinstance(llm, BaseChatModel):
        return llm
    if llm is None or isinstance(llm, ChatModel):
        return ParleyChatModel.from_chat_model(llm)
    if isinstance(llm, Mapping):
        from parley.compat.qwen.llm import get_chat_model  # noqa: PLC0415  (the registry)

        return get_chat_model(llm)
    raise ConfigurationError(
        "llm must be a Qwen-Agent llm config dict, a BaseChatModel or a parley ChatModel, "
        f"got {llm!r}"
    )


@dataclass
class Prepared:
    """A run's input as `_run` gets it, and the form to answer in."""

    messages: list[Message]
    kwargs: dict[str, Any]
    as_dicts: bool


class Agent(abc.ABC):
    """Qwen-Agent's agent base class: a workflow over a model and tools (see the module docs).

    Args:
        function_list: Tools: registered names, `{"name": ..., **cfg}`, tool instances,
            typed functions, and `{"mcpServers": {...}}` (opened on the first run).
        llm: A Qwen-Agent llm config dict, a `BaseChatModel`, a parley `ChatModel`, or None
            for the embedded local model.
        system_message: Put first in every run's messages.
        name: The agent's name, on its messages; None: the class's `default_name`.
        description: What the agent does (for routers and group chats); None: the class's
            `default_description`.
        **kwargs: Not taken; naming any raises.

    Attributes:
        llm: The model (a `parley.compat.qwen.llm.BaseChatModel`).
        function_map: The tools by name.
        extra_generate_cfg: Generation settings for every `_call_llm`, over the llm config's.

    Raises:
        ConfigurationError: The llm config, a tool entry or an argument is not usable.
    """

    default_name: ClassVar[str | None] = None
    """The name of an agent of this class made without one (Qwen-Agent's `DEFAULT_NAME`)."""
    default_description: ClassVar[str | None] = None
    """The description of an agent of this class made without one (`DEFAULT_DESC`)."""
    builtin_tools: ClassVar[tuple[FunctionListEntry, ...]] = ()
    """Tools every agent of this class has, before those of its `function_list`."""

    def __init__(
        self,
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: LLMArgument = None,
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        name: str | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        refuse_arguments(type(self).__name__, kwargs)
        self.llm: BaseChatModel = as_qwen_model(llm)
        self.extra_generate_cfg: dict[str, Any] = {}
        self.function_map: dict[str, Tool] = {}
        self._mcp_pending: list[Mapping[str, Any]] = []
        self._mcp_tools: list[Tool] = []
        self._mcp_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        for tool in [*self.builtin_tools, *(function_list or [])]:
            self._init_tool(tool)
        self.system_message = system_message
        self.name = self.default_name if name is None else name
        self.description = self.default_description if description is None else description
        self._owns_model = llm is None or isinstance(llm, Mapping)

    @property
    def llm_config(self) -> LLMConfig:
        """What `llm` comes to in parley: its chat model and the agent's settings.

        Raises:
            ConfigurationError: `llm` is a model class of the user's own, not parley's.
        """
        if isinstance(self.llm, ParleyChatModel):
            return self.llm.llm_config
        raise ConfigurationError(
            f"{type(self).__name__} runs parley's loop on a parley model; {self.llm!r} is a "
            "model class of your own: give an llm config dict, or call it from your own _run"
        )

    def __repr__(self) -> str:
        tools = list(self.function_map)
        return f"{type(self).__name__}(name={self.name!r}, llm={self.llm!r}, tools={tools})"

    # -- running ---------------------------------------------------------------------------------

    def run(self, messages: QwenMessages | str, **kwargs: Any) -> Iterator[QwenResponse]:
        """Run on a conversation, yielding the response so far as `_run` makes it.

        Args:
            messages: The conversation (Qwen-Agent `Message`s or dicts), last message last;
                or a plain string, one user message (then the response is dicts).
            **kwargs: Handed to `_run`; `lang` is picked from the messages when not given.

        Raises:
            ValidationError: An item is not a Qwen message.
        """
        prepared = self._prepare(messages, kwargs)
        if self._mcp_pending:
            run_sync(self._open_mcp_servers())
        for response in self._run(messages=prepared.messages, **prepared.kwargs):
            yield self._answer(response, prepared.as_dicts)

    def run_nonstream(self, messages: QwenMessages | str, **kwargs: Any) -> QwenResponse:
        """Run on a conversation and return the whole response (`run`'s last list)."""
        last: QwenResponse = []
        for response in self.run(messages, **kwargs):
            last = response
        return last

    async def arun(
        self, messages: QwenMessages | str, **kwargs: Any
    ) -> AsyncIterator[QwenResponse]:
        """`run`, from async code (on a worker thread: `_run` is synchronous code)."""
        async for response in _in_thread(self.run(messages, **kwargs)):
            yield response

    async def arun_nonstream(self, messages: QwenMessages | str, **kwargs: Any) -> QwenResponse:
        """`run_nonstream`, from async code."""
        last: QwenResponse = []
        async for response in self.arun(messages, **kwargs):
            last = response
        return last

    @abc.abstractmethod
    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """The agent's workflow: yield the whole response so far, as it grows.

        Args:
            messages: The conversation, the agent's system message first (a copy: change it
                freely).
            lang: `zh` or `en`: the language for the agent's own prompts.
            **kwargs: What the caller gave `run`.
        """

    def _prepare(self, messages: QwenMessages | str, kwargs: dict[str, Any]) -> Prepared:
        """The messages and arguments `_run` gets, as Qwen-Agent's `Agent.run` makes them.

        A plain string is one user message (seed 001's string input), answered with dicts.
        """
        if isinstance(messages, str):
            messages = [{ROLE: USER, CONTENT: messages}]
        as_dicts = as_dicts_like(messages)
        given = _MESSAGES.validate_python([copy.deepcopy(m) for m in messages])
        kwargs = dict(kwargs)
        if "lang" not in kwargs:
            kwargs["lang"] = "zh" if has_chinese(given) else "en"
        return Prepared(self._with_system(given), kwargs, as_dicts)

    def _with_system(self, messages: list[Message]) -> list[Message]:
        system = self.system_message
        if not system:
            return messages
        if not messages or messages[0][ROLE] != SYSTEM:
            return [Message(SYSTEM, system), *messages]
        first = messages[0]
        content = first[CONTENT]
        if isinstance(content, str):
            first[CONTENT] = f"{system}\n\n{content}"
        else:
            first[CONTENT] = [ContentItem(text=f"{system}\n\n"), *content]
        return messages

    def _answer(self, response: QwenMessages, as_dicts: bool) -> QwenResponse:
        messages = []
        for item in response:
            message = item if isinstance(item, Message) else Message.model_validate(item)
            if not message.name and self.name:
                message.name = self.name  # in place, as Qwen-Agent does
            messages.append(message)
        return output(messages, as_dicts)

    # -- the model -------------------------------------------------------------------------------

    @overload
    def _call_llm(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None = None,
        stream: Literal[True] = True,
        extra_generate_cfg: Mapping[str, Any] | None = None,
    ) -> Iterator[QwenResponse]: ...
    @overload
    def _call_llm(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None,
        stream: Literal[False],
        extra_generate_cfg: Mapping[str, Any] | None = None,
    ) -> QwenResponse: ...
    @overload
    def _call_llm(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None = None,
        *,
        stream: Literal[False],
        extra_generate_cfg: Mapping[str, Any] | None = None,
    ) -> QwenResponse: ...
    def _call_llm(
        self,
        messages: QwenMessages,
        functions: Sequence[Mapping[str, Any]] | None = None,
        stream: bool = True,
        extra_generate_cfg: Mapping[str, Any] | None = None,
    ) -> Iterator[QwenResponse] | QwenResponse:
        """Call the model: the response so far after each delta, or (`stream=False`) whole.

        Args:
            messages: The conversation (dicts in give dicts out).
            functions: Function descriptions the model may call (`BaseTool.function`).
            stream: Whether to stream.
            extra_generate_cfg: Settings for this call, over the agent's.

        Raises:
            MessageError: No messages, or messages a `Msg` cannot hold.
            ConfigurationError: A setting, parameter or function description parley cannot
                use (a `ValueError`, as Qwen-Agent raises).
            ModelServiceError: The model failed (after its retries); while iterating, with
                `stream`.
        """
        if isinstance(self.llm, ParleyChatModel):
            # The agent's settings apply as an agent's (its function choice: first call only).
            return self.llm.call(
                messages, functions, stream, extra_generate_cfg, self.extra_generate_cfg
            )
        cfg = merge_generate_cfgs(self.extra_generate_cfg, extra_generate_cfg)
        return self.llm.chat(messages, functions, stream, extra_generate_cfg=cfg)

    # -- tools -----------------------------------------------------------------------------------

    def _call_tool(
        self, tool_name: str, tool_args: str | dict[str, Any] = "{}", **kwargs: Any
    ) -> str | list[ContentItem]:
        """Run a tool of `function_map`: its text, or its media as `ContentItem`s.

        Args:
            tool_name: The tool's name in `function_map`.
            tool_args: The arguments: the model's JSON string, or a dict.
            **kwargs: Handed to the tool.

        An unknown tool, bad arguments, a failure or a timeout come back as text saying so.
        """
        result = run_sync(self._run_tool(tool_name, tool_args, kwargs))
        if isinstance(result, str):
            return result
        return [item_from_block(block) for block in result]

    async def _run_tool(
        self, tool_name: str, tool_args: str | dict[str, Any], kwargs: dict[str, Any]
    ) -> ToolOutput:
        toolkit = Toolkit()
        for tool in self.function_map.values():
            toolkit.add(tool, replace=True)
        found = self.function_map.get(tool_name)
        name = found.name if found is not None else tool_name
        arguments: dict[str, Any] = (
            {"input": tool_args} if isinstance(tool_args, dict) else {"raw_input": tool_args}
        )
        call = ToolCallBlock(id=f"qwen_{name}", name=name, **arguments)
        return (await toolkit.run(call, **kwargs)).output

    def _init_tool(self, tool: FunctionListEntry) -> None:
        """Add a `function_list` entry to `function_map` (MCP servers: on the first run).

        Raises:
            ConfigurationError: No tool is registered under that name, or the entry is none
                of the accepted forms (also a `ValueError`, as Qwen-Agent raises).
        """
        if isinstance(tool, Mapping) and "mcpServers" in tool:
            self._mcp_pending.append(tool)
            return
        try:
            made = Toolkit().add(tool)
        except ConfigurationError:
            raise
        except UserError as exc:  # an entry of no form a toolkit takes
            raise ConfigurationError(f"function_list: {exc}") from None
        if not isinstance(tool, Tool):  # built here from a name or config: Qwen-Agent's rules
            made = user_files_from_working_directory(made)
        self._register(made)

    def _register(self, tool: Tool) -> None:
        if tool.name in self.function_map:
            # Qwen-Agent's rule: the later entry wins.
            logger.warning(
                "Repeatedly adding tool %s, will use the newest tool in function list", tool.name
            )
        self.function_map[tool.name] = tool

    def _detect_tool(
        self, message: Message | Mapping[str, Any]
    ) -> tuple[bool, str | None, str | None, str | list[ContentItem]]:
        """Whether a model's message calls a function: `(calls, name, arguments, content)`."""
        if not isinstance(message, Message):
            message = Message.model_validate(message)
        call = message.function_call
        name = call.name if call is not None else None
        arguments = call.arguments if call is not None else None
        return name is not None, name, arguments, message.content or ""

    # -- MCP servers and closing -----------------------------------------------------------------

    async def _open_mcp_servers(self) -> None:
        """Open the `mcpServers` of `function_list` not opened yet; their tools join."""
        if not self._mcp_pending:
            return
        loop = asyncio.get_running_loop()
        lock = self._mcp_locks.get(loop)
        if lock is None:
            lock = self._mcp_locks[loop] = asyncio.Lock()
        async with lock:  # two first runs at once open the servers once
            while self._mcp_pending:
                for tool in await Toolkit().add_mcp_servers(self._mcp_pending[0]):
                    self._mcp_tools.append(tool)
                    self._register(tool)
                del self._mcp_pending[0]

    async def close(self) -> None:
        """Close, on the running loop, what the agent opened; a later run reopens it.

        That is the MCP servers' sessions (stdio servers stop) and, when the agent built its
        model from an llm config, the model's connections (a model passed in is the caller's).
        `close_sync` closes what `run` and the other sync twins opened.
        """
        if self._mcp_tools:
            from parley.tools.mcp import close_mcp_servers  # noqa: PLC0415  (the mcp extra)

            await close_mcp_servers(Toolkit(self._mcp_tools))
        if self._owns_model:
            await self.llm.close()

    def close_sync(self) -> None:
        """`close`, from synchronous code."""
        run_sync(self.close())


class BasicAgent(Agent):
    """The simplest agent: the model alone, no tools (Qwen-Agent's `BasicAgent`).

    Each run is one model call on the conversation; `run(messages, seed=...)` sets the seed.
    """

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        cfg: dict[str, Any] = {"lang": lang}
        if kwargs.get("seed") is not None:
            cfg["seed"] = kwargs["seed"]
        return self._call_llm(messages, extra_generate_cfg=cfg)


async def _in_thread(iterator: Iterator[T]) -> AsyncIterator[T]:
    """Iterate a blocking iterator from async code, one step at a time on a worker thread."""
    end = object()
    try:
        while True:
            item = await asyncio.to_thread(next, iterator, end)
            if item is end:
                return
            yield cast("T", item)
    finally:
        close = getattr(iterator, "close", None)
        # A step still running on its thread (the caller was cancelled) cannot be closed
        # ("generator already executing"): it finishes, and the generator is collected.
        with contextlib.suppress(ValueError):
            if close is not None:
                await asyncio.to_thread(close)
