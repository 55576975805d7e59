"""Running a dataset over a target, then judging each case.

Each case runs concurrently (within a limit), retried on provider errors, in a span of its
own, then its evaluators judge it.

Targets:

- an `Agent`: a fresh run per case on a memory of its own (`agent.stream(..., memory=...)`),
  so cases never see each other; the tool calls and results come from the run's events, the
  passages from the results of its retrieval tools (a `datastore` tool such as
  `parley.rag.RetrievalTool`), the usage and cost from the run;
- a `ChatModel`: one `chat` call, or `generate_structured_output` when the case or the dataset
  asks for an `output_schema`;
- any function `f(inputs)` or `f(inputs, ctx)`, async or not (a sync one runs in a thread);
  with `ctx` (an `EvalContext`) it may record tool calls, passages and usage itself. A `Msg`
  or a `ChatResponse` it returns counts as its text and usage.

A case whose target raises a provider error worth another try (a lost connection, a timeout,
HTTP 408/409/429/5xx: `parley.models.retry`) is tried again, up to `retries` times, with
exponential backoff; any other error, and the last one, is the case's `error` and the run goes
on. Cancelling the run (Ctrl+C in `evaluate_sync`) cancels the cases in flight.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from parley import tracing
from parley.agents.agent import Agent
from parley.agents.events import ToolCallEnded, ToolResult
from parley.agents.memory import InMemoryMemory
from parley.errors import UserError
from parley.evals._context import EvalContext, output_text
from parley.evals.evaluators import run_evaluator
from parley.evals.report import CaseResult, EvalReport, ToolCallRecord
from parley.messages import Msg
from parley.models.base import ChatModel
from parley.models.response import ChatResponse, StructuredResponse
from parley.models.retry import RetryPolicy, retry_wait

if TYPE_CHECKING:
    from parley.evals.dataset import Case, Dataset

__all__ = [
    "CaseTimeoutError",
    "EvaluateOptions",
    "Target",
    "describe_target",
    "evaluate",
    "passages",
]

Target = Agent | ChatModel | Callable[..., Any]
"""What a dataset runs over: an agent, a chat model, or a function of the inputs."""


class EvaluateOptions(TypedDict, total=False):
    """`evaluate`'s keyword arguments, which `Dataset.evaluate` and its sync twin pass on."""

    concurrency: int
    retries: int
    name: str | None
    settings: Mapping[str, Any] | None
    judge_model: ChatModel | None
    retry_policy: RetryPolicy | None
    timeout: float | None


class _Run(Protocol):
    """One attempt at a case: fills `ctx` and returns the output."""

    async def __call__(self, ctx: EvalContext) -> Any: ...


def describe_target(target: Target) -> str:
    """The target in one line, as the report names it."""
    if isinstance(target, Agent):
        return f"agent {target.name} ({_model_name(target.model)})"
    if isinstance(target, ChatModel):
        return _model_name(target)
    name = getattr(target, "__qualname__", None) or type(target).__name__
    return f"function {name}"


def _model_name(model: ChatModel) -> str:
    return f"{model.provider}:{model.model}"


async def evaluate(
    dataset: Dataset,
    target: Target,
    *,
    concurrency: int = 4,
    retries: int = 2,
    name: str | None = None,
    settings: Mapping[str, Any] | None = None,
    judge_model: ChatModel | None = None,
    retry_policy: RetryPolicy | None = None,
    timeout: float | None = None,
) -> EvalReport:
    """Run every case of `dataset` over `target` and judge it.

    Args:
        dataset: The cases and their evaluators.
        target: An `Agent`, a `ChatModel`, or a function of a case's inputs.
        concurrency: The most cases running at once.
        retries: Tries after the first on a provider error (rate limits, 5xx, lost
            connections); never on a usage error.
        name: What the report calls the target (default: its kind and name).
        settings: What else identifies the run, kept in the report.
        judge_model: The model of the `Judge` evaluators that name none.
        retry_policy: The backoff between tries (`retries` sets its `max_retries`).
        timeout: Seconds one try of a case may take; a case that takes longer ends with a
            `CaseTimeoutError` (not tried again: a slow model would be as slow again).

    Returns:
        The report: each case's result in the dataset's order.

    Raises:
        UserError: `concurrency` below 1, `retries` below 0, `timeout` not above 0, or a
            target of no known kind.
    """
    if concurrency < 1:
        raise UserError(f"concurrency must be at least 1, got {concurrency}")
    if retries < 0:
        raise UserError(f"retries must be 0 or more, got {retries}")
    if timeout is not None and not timeout > 0:
        raise UserError(f"timeout must be above 0 seconds, got {timeout}")
    run = _runner(target)
    policy = RetryPolicy(
        max_retries=retries,
        initial_delay=retry_policy.initial_delay if retry_policy else 0.5,
        max_delay=retry_policy.max_delay if retry_policy else 20.0,
    )
    limit = asyncio.Semaphore(concurrency)
    started = time.perf_counter()
    report = EvalReport(
        dataset=dataset.name,
        target=name or describe_target(target),
        settings=_settings(concurrency, retries, judge_model, settings, timeout),
    )

    async def one(case: Case) -> CaseResult:
        async with limit:
            return await _run_case(dataset, case, _timed(run, timeout), policy, judge_model)

    # A TaskGroup: cancelling the run (or a bug in the runner) cancels every case in flight.
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(case)) for case in dataset.cases]
    report.cases = [task.result() for task in tasks]
    report.duration = time.perf_counter() - started
    return report


