"""`Agent`: a model, tools and a memory, run as a tool-calling loop.

`await agent.reply("...")` returns the final assistant message; `agent.stream("...")` yields
the run's events (`parley.agents.events`) as they happen; `reply_sync` and `stream_sync` do
the same from synchronous code. `continue_stream(memory=...)` takes a stored conversation up
where a run that stopped left it (a takeover), doing nothing stored again. How a run goes,
step by step and when it stops, is told in `parley.agents.run`; tools that need approval in
`parley.agents.approval`; the context budget in `parley.agents.budget`.

Several agents in one conversation (`parley.agents.multi`) use two hooks: `observe(msgs)`
adds others' messages to memory without replying, and `reply_listeners` are told each
answer a run ends with (a `MsgHub` broadcasts through them).

Structured answers: `reply(..., structured=Model)` runs the loop as usual, then asks the
model for the final answer through `generate_structured_output` (one more call, on the
whole conversation). The returned message holds the answer as JSON text and the validated
dict in `metadata["structured"]`; `reply_structured(...)` returns the parsed model too.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel, ValidationError

from parley._sync import iterate_sync, run_sync
from parley.agents.approval import PendingApproval
from parley.agents.budget import ContextBudget, ContextStrategy, TokenCounter
from parley.agents.events import AgentEvent, RunEnded
from parley.agents.memory import InMemoryMemory, Memory
from parley.agents.middleware import Middleware, check_middleware
from parley.agents.run import AgentRun, Continuation, StructuredSchema
from parley.errors import ModelOutputError, UserError
from parley.messages import Msg, ToolCallBlock
from parley.models.base import ChatModel
from parley.models.tools import ToolChoicePolicy, check_tool_choice, one_tool_round
from parley.tools import ToolInput, Toolkit

__all__ = [
    "Agent",
    "AgentInput",
    "ContinueOptions",
    "ReplyListener",
    "RunOptions",
    "StructuredOptions",
    "ToolChoicePolicy",
    "one_tool_round",
]

M = TypeVar("M", bound=BaseModel)

AgentInput = str | Msg | Mapping[str, Any] | Sequence[str | Msg | Mapping[str, Any]] | None
"""What a reply takes: text (a user message), a message, several, or None (memory as is)."""

ReplyListener = Callable[["Agent", Msg], Awaitable[None]]
"""Awaited with an agent and the answer one of its runs ended with (`Agent.reply_listeners`)."""


class StructuredOptions(TypedDict, total=False):
    """`reply_structured`'s keyword arguments: where a run goes and for whom (as `stream`'s)."""

    memory: Memory | None
    deps: Any
    user_id: str | None


class RunOptions(StructuredOptions, total=False):
    """The keyword arguments of every way to run an agent (`Agent.stream` tells each).

    `reply`, `resume` and the sync twins take them as `stream` and `resume_stream` do, so
    they are written down once, here.
    """

    structured: StructuredSchema | None
    run_id: str | None


class ContinueOptions(RunOptions, total=False):
    """`continue_stream`'s keyword arguments: `RunOptions` and the verdicts of `resume`."""

    resume: tuple[str, bool | Mapping[str, bool]] | None


def _as_msgs(msgs: AgentInput) -> list[Msg]:
    if msgs is None:
        return []
    if isinstance(msgs, (str, Msg, Mapping)):
        msgs = [msgs]
    out: list[Msg] = []
    for item in msgs:
        if isinstance(item, str):
            out.append(Msg.user(item))
        elif isinstance(item, Msg):
            out.append(item)
        else:
            try:
                out.append(Msg.model_validate(item))
            except ValidationError as exc:
                raise UserError(f"bad message for the agent: {exc}") from None
    return out


def _toolkit(tools: Toolkit | Iterable[ToolInput]) -> Toolkit:
    return tools if isinstance(tools, Toolkit) else Toolkit(tools)


