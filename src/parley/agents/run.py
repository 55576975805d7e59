"""`AgentRun`: one run of the tool-calling loop, as an async iterator of events.

The loop: the input goes into memory; then, up to `max_iters` times, the prompt is built
(system prompt and the budgeted memory), the model streams its turn (deltas forwarded as
events), the whole turn goes into memory, and, when it calls tools, they run (concurrently
when `parallel_tool_calls`) and one tool message with every result, in call order, goes into
memory. The run ends when a turn calls no tool, at `max_iters`, when a call needs approval,
on cancellation, or on an error.

A turn the model paused (`ChatResponse.paused`: Anthropic's `pause_turn`, a long turn of
server tools such as web search) is not an answer: it goes into memory like any turn, and
the model is called again on the conversation ending with it, which continues the turn.
Each call counts towards `max_iters` (a model that always pauses ends there) and is sent
the tool choice of the turn's first call. Memory keeps the parts apart, as they came (a
formatter sends consecutive assistant messages as one turn, as Anthropic's API combines
them); `final` joins them, so the answer is the whole turn.

How each way of stopping leaves things:

- `max_iters`: `MaxItersReached`, then `RunEnded(status="max_iters")` whose `final` is the
  last assistant message (a paused turn's parts so far). The tools of that last turn have
  run, so memory never ends on a call without its result. It may end on a paused turn,
  though, with a server tool call left without its result: the Anthropic formatter leaves
  such a call out once another message follows it (Claude refuses it there).
- Errors (a model failure; tool failures never get here, they go back to the model):
  `RunError`, then `RunEnded(status="error")`; the iterator itself does not raise, so an
  event stream (the service's SSE) always ends with `RunEnded`. `agent.reply()` re-raises.
- `run.cancel()`: the model's stream or the running tools stop; the partial assistant
  message is kept in memory with `metadata["interrupted"] = True` (and reported by
  `MessageCompleted`), then `RunEnded(status="interrupted")`. Running tools are cancelled
  and waited for: a tool may answer the cancel with a result saying what it did (the code
  interpreter stops its cell: "Stopped by cancel", with the output so far), and the round's
  tool message records those results, and `CANCELLED` for the calls that did not finish.
- The consumer stops early (`aclose()`, or leaves its `async for` with `break`) or its task
  is cancelled: the same clean-up, with no further event (the task's cancellation
  propagates). Each message goes into memory before the events that report it, so stopping
  at any event loses nothing that was complete. A loop left early closes the run at once, in
  a task (`_Iteration`); a run that starts on the memory meanwhile waits for that closing.

Calls left unanswered by an interrupted or parked run (a turn cut off before its calls ran,
an approval never given) are answered with the error result `NOT_RUN` when the conversation
goes on, before the new input.

A run may also continue the conversation its memory holds, with no new input
(`Agent.continue_stream`: a run taken over after its process died). Nothing stored is done
again: a conversation ending on the user's message (after the agent's planned calls for it,
`Agent.planned_calls`) or on a complete round of tool results goes to the model; one ending
on an answer (not a paused turn, nor a partial answer a cancel kept) ends `completed` with
it, calling no model; calls left without a result run again only when their tool is
`idempotent`, the others get the error result `INTERRUPTED` (they may have done their work),
and the model goes on; calls waiting for approval park again, under the same interrupt id,
unless the run carries that interrupt's verdicts (a resumed run that was itself cut off).
Its model calls count on from the assistant turns since the last user message.

Tools get the run's `RunContext` (run id, the memory's thread, the user and `deps` the caller
gave, the agent's name). A run holds its memory from its first step to its end: a second run
on the same memory meanwhile raises `UserError` (two runs would interleave their messages and
each prompt would hold the other's conversation); give concurrent conversations a memory each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import BaseModel

from parley import tracing
from parley.agents import events as ev
from parley.agents._claim import claim, close_soon, closing, release
from parley.agents.approval import (
    CANCELLED,
    DENIED,
    INTERRUPTED,
    NOT_RUN,
    PendingApproval,
    error_result,
    unanswered_calls,
)
from parley.agents.middleware import Middleware, check_middleware, through
from parley.errors import UserError
from parley.messages import Block, Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from parley.models.response import PAUSED, ChatResponse, ChatUsage
from parley.models.tools import ToolSpec
from parley.tools.context import RunContext

if TYPE_CHECKING:
    from parley.agents.agent import Agent
    from parley.agents.memory import Memory
    from parley.models.stream import ChatStream

__all__ = [
    "AgentRun",
    "Continuation",
    "StructuredSchema",
    "chunk_events",
    "model_calls_since_question",
]

T = TypeVar("T")

StructuredSchema = type[BaseModel] | Mapping[str, Any]
"""What a structured answer must follow: a pydantic model class or a JSON schema."""


@dataclass(frozen=True)
class Continuation:
    """What a run that continues its stored conversation is given (`Agent.continue_stream`).

    Attributes:
        resume: An interrupt's id and its verdicts, when the run being continued was the
            answer to that approval: if the conversation still waits on it, the calls are
            decided by them instead of parking again.
    """

    resume: tuple[str, bool | Mapping[str, bool]] | None = None


def chunk_events(chunk: ChatResponse, seen: set[str]) -> list[ev.AgentEvent]:
    """The events for one streamed delta; `seen` holds the call ids already started."""
    events: list[ev.AgentEvent] = []
    for block in chunk.content:
        if isinstance(block, TextBlock):
            if block.text:
                events.append(ev.TextDelta(text=block.text))
        elif isinstance(block, ThinkingBlock):
            if block.thinking:
                events.append(ev.ThinkingDelta(text=block.thinking))
        elif isinstance(block, ToolCallBlock):
            if block.id not in seen:
                seen.add(block.id)
                events.append(ev.ToolCallStarted(call_id=block.id, name=block.name))
            if block.raw_input:
                events.append(ev.ToolCallArgumentsDelta(call_id=block.id, delta=block.raw_input))
    return events


def _whole_turn(parts: list[Msg]) -> Msg:
    """One message of a paused turn's parts: their content and usage, the last one's the rest."""
    last = parts[-1]
    usage = ChatUsage()
    for part in parts:
        usage += part.usage or ChatUsage()
    content = [block for part in parts for block in part.content]
    return last.model_copy(
        update={"content": content, "usage": usage, "metadata": dict(last.metadata)}
    )


def _being_cancelled() -> bool:
    """Whether this task itself is being cancelled (not just a task it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def model_calls_since_question(history: Sequence[Msg]) -> int:
    """The assistant turns after the last user message: how far into its turn a model call is.

    A continued run counts on from them.
    """
    count = 0
    for msg in reversed(history):
        if msg.role == "user":
            break
        count += msg.role == "assistant"
    return count


def _trailing_questions(history: list[Msg]) -> list[Msg]:
    """The user's messages the conversation ends on: a new run's input, as it was given."""
    questions: list[Msg] = []
    for msg in reversed(history):
        if msg.role != "user":
            break
        questions.insert(0, msg)
    return questions


def _trailing_paused(history: list[Msg]) -> list[Msg]:
    """The parts of a turn the model paused, if the conversation ends on one."""
    parts: list[Msg] = []
    for msg in reversed(history):
        if msg.role != "assistant" or not msg.metadata.get(PAUSED) or msg.tool_calls:
            break
        parts.insert(0, msg)
    return parts


def _is_answer(msg: Msg) -> bool:
    """Whether a stored message is a finished answer: the assistant's, calling nothing."""
    unfinished = msg.metadata.get(PAUSED) or msg.metadata.get("interrupted")
    return msg.role == "assistant" and not msg.tool_calls and not unfinished


def _parse_structured(schema: StructuredSchema, data: Any) -> Any:
    """A stored structured answer as `AgentRun.parsed` holds it (the model, or the dict)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_validate(data)
    return data


def _tool_message(
    calls: list[ToolCallBlock], verdicts: dict[str, bool], done: dict[str, ToolResultBlock]
) -> Msg:
    """The tool message of a round: each call's result, `DENIED`, or `CANCELLED`."""
    results: list[Block] = []
    for call in calls:
        if not verdicts.get(call.id, True):
            results.append(error_result(call, DENIED))
        else:
            results.append(done.get(call.id) or error_result(call, CANCELLED))
    return Msg(role="tool", content=results)


class AgentRun:
    """One run of an agent: iterate it for events; `cancel()` stops it cleanly.

    Made by `agent.stream(...)` and `agent.resume_stream(...)`. After the run, `status`,
    `final` (the last assistant message, or the whole of a turn the model paused and
    continued: see the module), `usage` (summed over its model calls), `error`,
    `pending` (when parked for approval) and `parsed` (a structured answer) tell how it went.
    Leaving an `async for` over it early (`break`) closes it, as `await run.aclose()` or
    `async with` do; a run iterated with `anext()` alone is closed with `aclose()`. Runs on
    one memory go one at a time (two at once would interleave their messages): the service
    keeps to one run per thread.
    """

    def __init__(
        self,
        agent: Agent,
        memory: Memory,
        *,
        input_msgs: list[Msg] | None = None,
        resume: tuple[PendingApproval, dict[str, bool]] | None = None,
        carry_on: Continuation | None = None,
        structured: StructuredSchema | None = None,
        deps: Any = None,
        user_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            raise UserError(f"run_id must be a non-empty string, got {run_id!r}")
        self.agent = agent
        self.memory = memory
        self.run_id = run_id if run_id is not None else f"run_{uuid.uuid4().hex}"
        """The run's id: the caller's (a run that keeps its id across attempts), or a new one."""
        self._key = uuid.uuid4().hex  # this object's own, where two may share a run id
        self.context: RunContext[Any] = RunContext(
            run_id=self.run_id,
            agent=agent.name,
            thread_id=memory.thread_id,
            user_id=user_id,
            deps=deps,
        )
        """What the run's tool calls get (see `parley.tools.context`)."""
        self.status: ev.RunStatus | None = None
        self.final: Msg | None = None
        self.usage = ChatUsage()
        self.error: Exception | None = None
        self.iterations = 0
        self.pending: PendingApproval | None = None
        self.parsed: Any = None
        """The structured answer: the pydantic instance, or the dict for a JSON schema."""
        self._input = input_msgs or []
        self._resume = resume
        self._carry_on = carry_on
        self._open: tuple[Msg, list[ToolCallBlock]] | None = None  # a continued run's open calls
        self._last: Msg | None = None  # the last stored message, when continuing
        self._input_stored: list[Msg] = []  # the user's messages it ends on, when continuing
        self._structured = structured
        self._structured_done = False
        self._tools: list[ToolSpec] = []
        self._paused: list[Msg] = []  # this turn's messages so far, when the model paused it
        self._cancelled = False
        self._stream: ChatStream | None = None
        self._task: asyncio.Future[Any] | None = None
        self.middleware: list[Middleware] = list(agent.middleware)
        """What the run's events pass through on their way out (`parley.agents.middleware`);
        the agent's, then any added with `use()`."""
        self._events: AsyncGenerator[ev.AgentEvent, None] | None = None
        self._lent: weakref.ref[AsyncGenerator[ev.AgentEvent, None]] | None = None
        """The events while an `async for` holds them (see `_Iteration`)."""
        self._trace = tracing.agent_run(self, self._input)  # None when tracing is off

    # -- the iterator ------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[ev.AgentEvent]:
        # An `async for` of its own: leaving it early closes the run at once (`_Iteration`).
        return _Iteration(self)

    async def __anext__(self) -> ev.AgentEvent:
        return await self._generator().__anext__()

    def _generator(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """The run's events, made on first use (its middleware fixed then).

        Raises:
            StopAsyncIteration: An `async for` had them and was left: the run is closed.
        """
        if self._events is not None:
            return self._events
        if self._lent is not None:
            lent = self._lent()
            if lent is None:
                raise StopAsyncIteration
            return lent
        run = self._run()
        if self._trace is not None:
            run = self._trace.wrap(run)  # the agent's span around its own events
        self._events = through(run, self.middleware, self) if self.middleware else run
        return self._events

    def _lend(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """The events, for an `async for` to hold: the run keeps only a weak reference."""
        events = self._generator()
        self._events = None
        self._lent = weakref.ref(events)
        return events

    async def aclose(self) -> None:
        """Stop the run (if still going) and clean up; no further event."""
        ending = closing(self._key)
        if ending is not None:  # closing already: its consumer left its `async for`
            await asyncio.shield(asyncio.wrap_future(ending))
            return
        events = self._events
        if events is None and self._lent is not None:
            events = self._lent()
        if events is not None:
            await events.aclose()

    def use(self, *middleware: Middleware) -> Self:
        """Pass this run's events through `middleware` too (after the agent's own).

        Raises:
            UserError: The run's events are being iterated already, or an item is not a
                middleware.
        """
        if self._events is not None or self._lent is not None:
            raise UserError("middleware must be added before the run's events are read")
        self.middleware.extend(check_middleware(middleware))
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def cancel(self) -> None:
        """End the run soon: it stops its model stream or tools and ends `interrupted`.

        Call it from the event loop the run iterates on (another task, a callback).
        """
        self._cancelled = True
        if self._stream is not None:
            self._stream.cancel()
        if self._task is not None:
            self._task.cancel()

    async def result(self) -> Msg | None:
        """Run to the end and return the final message; re-raises the run's error."""
        async with self:
            async for _ in self:
                pass
        if self.error is not None:
            raise self.error
        return self.final

    # -- the loop ----------------------------------------------------------------------------------

    async def _run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        await claim(
            self.memory, self.run_id, self._key
        )  # a usage mistake raises here, before any event
        try:
            await self._begin()
            yield ev.RunStarted(run_id=self.run_id, agent=self.agent.name)
            try:
                async with contextlib.aclosing(self._body()) as body:
                    async for event in body:
                        yield event
            except asyncio.CancelledError:
                self.status = "interrupted"  # work was under way
                raise
            except GeneratorExit:
                # The consumer stopped between two events: an end already reached stands.
                self.status = self.status or "interrupted"
                raise
            except Exception as exc:
                self.error = exc
                self.status = "error"
                yield ev.RunError(message=str(exc) or type(exc).__name__, kind=type(exc).__name__)
            yield ev.RunEnded(status=self.status or "completed", final=self.final, usage=self.usage)
        finally:
            release(self.memory, self._key)

    async def _body(self) -> AsyncGenerator[ev.AgentEvent, None]:
        if self._resume is not None:
            pending, verdicts = self._resume
            async with contextlib.aclosing(self._run_tools(pending.calls, verdicts)) as tools:
                async for event in tools:
                    yield event
        elif self._carry_on is not None:
            async with contextlib.aclosing(self._continue_stored()) as carried:
                async for event in carried:
                    yield event
        elif self._input and (planned := await self.agent.planned_calls(self._input)):
            async with contextlib.aclosing(self._planned_round(planned)) as round_:
                async for event in round_:
                    yield event
        while self.status is None:
            if self._cancelled:
                self.status = "interrupted"
                return
            if self.iterations >= self.agent.max_iters:
                self.status = "max_iters"
                yield ev.MaxItersReached(iters=self.iterations)
                return
            async with contextlib.aclosing(self._turn()) as turn:
                async for event in turn:
                    yield event
        # A continued run may end on a structured answer stored already (`_end_with`).
        wants_structured = self._structured is not None and not self._structured_done
        if self.status == "completed" and wants_structured:
            async with contextlib.aclosing(self._structured_answer()) as answer:
                async for event in answer:
                    yield event

    async def _turn(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """One model call and what follows it: done, parked, or the tools run."""
        self.iterations += 1
        async with contextlib.aclosing(self._model_turn()) as model_turn:
            async for event in model_turn:
                yield event
        msg = self.final
        if self.status is not None or msg is None:
            return
        if not msg.tool_calls:
            if not self._paused:  # a paused turn goes on: the next call continues it
                self.status = "completed"
        elif self.pending is not None:
            self.status = "awaiting_approval"
            yield ev.ApprovalRequested(
                interrupt_id=self.pending.interrupt_id, calls=self.pending.awaiting_calls
            )
        else:
            async with contextlib.aclosing(self._run_tools(msg.tool_calls, {})) as tools:
                async for event in tools:
                    yield event

    # -- starting ----------------------------------------------------------------------------------

    async def _begin(self) -> None:
        history = await self.memory.get()
        self._tools = self.agent.toolkit.specs()
        open_calls = unanswered_calls(history)
        if self._resume is not None:
            self._check_resumable(self._resume[0], open_calls)
            self.iterations = self._resume[0].iterations
        elif self._carry_on is not None:
            self._begin_continuing(history, open_calls)
        elif open_calls is not None:
            msg, calls = open_calls
            self.agent.forget_pending(msg.id)
            results: list[Block] = [error_result(c, NOT_RUN) for c in calls]
            await self.memory.add(Msg(role="tool", content=results))
        if self._input:
            await self.memory.add(self._input)

    def _check_resumable(
        self, pending: PendingApproval, open_calls: tuple[Msg, list[ToolCallBlock]] | None
    ) -> None:
        msg = open_calls[0] if open_calls else None
        if msg is None or msg.id != pending.message_id:
            raise UserError(
                f"interrupt {pending.interrupt_id} is no longer pending: it was resumed already,"
                " or the conversation went on"
            )
        self.agent.forget_pending(msg.id)

    def _begin_continuing(
        self, history: list[Msg], open_calls: tuple[Msg, list[ToolCallBlock]] | None
    ) -> None:
        if not history:
            raise UserError(
                "nothing to continue: the memory holds no message; start a run on new input "
                "with agent.stream(...)"
            )
        self._open = open_calls
        self._last = history[-1]
        self._input_stored = _trailing_questions(history)
        self._paused = _trailing_paused(history)
        self.iterations = model_calls_since_question(history)

    async def _continue_stored(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """Take the stored conversation up where it stopped (see the module)."""
        if self._open is None:
            assert self._last is not None  # set by `_begin_continuing`
            if _is_answer(self._last):
                self._end_with(self._last)
            elif self._input_stored and (
                planned := await self.agent.planned_calls(self._input_stored)
            ):
                # A run on that question would have made these calls first: they were not.
                async with contextlib.aclosing(self._planned_round(planned)) as round_:
                    async for event in round_:
                        yield event
            return  # else the loop calls the model on the conversation as stored
        msg, calls = self._open
        pending = self._parked_again(msg, calls)
        verdicts: dict[str, bool] = {}
        if pending is not None:
            assert self._carry_on is not None  # only a continuing run gets here
            answer = self._carry_on.resume
            if answer is None or answer[0] != pending.interrupt_id:
                async with contextlib.aclosing(self._park_again(msg, pending)) as parked:
                    async for event in parked:
                        yield event
                return
            verdicts = pending.decide(answer[1])
        self.agent.forget_pending(msg.id)
        toolkit = self.agent.toolkit
        # A call that may have done its work is not done twice: it is answered as interrupted.
        answered = {
            c.id: error_result(c, INTERRUPTED)
            for c in calls
            if verdicts.get(c.id, True) and not toolkit.is_idempotent(c)
        }
        async with contextlib.aclosing(self._run_tools(calls, verdicts, answered)) as tools:
            async for event in tools:
                yield event

    def _end_with(self, answer: Msg) -> None:
        """End on an answer the conversation holds already: no model call."""
        self.final = answer
        self.status = "completed"
        data = answer.metadata.get("structured")
        if self._structured is not None and data is not None:
            self.parsed = _parse_structured(self._structured, data)
            self._structured_done = True

    def _parked_again(self, msg: Msg, calls: list[ToolCallBlock]) -> PendingApproval | None:
        """The approval `msg`'s open calls still wait for, if any: the agent's, or rebuilt."""
        awaiting = [c.id for c in calls if self.agent.toolkit.needs_approval(c)]
        if not awaiting:
            return None
        for known in self.agent.pending_approvals:
            if known.message_id == msg.id:
                return known
        # Rebuilt from the stored message, under the interrupt id it was parked with (a
        # client may hold it), so `resume` finds it as before.
        pending = PendingApproval(
            agent=self.agent.name,
            message_id=msg.id,
            calls=calls,
            awaiting=awaiting,
            iterations=self.iterations,
        )
        interrupt_id = msg.metadata.get("interrupt_id")
        if isinstance(interrupt_id, str):
            pending.interrupt_id = interrupt_id
        return pending

    async def _park_again(
        self, msg: Msg, pending: PendingApproval
    ) -> AsyncGenerator[ev.AgentEvent, None]:
        self.pending = pending
        self.agent.remember_pending(pending)
        self.final = msg
        self.status = "awaiting_approval"
        yield ev.ApprovalRequested(interrupt_id=pending.interrupt_id, calls=pending.awaiting_calls)

    async def _planned_round(
        self, calls: list[ToolCallBlock]
    ) -> AsyncGenerator[ev.AgentEvent, None]:
        """Run the agent's planned calls (`Agent.planned_calls`) as a turn of its own.

        No model call: the calls and their results go into memory and the events like a
        model's tool round.
        """
        msg = Msg(role="assistant", content=list[Block](calls), name=self.agent.name)
        await self.memory.add(msg)
        for call in calls:
            yield ev.ToolCallStarted(call_id=call.id, name=call.name)
            yield ev.ToolCallEnded(call=call)
        yield ev.MessageCompleted(msg=msg)
        async with contextlib.aclosing(self._run_tools(calls, {})) as tools:
            async for event in tools:
                yield event

    # -- the model ---------------------------------------------------------------------------------

    async def _prompt(self, tools: list[ToolSpec]) -> list[Msg]:
        history = self.agent.prompt_messages(await self.memory.get())
        system = [Msg.system(self.agent.system_prompt)] if self.agent.system_prompt else []
        return await self.agent.budget.prepare([*system, *history], tools)

    def _open_stream(self, prompt: list[Msg]) -> ChatStream:
        agent = self.agent
        if not self._tools:
            return agent.model.chat_stream(prompt)
        # A paused turn's continuation is the same turn: its first call's tool choice.
        turn_index = self.iterations - 1 - len(self._paused)
        return agent.model.chat_stream(
            prompt,
            tools=self._tools,
            tool_choice=agent.choose_tool(turn_index),
            parallel_tool_calls=agent.parallel_tool_calls,
        )

    async def _model_turn(self) -> AsyncGenerator[ev.AgentEvent, None]:
        prompt = await self._prompt(self._tools)
        with tracing.attached(self._trace):  # the model's span in the run's (no await here)
            stream = self._open_stream(prompt)
        self._stream = stream
        seen: set[str] = set()
        try:
            async for chunk in stream:
                if chunk.is_last:
                    break
                for event in chunk_events(chunk, seen):
                    yield event
        except (asyncio.CancelledError, GeneratorExit):
            try:
                await stream.aclose()  # re-raises a cancellation arriving meanwhile...
            finally:
                await self._keep_partial(stream.response)  # ...which keeps the partial too
            raise
        finally:
            self._stream = None
        final = stream.response
        assert final is not None  # the stream ended: its final chunk is set
        if final.finish_reason == "interrupted":
            if await self._keep_partial(final):
                assert self.final is not None
                yield ev.MessageCompleted(msg=self.final)
            return
        async for event in self._complete_turn(final):
            yield event

    async def _complete_turn(self, final: ChatResponse) -> AsyncGenerator[ev.AgentEvent, None]:
        self.usage += final.usage or ChatUsage()
        msg = final.to_msg(name=self.agent.name)
        self._park_if_needed(msg)
        # Into memory before the events: a consumer may stop at any event.
        await self.memory.add(msg)
        # A turn calling our tools is not left paused: their results must follow it.
        self._set_final(msg, paused=final.paused and not msg.tool_calls)
        for call in msg.tool_calls:
            yield ev.ToolCallEnded(call=call)
        yield ev.MessageCompleted(msg=msg)

    async def _keep_partial(self, response: ChatResponse | None) -> bool:
        """Keep an interrupted turn's partial message in memory; whether there was one."""
        self.status = "interrupted"
        if response is None:
            return False
        self.usage += response.usage or ChatUsage()
        if not response.content:
            return False
        msg = response.to_msg(name=self.agent.name)
        msg.metadata["interrupted"] = True
        await self.memory.add(msg)
        self._set_final(msg)
        return True

    def _set_final(self, msg: Msg, *, paused: bool = False) -> None:
        """`final` is `msg`, joined after the turn's paused messages if there are any."""
        self.final = _whole_turn([*self._paused, msg]) if self._paused else msg
        if paused:
            self._paused.append(msg)
        else:
            self._paused = []

    def _park_if_needed(self, msg: Msg) -> None:
        toolkit = self.agent.toolkit
        awaiting = [c.id for c in msg.tool_calls if toolkit.needs_approval(c)]
        if not awaiting:
            return
        pending = PendingApproval(
            agent=self.agent.name,
            message_id=msg.id,
            calls=msg.tool_calls,
            awaiting=awaiting,
            iterations=self.iterations,
        )
        # On the message too, so a stored thread shows what it waits for.
        msg.metadata["interrupt_id"] = pending.interrupt_id
        self.pending = pending
        self.agent.remember_pending(pending)

    # -- tools and the structured answer -----------------------------------------------------------

    async def _cancellable(self, work: Coroutine[Any, Any, T]) -> T | None:
        """Await `work` as a task `cancel()` can stop; None (status interrupted) if it did."""
        # The run's span current in the task: its tools' and model calls' spans nest in it.
        context = tracing.task_context(self._trace)
        task = asyncio.get_running_loop().create_task(work, context=context)
        self._task = task
        try:
            return await task
        except asyncio.CancelledError:
            if self._cancelled and not _being_cancelled():
                self.status = "interrupted"
                return None
            raise
        finally:
            self._task = None

    async def _run_tools(
        self,
        calls: list[ToolCallBlock],
        verdicts: dict[str, bool],
        answered: Mapping[str, ToolResultBlock] | None = None,
    ) -> AsyncGenerator[ev.AgentEvent, None]:
        """Run a round's calls: those approved (all by default) and not `answered` already."""
        # Filled as calls return, so a cancelled round still records what its tools said.
        done: dict[str, ToolResultBlock] = dict(answered or {})
        runnable = [c for c in calls if verdicts.get(c.id, True) and c.id not in done]
        work = self.agent.toolkit.run_all(
            runnable, self.context, parallel=self.agent.parallel_tool_calls, into=done
        )
        try:
            await self._cancellable(work)
        except asyncio.CancelledError:  # this task itself is cancelled: record, no event
            await self.memory.add(_tool_message(calls, verdicts, done))
            raise
        msg = _tool_message(calls, verdicts, done)
        await self.memory.add(msg)  # before the events, as for the model's turn
        for result in msg.tool_results:
            yield ev.ToolResult(result=result)
        yield ev.MessageCompleted(msg=msg)

    async def _structured_answer(self) -> AsyncGenerator[ev.AgentEvent, None]:
        assert self._structured is not None
        prompt = await self._prompt([])
        answer = await self._cancellable(
            self.agent.model.generate_structured_output(prompt, self._structured)
        )
        if answer is None:
            return
        self.usage += answer.usage
        msg = Msg.assistant(
            json.dumps(answer.content, ensure_ascii=False),
            name=self.agent.name,
            metadata={"structured": answer.content},
            usage=answer.usage,
        )
        await self.memory.add(msg)
        self.final = msg
        self.parsed = answer.parsed if answer.parsed is not None else answer.content
        yield ev.MessageCompleted(msg=msg)


class _Iteration:
    """One `async for` over a run; leaving it early closes the run at once.

    Python's `async for` never closes what it iterates: a run left with `break` stayed open,
    holding its memory, until the garbage collector found it (the run and its events refer
    to each other, so only a collection frees them). The loop holds this object alone, and
    the run's events through it, so the object goes when the loop is left: if the run is
    still going, it is closed then, as `aclose()` would, in a task (`close_soon`); the
    memory's next run waits for that closing.
    """

    __slots__ = ("events", "run")

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self.events: AsyncGenerator[ev.AgentEvent, None] | None = None

    def __aiter__(self) -> _Iteration:
        return self

    async def __anext__(self) -> ev.AgentEvent:
        if self.events is None:
            self.events = self.run._lend()
        return await self.run.__anext__()

    def __del__(self) -> None:
        events = self.events
        # A generator still under way has its frame (a finished or closed one has none).
        if events is not None and getattr(events, "ag_frame", None) is not None:
            close_soon(self.run._key, events)