def _settings(
    concurrency: int,
    retries: int,
    judge_model: ChatModel | None,
    extra: Mapping[str, Any] | None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """What identifies the run in its report: the runner's settings, then the caller's."""
    found: dict[str, Any] = {"concurrency": concurrency, "retries": retries}
    if timeout is not None:
        found["timeout"] = timeout
    if judge_model is not None:
        found["judge_model"] = _model_name(judge_model)
    return {**found, **(extra or {})}


async def _run_case(
    dataset: Dataset,
    case: Case,
    run: _Run,
    policy: RetryPolicy,
    judge_model: ChatModel | None,
) -> CaseResult:
    with tracing.eval_case(dataset.name, case.name) as scope:
        ctx = EvalContext(case, output_schema=dataset.schema_for(case), judge_model=judge_model)
        error, attempts = await _attempts(run, ctx, policy)
        results = []
        if error is None:
            evaluators = dataset.evaluators_for(case)
            results = list(await asyncio.gather(*(run_evaluator(e, ctx) for e in evaluators)))
        result = CaseResult(
            name=case.name,
            inputs=_jsonable(case.inputs),
            expected=_jsonable(case.expected),
            output=_jsonable(ctx.output),
            metadata=case.metadata,
            results=results,
            tool_calls=ctx.tool_calls,
            retrieved=ctx.retrieved,
            usage=ctx.usage,
            judge_usage=ctx.judge_usage,
            duration=ctx.duration,
            attempts=attempts,
            error=None if error is None else f"{type(error).__name__}: {error}",
        )
        scope.result(passed=result.passed, score=result.score, attempts=attempts, error=error)
        result.trace_id = scope.trace_id
        return result


class CaseTimeoutError(Exception):
    """A try of a case took longer than the run's `timeout`."""


def _timed(run: _Run, timeout: float | None) -> _Run:
    """`run`, bounded by `timeout` seconds a try (as it is without one)."""
    if timeout is None:
        return run

    async def bounded(ctx: EvalContext) -> Any:
        try:
            async with asyncio.timeout(timeout):
                return await run(ctx)
        except TimeoutError:
            # Not a TimeoutError: the retry policy would take that for a provider's timeout.
            raise CaseTimeoutError(f"took longer than {timeout:g} s") from None

    return bounded


async def _attempts(
    run: _Run, ctx: EvalContext, policy: RetryPolicy
) -> tuple[Exception | None, int]:
    """Run the case, again after a retryable provider error: (the error it ended with, tries)."""
    attempt = 0
    while True:
        attempt += 1
        ctx.reset()
        started = time.perf_counter()
        try:
            ctx.output = await run(ctx)
        except Exception as error:  # the target's failure is the case's result, not the run's
            ctx.duration = time.perf_counter() - started
            wait = retry_wait(policy, attempt, error, describe=f"case {ctx.case.name!r}")
            if wait is None:
                return error, attempt
            await asyncio.sleep(wait)
            continue
        ctx.duration = time.perf_counter() - started
        return None, attempt


def _jsonable(value: Any) -> Any:
    if isinstance(value, Msg):
        return value.model_dump(mode="json", exclude_none=True)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


# -- targets ------------------------------------------------------------------------------------


def _runner(target: Target) -> _Run:
    if isinstance(target, Agent):
        return _AgentRun(target)
    if isinstance(target, ChatModel):
        return _ModelRun(target)
    if callable(target):
        return _FunctionRun(target)
    raise UserError(
        f"cannot evaluate {type(target).__name__}: give an Agent, a ChatModel or a function"
    )


def _messages(inputs: Any) -> list[Msg]:
    """A case's inputs as messages: text is a user's question, messages stay, else JSON text."""
    if isinstance(inputs, str):
        return [Msg.user(inputs)]
    if isinstance(inputs, Msg):
        return [inputs]
    if (
        isinstance(inputs, list)
        and inputs
        and all(isinstance(m, Msg) or (isinstance(m, Mapping) and "role" in m) for m in inputs)
    ):
        return [m if isinstance(m, Msg) else Msg.model_validate(m) for m in inputs]
    if isinstance(inputs, Mapping) and "role" in inputs:
        return [Msg.model_validate(inputs)]
    return [Msg.user(output_text(inputs))]


_PASSAGE = re.compile(r"\n\n(?=\[\d+\] )")
_NUMBER = re.compile(r"^\[\d+\] ")


def passages(text: str) -> list[str]:
    """The passages of a retrieval tool's result (`[n] source` lines over their texts)."""
    if not _NUMBER.match(text):  # "no passage matches", or a tool of another kind
        return []
    return [_NUMBER.sub("", part, count=1).strip() for part in _PASSAGE.split(text)]


class _AgentRun:
    """A fresh run of the agent per case, on a memory of the case's own."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def __call__(self, ctx: EvalContext) -> Any:
        memory = InMemoryMemory()
        run = self.agent.stream(_messages(ctx.inputs), memory=memory, structured=ctx.output_schema)
        calls: dict[str, int] = {}
        try:
            async with run:
                async for event in run:
                    if isinstance(event, ToolCallEnded):
                        calls[event.call.id] = len(ctx.tool_calls)
                        arguments = event.call.raw_input if not event.call.input else None
                        ctx.tool_calls.append(
                            ToolCallRecord(
                                name=event.call.name,
                                arguments=arguments or dict(event.call.input),
                            )
                        )
                    elif isinstance(event, ToolResult):
                        self._result(ctx, calls, event)
        finally:
            ctx.add_usage(run.usage)
            ctx.messages = await memory.get()
        if run.error is not None:
            raise run.error
        if ctx.output_schema is not None:
            return run.parsed
        return run.final.text if run.final is not None else None

    def _result(self, ctx: EvalContext, calls: dict[str, int], event: ToolResult) -> None:
        block = event.result
        index = calls.get(block.tool_call_id)
        if index is None:  # a call the events did not announce (a resumed one): keep it too
            calls[block.tool_call_id] = index = len(ctx.tool_calls)
            ctx.tool_calls.append(ToolCallRecord(name=block.name, arguments={}))
        record = ctx.tool_calls[index]
        record.result = block.text
        record.is_error = block.is_error
        tool = self.agent.toolkit.get(block.name)
        if tool is not None and tool.tool_type == "datastore" and not block.is_error:
            ctx.retrieved.extend(passages(block.text))


class _ModelRun:
    """One call of the model per case (structured when a schema is asked for)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def __call__(self, ctx: EvalContext) -> Any:
        messages = _messages(ctx.inputs)
        if ctx.output_schema is not None:
            structured = await self.model.generate_structured_output(messages, ctx.output_schema)
            ctx.add_usage(structured.usage)
            ctx.messages = [*messages, structured.response.to_msg()]
            return structured.content
        response = await self.model.chat(messages)
        ctx.add_usage(response.usage)
        ctx.messages = [*messages, response.to_msg()]
        for call in response.tool_calls:
            ctx.record_tool_call(call.name, call.raw_input or dict(call.input))
        return response.text


class _FunctionRun:
    """A function of the inputs (and the context, when it takes two parameters)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.takes_context = _takes_context(function)

    async def __call__(self, ctx: EvalContext) -> Any:
        args = (ctx.inputs, ctx) if self.takes_context else (ctx.inputs,)
        if _is_async(self.function):
            result = await self.function(*args)
        else:
            result = await asyncio.to_thread(self.function, *args)
            if inspect.isawaitable(result):  # a sync wrapper that returns a coroutine
                result = await result
        return _function_output(ctx, result)


def _is_async(function: Callable[..., Any]) -> bool:
    call = getattr(function, "__call__", None)  # noqa: B004 (a callable object's method)
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _takes_context(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: inputs only
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _function_output(ctx: EvalContext, result: Any) -> Any:
    if isinstance(result, Msg):
        ctx.add_usage(result.usage)
        return result.text
    if isinstance(result, ChatResponse):
        ctx.add_usage(result.usage)
        return result.text
    if isinstance(result, StructuredResponse):
        ctx.add_usage(result.usage)
        return result.content
    return result