class Agent:
    """An LLM agent: answers by calling its model and tools in a loop.

    Args:
        name: The agent's name (its messages carry it).
        model: The chat model (wrap one without native tool calling in
            `PromptedToolsModel`).
        system_prompt: Instructions put before the conversation in every model call.
        tools: A `Toolkit`, or what one takes: tools, typed functions, registered names.
        memory: Where the conversation is kept; a new `InMemoryMemory` by default.
        max_iters: Most model calls in one run (a resumed run counts on).
        parallel_tool_calls: Let the model call several tools at once, and run them
            concurrently (results stay in call order).
        description: What the agent does, for routers and group chats.
            An agent may serve several conversations at once, each on its own memory
            (`reply(..., memory=...)`); runs on one memory go one at a time.
        tool_choice: `auto`, `none`, `required` or a tool's name for the first model call of
            each run (later calls are `auto`, so a forced call cannot loop), or a function of
            the call's index returning each call's choice; None: the model's own default
            (`ChatModel.default_tool_choice`: one tool round for the embedded local model).
        output_reserve: Tokens kept free for the answer by the context budget.
        token_counter: Counts tokens for the context budget (see `parley.agents.budget`).
        context_strategy: What the context budget does with turns past the model's
            `context_size`: `trim` (drop the oldest) or `summarize` (compress them into a
            summary the model writes, kept and extended; `parley.agents.compress`).
        middleware: What every run's events pass through on their way to the caller, in
            order (`parley.agents.middleware`; e.g. `TTSMiddleware` to speak the answers).
    """

    def __init__(
        self,
        name: str,
        model: ChatModel,
        system_prompt: str | None = None,
        tools: Toolkit | Iterable[ToolInput] = (),
        memory: Memory | None = None,
        max_iters: int = 10,
        parallel_tool_calls: bool = True,
        description: str = "",
        *,
        tool_choice: ToolChoicePolicy = None,
        output_reserve: int | None = None,
        token_counter: TokenCounter | None = None,
        middleware: Sequence[Middleware] = (),
        context_strategy: ContextStrategy = "trim",
    ) -> None:
        if max_iters < 1:
            raise UserError(f"max_iters must be at least 1, got {max_iters}")
        self.name = name
        self.model = model
        self.system_prompt = system_prompt
        self.toolkit = _toolkit(tools)
        self.memory: Memory = memory if memory is not None else InMemoryMemory()
        self.max_iters = max_iters
        self.parallel_tool_calls = parallel_tool_calls
        self.description = description
        if isinstance(tool_choice, str):
            check_tool_choice(tool_choice, self.toolkit.specs())
        self.tool_choice = tool_choice
        self.budget = ContextBudget(
            model,
            output_reserve=output_reserve,
            counter=token_counter,
            strategy=context_strategy,
        )
        self.reply_listeners: list[ReplyListener] = []
        """Awaited with the agent and the final message when a run ends with an answer
        (status `completed` or `max_iters`), before its `RunEnded` reaches the caller."""
        self.middleware: list[Middleware] = check_middleware(middleware)
        """What every run's events pass through (a run may add its own: `AgentRun.use`)."""
        self._pending: dict[str, PendingApproval] = {}

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, model={self.model!r}, tools={self.toolkit.names})"

    def with_model(self, model: ChatModel) -> Agent:
        """This agent on another model, its context budget measured against that model.

        The prompt, tools, memory and policies are the same objects (a shallow copy).
        """
        other = copy.copy(self)
        other.model = model
        other.budget = self.budget.for_model(model)
        return other

    # -- running -----------------------------------------------------------------------------------

    def stream(
        self,
        msgs: AgentInput = None,
        *,
        structured: StructuredSchema | None = None,
        memory: Memory | None = None,
        deps: Any = None,
        user_id: str | None = None,
        run_id: str | None = None,
    ) -> AgentRun:
        """Start a run on `msgs` and iterate its events; see `AgentRun`.

        Args:
            msgs: The new input (added to memory first).
            structured: A pydantic model or JSON schema the final answer must follow.
            memory: Run on this memory (a thread's) instead of the agent's own. One run at a
                time per memory: a second one meanwhile raises `UserError`.
            deps: Handed to the tools that take a `RunContext` (`ctx.deps`).
            user_id: Who the run is for (`ctx.user_id`; keys per-user tool state).
            run_id: The run's id (`run_<hex>` by default): a caller that runs it again (a
                takeover) keeps its id across attempts.
        """
        return self._start(
            memory=memory,
            input_msgs=_as_msgs(msgs),
            structured=structured,
            deps=deps,
            user_id=user_id,
            run_id=run_id,
        )

    def _start(self, *, memory: Memory | None = None, **run: Any) -> AgentRun:
        """A run on `memory` (the agent's own when None) that tells the reply listeners."""
        return _ListenedRun(self, self.memory if memory is None else memory, **run)

    async def reply(self, msgs: AgentInput = None, **options: Unpack[RunOptions]) -> Msg:
        """Run on `msgs` and return the final assistant message (options as `stream`'s).

        When the run parks for approval, that is the message whose calls wait (its
        `metadata["interrupt_id"]` is what `resume` takes); at `max_iters`, the last one.

        Raises:
            ModelError: The model failed (after its retries).
        """
        return await _final(self.stream(msgs, **options))

    @overload
    async def reply_structured(
        self,
        msgs: AgentInput,
        schema: type[M],
        *,
        memory: Memory | None = None,
        deps: Any = None,
        user_id: str | None = None,
    ) -> tuple[Msg, M]: ...
    @overload
    async def reply_structured(
        self,
        msgs: AgentInput,
        schema: Mapping[str, Any],
        *,
        memory: Memory | None = None,
        deps: Any = None,
        user_id: str | None = None,
    ) -> tuple[Msg, dict[str, Any]]: ...
    async def reply_structured(
        self,
        msgs: AgentInput,
        schema: StructuredSchema,
        *,
        memory: Memory | None = None,
        deps: Any = None,
        user_id: str | None = None,
    ) -> tuple[Msg, Any]:
        """`reply(..., structured=schema)`, also returning the parsed answer.

        Returns:
            The final message, and the model instance (the dict for a JSON schema).

        Raises:
            ModelOutputError: The run ended without a final answer (parked for approval, or
                at `max_iters`).
        """
        run = self.stream(msgs, structured=schema, memory=memory, deps=deps, user_id=user_id)
        return await _structured_result(run)

    async def observe(self, msgs: Msg | Sequence[Msg]) -> None:
        """Add messages to memory without replying: other agents' turns, an announcement."""
        await self.memory.add(msgs)

    async def tell_listeners(self, run: AgentRun) -> None:
        """Give `run`'s answer to the reply listeners, if it ended with one."""
        if run.final is None or run.status not in ("completed", "max_iters"):
            return
        for listener in list(self.reply_listeners):
            await listener(self, run.final)

    # -- approval ----------------------------------------------------------------------------------

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The runs parked for approval that this agent knows of."""
        return list(self._pending.values())

    def remember_pending(self, pending: PendingApproval) -> None:
        """Hold a parked run's state (the service restores persisted ones with this)."""
        self._pending[pending.interrupt_id] = pending

    def forget_pending(self, message_id: str) -> None:
        """Drop the parked run waiting on the message `message_id`, if any."""
        for key, pending in list(self._pending.items()):
            if pending.message_id == message_id:
                del self._pending[key]

    def _lookup(self, interrupt: str | PendingApproval) -> PendingApproval:
        if isinstance(interrupt, PendingApproval):
            return interrupt
        found = self._pending.get(interrupt)
        if found is None:
            raise UserError(
                f"unknown interrupt id {interrupt!r}: it was resumed already, or belongs to no "
                f"run of agent {self.name!r}"
            )
        return found

    def resume_stream(
        self,
        interrupt: str | PendingApproval,
        approved: bool | Mapping[str, bool],
        **options: Unpack[RunOptions],
    ) -> AgentRun:
        """Continue a run parked for approval, iterating its events.

        Args:
            interrupt: The `interrupt_id` of `ApprovalRequested`, or the `PendingApproval`
                itself (as the service persisted it).
            approved: One verdict for every awaiting call, or one per call id (a call left
                out is denied). Approved calls run; denied ones answer "denied by the user".
            **options: As `stream`'s; `memory` is the one the run parked on, when it was not
                the agent's own, and `run_id` a new one by default.

        Raises:
            UserError: The interrupt id is unknown or used, or a verdict names another call.
        """
        pending = self._lookup(interrupt)
        verdicts = pending.decide(approved)
        return self._start(resume=(pending, verdicts), **options)

    async def resume(
        self,
        interrupt: str | PendingApproval,
        approved: bool | Mapping[str, bool],
        **options: Unpack[RunOptions],
    ) -> Msg:
        """Continue a run parked for approval; the final message, as `reply` returns it."""
        return await _final(self.resume_stream(interrupt, approved, **options))

    # -- continuing --------------------------------------------------------------------------------

    def continue_stream(
        self,
        *,
        memory: Memory | None = None,
        user_id: str | None = None,
        deps: Any = None,
        run_id: str | None = None,
        structured: StructuredSchema | None = None,
        resume: tuple[str, bool | Mapping[str, bool]] | None = None,
    ) -> AgentRun:
        """Continue the conversation `memory` holds, with no new input; iterate its events.

        For a run whose process stopped (the service's takeover of a run whose worker
        died): nothing stored is done again. A conversation ending on the user's message
        (after the calls `planned_calls` makes for it) or on a complete round of tool results
        goes to the model. One ending on an answer (not a paused turn, nor a partial answer a
        cancel kept) ends `completed` with it as `final`, calling no model. Calls of the last
        turn left without a result run again when their tool is `idempotent`; the others get
        the error result `INTERRUPTED` (they may have done their work), which the model reads
        as it goes on. Calls waiting for approval park the run again (`ApprovalRequested`,
        the interrupt id the message was parked with), unless `resume` answers that
        interrupt.

        Args:
            memory: The conversation (a thread's); the agent's own by default.
            user_id: Who the run is for (`ctx.user_id`).
            deps: Handed to the tools that take a `RunContext` (`ctx.deps`).
            run_id: The run's id, kept across attempts (a new one by default).
            structured: A pydantic model or JSON schema the final answer must follow (a
                structured answer stored already is taken as it is).
            resume: The interrupt id and verdicts the interrupted run was resuming with (as
                `resume_stream` takes them): they decide the calls still waiting on that
                interrupt, which a denied call answers `DENIED`.

        Raises:
            UserError: (when iterated) The memory holds no message, or a verdict names a
                call that does not wait.
        """
        return self._start(
            memory=memory,
            carry_on=Continuation(resume=resume),
            structured=structured,
            deps=deps,
            user_id=user_id,
            run_id=run_id,
        )

    async def continue_reply(self, **options: Unpack[ContinueOptions]) -> Msg:
        """`continue_stream` run to its end: the final message, as `reply` returns it."""
        return await _final(self.continue_stream(**options))

    async def planned_calls(self, input_msgs: Sequence[Msg]) -> list[ToolCallBlock]:
        """Tool calls to make before the model's first turn of a run on new input.

        None by default. An agent that always needs a tool's answer first (an assistant over
        documents retrieving for the question) returns the calls here: they run as a turn of
        the agent's own, in memory and in the events like the model's, without a model call.
        """
        return []

    def prompt_messages(self, history: list[Msg]) -> list[Msg]:
        """The conversation as the model is shown it, from the memory's messages.

        The memory's own by default. An agent may reshape what its model reads without
        changing what is kept (an assistant folding retrieved passages into the question for
        a small model); the system prompt and the context budget apply afterwards.
        """
        return history

    def choose_tool(self, index: int) -> str | None:
        """The `tool_choice` of a run's model call number `index` (from 0)."""
        choice = (
            self.tool_choice if self.tool_choice is not None else self.model.default_tool_choice
        )
        if callable(choice):
            return choice(index)
        return choice if index == 0 else None

    # -- sync twins --------------------------------------------------------------------------------

    def reply_sync(self, msgs: AgentInput = None, **options: Unpack[RunOptions]) -> Msg:
        """`reply`, from synchronous code."""
        return run_sync(self.reply(msgs, **options))

    def stream_sync(
        self, msgs: AgentInput = None, **options: Unpack[RunOptions]
    ) -> Iterator[AgentEvent]:
        """`stream`, from synchronous code; closing the iterator stops the run."""
        return iterate_sync(self.stream(msgs, **options))

    def reply_structured_sync(
        self, msgs: AgentInput, schema: StructuredSchema, **options: Unpack[StructuredOptions]
    ) -> tuple[Msg, Any]:
        """`reply_structured`, from synchronous code."""
        return run_sync(self.reply_structured(msgs, schema, **options))

    def resume_sync(
        self,
        interrupt: str | PendingApproval,
        approved: bool | Mapping[str, bool],
        **options: Unpack[RunOptions],
    ) -> Msg:
        """`resume`, from synchronous code."""
        return run_sync(self.resume(interrupt, approved, **options))

    def resume_stream_sync(
        self,
        interrupt: str | PendingApproval,
        approved: bool | Mapping[str, bool],
        **options: Unpack[RunOptions],
    ) -> Iterator[AgentEvent]:
        """`resume_stream`, from synchronous code."""
        return iterate_sync(self.resume_stream(interrupt, approved, **options))

    def continue_reply_sync(self, **options: Unpack[ContinueOptions]) -> Msg:
        """`continue_reply`, from synchronous code."""
        return run_sync(self.continue_reply(**options))

    def continue_stream_sync(self, **options: Unpack[ContinueOptions]) -> Iterator[AgentEvent]:
        """`continue_stream`, from synchronous code; closing the iterator stops the run."""
        return iterate_sync(self.continue_stream(**options))


class _ListenedRun(AgentRun):
    """An `AgentRun` that tells the agent's reply listeners its answer as it ends."""

    async def __anext__(self) -> AgentEvent:
        event = await super().__anext__()
        if isinstance(event, RunEnded):
            await self.agent.tell_listeners(self)
        return event


async def _final(run: AgentRun) -> Msg:
    """`run` run to its end: its final message."""
    final = await run.result()
    if final is None:
        # Only a run interrupted before the model wrote anything ends without a message.
        raise ModelOutputError(f"the run ended ({run.status}) before the model answered")
    return final


async def _structured_result(run: AgentRun) -> tuple[Msg, Any]:
    final = await _final(run)
    if run.status != "completed":
        hint = " (resume it with agent.resume)" if run.status == "awaiting_approval" else ""
        raise ModelOutputError(
            f"no structured answer: the run ended with status {run.status!r}{hint}"
        )
    return final, run.parsed
