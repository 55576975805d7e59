"""Qwen-Agent's `FnCallAgent`, run by parley's own agent loop.

Written as for Qwen-Agent::

    @register_tool("get_weather")
    class GetWeather(BaseTool):
        description = "Get the weather of a city."
        parameters = [{"name": "city", "type": "string", "required": True}]

        def call(self, params, **kwargs):
            return f"Sunny in {self._verify_json_format_args(params)['city']}"

    bot = FnCallAgent(function_list=["get_weather"], llm={"model": "qwen3",
                      "model_server": "http://localhost:8000/v1"})
    for response in bot.run([{"role": "user", "content": "Weather in Paris?"}]):
        print(response)          # the whole response so far, as Qwen-Agent yields it

Underneath is a `parley.agents.Agent` (`bot.agent`): the same loop, tools, events and context
budget as everywhere in parley. `run` and `run_nonstream` speak Qwen-Agent's messages;
`stream` yields parley's delta events (`parley.agents.events`); `arun` and
`arun_nonstream` are the async twins of the first two, `stream_sync` the sync twin of the
last.

`function_list` takes what Qwen-Agent's does: registered names, `{"name": ..., **cfg}`,
tool instances (parley's `Tool` is Qwen-Agent's `BaseTool`) and `{"mcpServers": {...}}`
(opened on the first run, since the constructor cannot wait; `close()` closes them), and
also typed functions, as parley's `Toolkit` does. `llm` is a parley `ChatModel`, a Qwen-Agent
llm config dict (see `parley.compat.qwen._llm_config` for the mapping), or None for the
embedded local model.

The response is Qwen-Agent's: for each model turn a reasoning message, a content message and
one message per function call (`extra["function_id"]`), then one `function` message per
result carrying the same `function_id`. Dicts in give dicts out, `Message`s give `Message`s
(`as_dicts_like`). Completed messages are converted by `from_msgs`, so their `extra` also
holds the `Msg`'s metadata and parley's record (id, time, usage): a response given back as
history reads back as the very same messages. The turn being streamed is shown in the plain
shape Qwen-Agent streams, and takes those extras when it completes.

Deliberate differences from Qwen-Agent 0.0.34:

- Tool calls are the provider's native ones unless the config asks for `nous` (Qwen-Agent
  prompts for them by default); several calls in one turn run concurrently, results kept in
  call order, and each result becomes visible when the whole round has run.
- A tool that fails, an unknown tool and bad arguments give parley's error text to the model
  (Qwen-Agent gives its own texts or a traceback); a tool's non-text result is compact JSON
  (Qwen-Agent indents it). A failing model raises parley's `ModelError` from `run` (Qwen-Agent
  raises its `ModelServiceError`).
- `function_choice` naming a tool forces the first model call of a run only, so that the
  forced call cannot repeat until the iteration limit (Qwen-Agent forces every call);
  `tool_choice=` (parley's policy, e.g. a function of the call's index) overrides it. With
  neither, the model's default policy applies: on the embedded local model, one tool round
  and then an answer (Qwen-Agent lets a model call tools until `max_iters`).
- At most `max_iters` model calls per run (default 20, Qwen-Agent's `MAX_LLM_CALL_PER_RUN`;
  its environment variable is not read).
- `max_input_tokens` counts with parley's token counter and includes the tool descriptions;
  without it the model's own context size bounds the prompt (Qwen-Agent: 58000 tokens).
- Files and RAG (`files`, `rag_cfg`) are not supported yet: parley has no retrieval yet. A
  `ConfigurationError` says so and what to do instead: give the agent the `doc_parser` tool,
  or put the text of `parley.tools.builtin.parse_document(path).to_text()` in the message.
  `run` takes no keyword arguments but `lang` (ignored).
- Snapshots change only when the response does: one per streamed delta, one when a message
  completes, none repeated at the end. Qwen-Agent's streamed text may shrink when a
  `<tool_call>` starts to show; parley's grows.
- A tool that needs approval ends the run with its call unanswered (Qwen-Agent has no
  approvals); use `stream` and `agent.resume` for those.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from parley._sync import iterate_sync, run_sync
from parley.agents import (
    Agent,
    AgentEvent,
    AgentRun,
    ContextBudget,
    InMemoryMemory,
    MessageCompleted,
    PromptedToolsModel,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    ToolChoicePolicy,
)
from parley.compat.qwen._groups import FID
from parley.compat.qwen._llm_config import LLMConfig, read_llm_config
from parley.compat.qwen.convert import as_dicts_like, from_msgs, to_msgs
from parley.compat.qwen.schema import ASSISTANT, DEFAULT_SYSTEM_MESSAGE, FunctionCall, Message
from parley.errors import ConfigurationError, MessageError, UserError
from parley.messages import Block, Msg, TextBlock
from parley.models.base import ChatModel
from parley.models.spec import model_from_spec
from parley.tools import Tool, Toolkit

__all__ = ["MAX_LLM_CALL_PER_RUN", "FnCallAgent", "FunctionListEntry", "QwenResponse"]

logger = logging.getLogger("parley.compat.qwen")

MAX_LLM_CALL_PER_RUN = 20
"""Model calls per run, by default (Qwen-Agent's `settings.MAX_LLM_CALL_PER_RUN`)."""

FunctionListEntry = str | Mapping[str, Any] | Tool | Callable[..., Any]
"""A `function_list` entry: a registered name, `{"name": ..., **cfg}`, `{"mcpServers":
{...}}`, a tool instance, or a typed function."""

_FILES_NOT_SUPPORTED = (
    "FnCallAgent does not support files= yet: parley has no retrieval (RAG) yet. Instead, give "
    "the agent the doc_parser tool (function_list=['doc_parser']) and name the file in your "
    "message, or put the document's text in the message: "
    "parley.tools.builtin.parse_document(path).to_text()"
)

QwenResponse = list[Message] | list[dict[str, Any]]
"""A response: Qwen-Agent `Message`s, or their dicts when the input was all dicts."""

QwenMessages = Sequence[Message | Mapping[str, Any]]


class _InputBudget(ContextBudget):
    """Qwen-Agent's `max_input_tokens`: a bound on the prompt, whatever the model's window."""

    def __init__(self, model: ChatModel, max_input_tokens: int) -> None:
        super().__init__(model)
        self.max_input_tokens = max_input_tokens

    @property
    def limit(self) -> int | None:
        """The tokens a prompt may take (tools included); None (no trimming) if 0 or less."""
        return self.max_input_tokens if self.max_input_tokens > 0 else None


class _Response:
    """A run's response as Qwen-Agent shows it: the completed messages, then the live turn."""

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._done: list[Msg] = []
        self._converted: list[Message] = []
        self._thinking = ""
        self._text = ""
        self._calls: dict[str, list[str]] = {}  # call id -> [name, arguments so far]

    def feed(self, event: AgentEvent) -> bool:
        """Take in one event; whether the response changed."""
        if isinstance(event, TextDelta):
            self._text += event.text
        elif isinstance(event, ThinkingDelta):
            self._thinking += event.text
        elif isinstance(event, ToolCallStarted):
            self._calls[event.call_id] = [event.name, ""]
        elif isinstance(event, ToolCallArgumentsDelta):
            self._calls.setdefault(event.call_id, ["", ""])[1] += event.delta
        elif isinstance(event, MessageCompleted):
            self._complete(event.msg)
        else:
            return False
        return True

    def _complete(self, msg: Msg) -> None:
        if self._name is None and msg.name == "":
            msg = msg.model_copy(update={"name": None})  # the unnamed agent's messages
        self._done.append(msg)
        # The whole list each time: how a message is written depends on the one before it.
        self._converted = from_msgs(self._done)
        self._thinking = self._text = ""
        self._calls = {}

    def messages(self) -> list[Message]:
        """The response so far: a new list (completed messages are shared between lists)."""
        return [*self._converted, *self._live()]

    def _live(self) -> list[Message]:
        # The shape Qwen-Agent's oai.py streams: reasoning, text, then one message per call.
        name = self._name
        live = []
        if self._thinking:
            live.append(Message(ASSISTANT, "", reasoning_content=self._thinking, name=name))
        if self._text:
            live.append(Message(ASSISTANT, self._text, name=name))
        for call_id, (function, arguments) in self._calls.items():
            call = FunctionCall(function, arguments)
            live.append(Message(ASSISTANT, "", name=name, function_call=call, extra={FID: call_id}))
        return live


def _output(messages: list[Message], as_dicts: bool) -> QwenResponse:
    return [m.model_dump() for m in messages] if as_dicts else messages


def _config(llm: ChatModel | Mapping[str, Any] | None) -> LLMConfig:
    if llm is None:
        return LLMConfig(model_from_spec())  # the embedded local model
    if isinstance(llm, ChatModel):
        return LLMConfig(llm)
    if isinstance(llm, Mapping):
        return read_llm_config(llm)
    raise ConfigurationError(
        f"llm must be a parley ChatModel or a Qwen-Agent llm config dict, got {llm!r}"
    )


def _toolkit(entries: Sequence[FunctionListEntry]) -> tuple[Toolkit, list[Mapping[str, Any]]]:
    """The toolkit of a `function_list`, and its `mcpServers` entries (opened later)."""
    toolkit = Toolkit()
    servers: list[Mapping[str, Any]] = []
    for entry in entries:
        if isinstance(entry, Mapping) and "mcpServers" in entry:
            servers.append(entry)
            continue
        before = set(toolkit.names)
        added = toolkit.add(entry, replace=True)
        if added.name in before:
            # Qwen-Agent's rule: the later entry wins.
            logger.warning(
                "Repeatedly adding tool %s, will use the newest tool in function list", added.name
            )
    return toolkit, servers


class FnCallAgent:
    """Qwen-Agent's function-calling agent, on parley's agent loop (see the module docs).

    Args:
        function_list: Tools: registered names, `{"name": ..., **cfg}`, tool instances,
            typed functions, and `{"mcpServers": {...}}` (opened on the first run).
        llm: A parley `ChatModel`, a Qwen-Agent llm config dict, or None for the embedded
            local model.
        system_message: Put before the conversation; merged into a leading system message
            (the two texts apart by a blank line), as Qwen-Agent does.
        name: The agent's name, on its messages.
        description: What the agent does (for routers and group chats).
        files: Not supported yet (parley has no retrieval yet); giving files raises,
            saying what to do instead.
        max_iters: Most model calls per run.
        tool_choice: parley's tool-choice policy; overrides the config's `function_choice`.
            With neither, the model's own (`ChatModel.default_tool_choice`).
        **kwargs: Not taken; naming any raises.

    Attributes:
        agent: The parley `Agent` underneath (with no system prompt of its own: each run
            puts the system message first in that run's own memory).
        llm: Its chat model.

    Raises:
        ConfigurationError: The llm config, a tool entry or an argument is not usable.
    """

    def __init__(
        self,
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: ChatModel | Mapping[str, Any] | None = None,
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        name: str | None = None,
        description: str | None = None,
        files: Sequence[str] | None = None,
        *,
        max_iters: int = MAX_LLM_CALL_PER_RUN,
        tool_choice: ToolChoicePolicy = None,
        **kwargs: Any,
    ) -> None:
        if files:
            raise ConfigurationError(_FILES_NOT_SUPPORTED)
        if kwargs:
            raise ConfigurationError(f"FnCallAgent got unknown arguments: {sorted(kwargs)}")
        config = _config(llm)
        toolkit, self._mcp_pending = _toolkit(function_list or [])
        choice = tool_choice if tool_choice is not None else config.function_choice
        if isinstance(choice, str) and self._mcp_pending:
            # It may name an MCP tool, known only once the servers are open: the model
            # checks it on the first call instead.
            choice = _first_call_only(choice)
        self.llm: ChatModel = config.model
        self.system_message = system_message
        self.name = name
        self.description = description
        try:
            self.agent = Agent(
                name or "",
                self.llm,
                tools=toolkit,
                max_iters=max_iters,
                parallel_tool_calls=config.parallel_tool_calls is not False,
                description=description or "",
                tool_choice=choice,
            )
        except UserError as exc:  # a function_choice naming no tool, a bad max_iters
            raise ConfigurationError(f"FnCallAgent: {exc}") from None
        if config.max_input_tokens is not None:
            self.agent.budget = _InputBudget(self.llm, config.max_input_tokens)
        self._has_mcp = bool(self._mcp_pending)
        self._owns_model = not isinstance(llm, ChatModel)
        self._mcp_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return (
            f"FnCallAgent(name={self.name!r}, llm={self.llm!r}, tools={self.agent.toolkit.names})"
        )

    @property
    def function_map(self) -> dict[str, Tool]:
        """The tools by name (MCP servers' tools once the first run opened them)."""
        return {tool.name: tool for tool in self.agent.toolkit}

    # -- Qwen-Agent's interface ------------------------------------------------------------------

    def run(self, messages: QwenMessages, *, lang: str | None = None) -> Iterator[QwenResponse]:
        """Run on a conversation, yielding the whole response so far after each change.

        Args:
            messages: The conversation (Qwen-Agent `Message`s or dicts), last message last.
            lang: Accepted for Qwen-Agent's signature and ignored.

        Raises:
            MessageError: No messages, or messages a `Msg` cannot hold.
            ModelError: The model failed (after its retries).
            MCPServerError: An MCP server of `function_list` could not be opened.
        """
        return iterate_sync(self.arun(messages, lang=lang))

    def run_nonstream(self, messages: QwenMessages, *, lang: str | None = None) -> QwenResponse:
        """Run on a conversation and return the whole response (`run`'s last list)."""
        return run_sync(self.arun_nonstream(messages, lang=lang))

    async def arun(
        self, messages: QwenMessages, *, lang: str | None = None
    ) -> AsyncIterator[QwenResponse]:
        """`run`, from async code."""
        del lang  # Qwen-Agent picks prompts by language; parley has one set
        as_dicts = as_dicts_like(messages)
        response = _Response(self.name)
        async for _ in self._updates(messages, response):
            yield _output(response.messages(), as_dicts)

    async def arun_nonstream(
        self, messages: QwenMessages, *, lang: str | None = None
    ) -> QwenResponse:
        """`run_nonstream`, from async code."""
        del lang
        response = _Response(self.name)
        async for _ in self._updates(messages, response):
            pass
        return _output(response.messages(), as_dicts_like(messages))

    # -- parley's interface ----------------------------------------------------------------------

    async def stream(self, messages: QwenMessages) -> AsyncIterator[AgentEvent]:
        """Run on a conversation, yielding parley's events (deltas, tool calls, results...).

        A model failure comes as `RunError` then `RunEnded(status="error")`, as from
        `Agent.stream`.
        """
        run = await self._start(messages)
        async with run:
            async for event in run:
                yield event

    def stream_sync(self, messages: QwenMessages) -> Iterator[AgentEvent]:
        """`stream`, from synchronous code."""
        return iterate_sync(self.stream(messages))

    async def close(self) -> None:
        """Close, on the running loop, what the agent opened; a later run reopens it.

        That is the MCP servers' sessions (stdio servers stop) and, when the agent built its
        model from an llm config, the model's connections (a model passed in is the caller's).
        `close_sync` closes what `run` and the other sync twins opened.
        """
        if self._has_mcp:
            from parley.tools.mcp import close_mcp_servers  # noqa: PLC0415  (the mcp extra)

            await close_mcp_servers(self.agent.toolkit)
        if self._owns_model:
            model = self.llm.inner if isinstance(self.llm, PromptedToolsModel) else self.llm
            # Models holding connections (the OpenAI family) offer `aclose`.
            aclose = getattr(model, "aclose", None)
            if callable(aclose):
                await aclose()

    def close_sync(self) -> None:
        """`close`, from synchronous code."""
        run_sync(self.close())

    # -- running -----------------------------------------------------------------------------------

    async def _updates(self, messages: QwenMessages, response: _Response) -> AsyncIterator[None]:
        """Run, feeding `response`; yield after each change; raise the run's error at the end."""
        run = await self._start(messages)
        async with run:
            async for event in run:
                if response.feed(event):
                    yield None
        if run.error is not None:
            raise run.error

    async def _start(self, messages: QwenMessages) -> AgentRun:
        history = to_msgs(messages)
        if not history:
            raise MessageError("messages can not be empty")
        await self._open_mcp_servers()
        # Each run is on its own memory: a Qwen-Agent run is given the whole conversation.
        return self.agent.stream(memory=InMemoryMemory(self._with_system(history)))

    def _with_system(self, history: list[Msg]) -> list[Msg]:
        """The conversation with the agent's system message, as Qwen-Agent's `Agent.run` adds it."""
        if not self.system_message:
            return history
        first = history[0]
        if first.role != "system":
            return [Msg.system(self.system_message), *history]
        content = first.content
        merged: list[Block]
        if len(content) == 1 and isinstance(content[0], TextBlock):
            merged = [TextBlock(text=f"{self.system_message}\n\n{content[0].text}")]
        else:
            merged = [TextBlock(text=f"{self.system_message}\n\n"), *content]
        return [first.model_copy(update={"content": merged}), *history[1:]]

    async def _open_mcp_servers(self) -> None:
        if not self._mcp_pending:
            return
        loop = asyncio.get_running_loop()
        lock = self._mcp_locks.get(loop)
        if lock is None:
            lock = self._mcp_locks[loop] = asyncio.Lock()
        async with lock:  # two first runs at once open the servers once
            while self._mcp_pending:
                await self.agent.toolkit.add_mcp_servers(self._mcp_pending[0])
                del self._mcp_pending[0]


def _first_call_only(choice: str) -> Callable[[int], str | None]:
    """A tool-choice policy forcing `choice` on a run's first model call only."""

    def policy(index: int) -> str | None:
        return choice if index == 0 else None

    return policy
