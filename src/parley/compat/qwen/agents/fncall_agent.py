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

`FnCallAgent` is a `parley.compat.qwen.Agent` (Qwen-Agent's base class, in `agent`): `run`
prepares the messages as every Qwen agent's does (the system message first, `lang`) and
yields what `_run` yields, and `_call_llm`, `_call_tool`, `_init_tool`, `_detect_tool` and
`function_map` are the base class's. Its `_run` is parley's own agent loop: a
`parley.agents.Agent` (`bot.agent`), with the same loop, tools, events and context budget as
everywhere in parley, its events shown as Qwen responses. A subclass may override `_run` to
change the messages and hand them on to `super()._run(...)`, as Qwen-Agent's `Assistant` puts
retrieved knowledge first. `stream` yields parley's delta events (`parley.agents.events`);
`arun` and `arun_nonstream` are the async twins of `run` and `run_nonstream` (on the
caller's loop, unless a subclass has its own `_run`), `stream_sync` the sync twin of
`stream`.

`function_list` takes what Qwen-Agent's does: registered names, `{"name": ..., **cfg}`,
tool instances (parley's `Tool` is Qwen-Agent's `BaseTool`) and `{"mcpServers": {...}}`
(opened on the first run, since the constructor cannot wait; `close()` closes them), and
also typed functions, as parley's `Toolkit` does. `llm` is a Qwen-Agent llm config dict (see
`parley.compat.qwen._llm_config` for the mapping) or a model of `parley.compat.qwen.llm`
(`self.llm` is one), a parley `ChatModel`, or None for the embedded local model. As in
Qwen-Agent, the tools go in the prompt (`nous`, or the config's `fncall_prompt_type`) and
the server gets no `tools`, unless the config sets `use_raw_api` (the default of
`qwen_dashscope`); a parley `ChatModel` passed in gets them as it takes them. The loop
reads its settings (`function_choice`,
`parallel_function_calls`, `max_input_tokens`, the model's parameters) from the llm config
and the constructor's arguments, and, for each run, from the agent's `extra_generate_cfg`
over them (stop words united), as Qwen-Agent's loop hands it to every model call: a subclass
that sets it (Qwen-Agent's `Router` and `ReActChat` add stop words) runs on it.

The response is Qwen-Agent's: for each model turn a reasoning message, a content message and
one message per function call (`extra["function_id"]`), then one `function` message per
result carrying the same `function_id`. Dicts in give dicts out, `Message`s give `Message`s
(`as_dicts_like`). Completed messages are converted by `from_msgs`, so their `extra` also
holds the `Msg`'s metadata and parley's record (id, time, usage): a response given back as
history reads back as the very same messages. The turn being streamed is shown in the plain
shape Qwen-Agent streams, and takes those extras when it completes.

As in Qwen-Agent, a user message's file items are not shown to the model: each run hands
them, with the agent's `files` and the conversation's local images, to the tools whose
`file_access` is true (`files=`, see `parley.compat.qwen.tools.base`). A text model (`oai`,
`qwen_dashscope`) gets pictures, audio and video as notes in the text, as Qwen-Agent's text
models do (`parley.compat.qwen.llm._text_only`); a multimodal one gets them as they are.

Deliberate differences from Qwen-Agent 0.0.34:

- Several calls in one turn run concurrently, results kept in call order, and each result
  becomes visible when the whole round has run.
- A tool that fails, an unknown tool and bad arguments give parley's error text to the model
  (Qwen-Agent gives its own texts or a traceback); a tool's non-text result is compact JSON
  (Qwen-Agent indents it). A failing model raises `ModelServiceError` from `run`, as in
  Qwen-Agent (from `stream`, parley's `RunError` event).
- `llm` must be a parley-backed model (a config dict, a built-in model type, a parley
  `ChatModel`): a model class of the user's own (`register_llm`) runs in custom agents'
  `_run` only.
- `function_choice` naming a tool forces the first model call of a run only, so that the
  forced call cannot repeat until the iteration limit (Qwen-Agent forces every call);
  `tool_choice=` (parley's policy, e.g. a function of the call's index) overrides it. With
  neither, the model's default policy applies: on the embedded local model, one tool round
  and then an answer (Qwen-Agent lets a model call tools until `max_iters`).
- At most `max_iters` model calls per run (default 20, Qwen-Agent's `MAX_LLM_CALL_PER_RUN`;
  its environment variable is not read).
- `max_input_tokens` counts with parley's token counter and includes the tool descriptions;
  without it the model's own context size bounds the prompt (Qwen-Agent: 58000 tokens).
- `files` are indexed once, in a persistent index (`parley.rag`; `rag_cfg` says how, see
  `parley.compat.qwen._rag`), and the model gets a `retrieval` tool over them (Qwen-Agent
  keeps them in its memory agent and parses them again per run). `Assistant` retrieves
  for every question itself, as Qwen-Agent's does.
- `run` takes no keyword arguments but `lang` (ignored) and `seed` (for every model call);
  Qwen-Agent passes others to the tools, which parley's loop does not.
- Snapshots change only when the response does: one per streamed delta, one when a message
  completes, none repeated at the end. Qwen-Agent's streamed text may shrink when a
  `<tool_call>` starts to show; parley's grows.
- A tool that needs approval ends the run with its call unanswered (Qwen-Agent has no
  approvals); use `stream` and `agent.resume` for those.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from parley._sync import iterate_sync
from parley.agents import Agent as LoopAgent
from parley.agents import AgentEvent, AgentRun, InMemoryMemory, ToolChoicePolicy
from parley.compat.qwen._llm import InputBudget, generate_settings, with_model_stop
from parley.compat.qwen._rag import (
    RagSettings,
    files_of,
    local_images_of,
    open_index,
    without_files,
)
from parley.compat.qwen._response import QwenMessages, QwenResponse, Response
from parley.compat.qwen.agent import Agent, FunctionListEntry, LLMArgument, refuse_arguments
from parley.compat.qwen.convert import to_msgs
from parley.compat.qwen.llm._text_only import TEXT_ONLY_TYPES, as_text_messages
from parley.compat.qwen.llm.base import ModelServiceError
from parley.compat.qwen.schema import DEFAULT_SYSTEM_MESSAGE, Message
from parley.compat.qwen.tools.base import with_files
from parley.errors import ConfigurationError, MessageError, ModelError, UserError
from parley.models.tools import check_tool_choice
from parley.rag.index import DocumentIndex
from parley.rag.tool import RETRIEVAL_TOOL_NAME, RetrievalTool
from parley.tools import Toolkit

__all__ = ["MAX_LLM_CALL_PER_RUN", "FnCallAgent", "FunctionListEntry", "QwenResponse"]

MAX_LLM_CALL_PER_RUN = 20
"""Model calls per run, by default (Qwen-Agent's `settings.MAX_LLM_CALL_PER_RUN`)."""


class FnCallAgent(Agent):
    """Qwen-Agent's function-calling agent, on parley's agent loop (see the module docs).

    Args:
        function_list: Tools: registered names, `{"name": ..., **cfg}`, tool instances,
            typed functions, and `{"mcpServers": {...}}` (opened on the first run).
        llm: A Qwen-Agent llm config dict, a model of `parley.compat.qwen.llm`, a parley
            `ChatModel`, or None for the embedded local model.
        system_message: Put before the conversation; merged into a leading system message
            (the two texts apart by a blank line), as Qwen-Agent does.
        name: The agent's name, on its messages.
        description: What the agent does (for routers and group chats).
        files: Documents (paths, folders, URLs) indexed now (unchanged ones skipped on a
            later start) and searched by a `retrieval` tool the model gets.
        rag_cfg: How (see `parley.compat.qwen._rag`): retrieval type, chunk size, top_k,
            embedding model, index path...
        max_iters: Most model calls per run.
        tool_choice: parley's tool-choice policy; overrides the config's `function_choice`.
            With neither, the model's own (`ChatModel.default_tool_choice`).
        **kwargs: Not taken; naming any raises.

    Attributes:
        agent: The parley `Agent` underneath (with no system prompt of its own: each run
            puts the system message first in that run's own memory).
        llm: Its model (`parley.compat.qwen.llm.BaseChatModel`).

    Raises:
        ConfigurationError: The llm config, a tool entry or an argument is not usable.
    """

    def __init__(
        self,
        function_list: Sequence[FunctionListEntry] | None = None,
        llm: LLMArgument = None,
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        name: str | None = None,
        description: str | None = None,
        files: Sequence[str] | None = None,
        rag_cfg: Mapping[str, Any] | None = None,
        *,
        max_iters: int = MAX_LLM_CALL_PER_RUN,
        tool_choice: ToolChoicePolicy = None,
        **kwargs: Any,
    ) -> None:
        refuse_arguments(type(self).__name__, kwargs)
        super().__init__(function_list, llm, system_message, name, description)
        self.rag_settings = RagSettings.read(rag_cfg)
        self.files = [str(f) for f in files or ()]
        self.index: DocumentIndex | None = (
            open_index(self.files, self.rag_settings) if self.files else None
        )
        if self.index is not None and self.retrieval_as_tool:
            self.function_map.setdefault(RETRIEVAL_TOOL_NAME, self._retrieval_tool(self.index))
        config = self.llm_config
        choice = tool_choice if tool_choice is not None else config.function_choice
        if isinstance(choice, str) and self._mcp_pending:
            # It may name an MCP tool, known only once the servers are open: the model
            # checks it on the first call instead.
            choice = _first_call_only(choice)
        try:
            self.agent = LoopAgent(
                self.name or "",
                config.model,
                tools=self._toolkit(),
                max_iters=max_iters,
                parallel_tool_calls=config.parallel_tool_calls is not False,
                description=self.description or "",
                tool_choice=choice,
            )
        except UserError as exc:  # a function_choice naming no tool, a bad max_iters
            raise ConfigurationError(f"FnCallAgent: {exc}") from None
        if config.max_input_tokens is not None:
            self.agent.budget = InputBudget(config.model, config.max_input_tokens)

    retrieval_as_tool: bool = True
    """With `files`, whether the model gets a `retrieval` tool over them (the Assistant
    retrieves for every question itself instead)."""

    def __repr__(self) -> str:
        return f"FnCallAgent(name={self.name!r}, llm={self.llm!r}, tools={list(self.function_map)})"

    def _retrieval_tool(self, index: DocumentIndex) -> RetrievalTool:
        settings = self.rag_settings
        return RetrievalTool(
            index,
            top_k=settings.top_k,
            mode=settings.mode,
            score_threshold=settings.score_threshold,
            max_ref_token=settings.max_ref_token,
            front_page=settings.front_page,
            front_page_fallback=True,  # Qwen-Agent's keyword search
        )

    async def close(self) -> None:
        """Close what the agent opened (see `Agent.close`) and the files' index."""
        await super().close()
        if self.index is not None:
            await self.index.close()
            self.index = None

    # -- Qwen-Agent's interface ------------------------------------------------------------------

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """The function-calling loop: parley's agent loop, its events shown as Qwen responses.

        Args:
            messages: The conversation, the system message first.
            lang: Accepted for Qwen-Agent's signature and ignored (parley has one set of
                prompts).
            **kwargs: `seed`, for every model call; no others (parley's loop hands tools
                nothing from the caller).

        Raises:
            UserError: Keyword arguments other than `seed` were given.
            ConfigurationError: `extra_generate_cfg` or the seed is not usable by the model.
            MessageError: No messages, or messages a `Msg` cannot hold.
            ModelServiceError: The model failed (after its retries).
            MCPServerError: An MCP server of `function_list` could not be opened.
        """
        return iterate_sync(self._responses(messages, _run_seed(kwargs)))

    async def arun(
        self, messages: QwenMessages | str, **kwargs: Any
    ) -> AsyncIterator[QwenResponse]:
        """`run`, from async code, on the caller's loop.

        A subclass with a `_run` of its own (synchronous code) runs on a worker thread
        instead, as `Agent.arun` does.
        """
        if type(self)._run is not FnCallAgent._run:
            async for response in super().arun(messages, **kwargs):
                yield response
            return
        prepared = self._prepare(messages, kwargs)
        prepared.kwargs.pop("lang")
        seed = _run_seed(prepared.kwargs)
        async for response in self._responses(prepared.messages, seed):
            yield self._answer(response, prepared.as_dicts)

    # -- parley's interface ----------------------------------------------------------------------

    async def stream(self, messages: QwenMessages | str) -> AsyncIterator[AgentEvent]:
        """Run on a conversation, yielding parley's events (deltas, tool calls, results...).

        A model failure comes as `RunError` then `RunEnded(status="error")`, as from
        `Agent.stream`.
        """
        run = await self._start(self._prepare(messages, {}).messages)
        async with run:
            async for event in run:
                yield event

    def stream_sync(self, messages: QwenMessages | str) -> Iterator[AgentEvent]:
        """`stream`, from synchronous code."""
        return iterate_sync(self.stream(messages))

    # -- running -----------------------------------------------------------------------------------

    async def _responses(
        self, messages: list[Message], seed: int | None = None
    ) -> AsyncIterator[list[Message]]:
        """The response so far after each change; the run's error raised at the end."""
        response = Response(self.name)
        run = await self._start(messages, seed)
        async with run:
            async for event in run:
                if response.feed(event):
                    yield response.messages()
        if isinstance(run.error, ModelError):
            raise ModelServiceError.from_error(run.error) from run.error
        if run.error is not None:
            raise run.error

    async def _start(self, messages: list[Message], seed: int | None = None) -> AgentRun:
        # Files are for retrieval and file tools, not the model (as in Qwen-Agent).
        kept = without_files(messages)
        if self.llm_config.model_type in TEXT_ONLY_TYPES:
            # A text model gets media as notes in the text, as Qwen-Agent's `chat` gives them
            # (a picture in the conversation must not send `qwen-max` to the VL endpoint).
            kept = as_text_messages(kept)
        history = to_msgs(kept)
        if not history:
            raise MessageError("messages can not be empty")
        await self._open_mcp_servers()
        self.agent.toolkit = self._toolkit()  # function_map may have changed meanwhile
        agent = self._run_agent(seed)
        files = [*self.files, *files_of(messages)]
        images = local_images_of(messages)  # handed too, as Qwen-Agent does
        if (files or images) and any(tool.file_access for tool in self.function_map.values()):
            # File tools get this run's files, on this run's own copy of the agent.
            agent = copy.copy(agent)
            agent.toolkit = self._toolkit(files, images)
        # Each run is on its own memory: a Qwen-Agent run is given the whole conversation.
        return agent.stream(memory=InMemoryMemory(history))

    def _run_agent(self, seed: int | None) -> LoopAgent:
        """The loop for a run: `self.agent`, or a copy on `extra_generate_cfg` and `seed`.

        Qwen-Agent's loop hands both to every model call, so an agent that sets its
        `extra_generate_cfg` (stop words, a temperature, a function choice) runs on them.

        Raises:
            ConfigurationError: A setting or parameter the model cannot take.
        """
        cfg = dict(self.extra_generate_cfg)
        if seed is not None:
            cfg["seed"] = seed
        settings = generate_settings(cfg, "extra_generate_cfg")
        agent_settings = (
            settings.function_choice,
            settings.parallel_tool_calls,
            settings.max_input_tokens,
        )
        if not settings.parameters and all(s is None for s in agent_settings):
            return self.agent
        try:
            base = self.llm_config.model
            model = base.with_parameters(**with_model_stop(base, settings.parameters))
            if settings.function_choice is not None:
                check_tool_choice(settings.function_choice, self.agent.toolkit.specs())
        except UserError as exc:
            raise ConfigurationError(f"extra_generate_cfg: {exc}") from None
        agent = self.agent.with_model(model)
        max_input = settings.max_input_tokens
        if max_input is None:
            max_input = self.llm_config.max_input_tokens
        if max_input is not None:
            agent.budget = InputBudget(model, max_input)
        if settings.parallel_tool_calls is not None:
            agent.parallel_tool_calls = settings.parallel_tool_calls
        if settings.function_choice is not None:
            agent.tool_choice = settings.function_choice
        return agent

    def _toolkit(self, files: Sequence[str] = (), images: Sequence[str] = ()) -> Toolkit:
        toolkit = Toolkit()
        for tool in self.function_map.values():
            toolkit.add(with_files(tool, files, images), replace=True)
        return toolkit


def _run_seed(kwargs: Mapping[str, Any]) -> int | None:
    """The run's `seed` (for every model call, as Qwen-Agent's loop takes it); no others."""
    others = sorted(key for key in kwargs if key != "seed")
    if others:
        raise UserError(
            f"FnCallAgent.run takes no keyword arguments but lang and seed, got {others}: "
            "parley's loop hands tools nothing from the caller"
        )
    seed = kwargs.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise UserError(f"seed must be an integer, got {seed!r}")
    return seed


def _first_call_only(choice: str) -> Callable[[int], str | None]:
    """A tool-choice policy forcing `choice` on a run's first model call only."""

    def policy(index: int) -> str | None:
        return choice if index == 0 else None

    return policy
