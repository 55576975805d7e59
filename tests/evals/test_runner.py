"""The runner over an agent with a real tool, a chat model and functions: what each case
records, the concurrency bound, retries on provider errors only, errors kept per case."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.trace import StatusCode
from pydantic import BaseModel

from parley.agents import Agent
from parley.errors import ModelHTTPError, UserError
from parley.evals import (
    CalledTool,
    Case,
    Contains,
    Dataset,
    EvalContext,
    Evaluator,
    EvaluatorResult,
    Regex,
)
from parley.messages import Msg, Usage
from parley.models.retry import RetryPolicy
from parley.models.testing import ScriptedModel
from parley.providers.openai import OpenAIChatModel
from parley.providers.openai.server import HTTPError, OpenAIServer, Reply
from parley.tools import tool
from tests._requires import require_module
from tests.evals import _fixtures
from tests.tracing.fixtures import Spans, attrs, parent_of, span_id

multiply = tool(_fixtures.multiply)


FAST = RetryPolicy(initial_delay=0.01, max_delay=0.02)


class Answer(BaseModel):
    value: int


def arith() -> Dataset:
    return Dataset(
        "arith",
        [
            Case("12x7", "What is 12*7?", expected="84", evaluators=[CalledTool("multiply")]),
            Case("3x3", "What is 3*3?", expected="9", metadata={"level": "easy"}),
        ],
    )


async def test_an_agent_runs_each_case_fresh_with_its_tool_calls_and_usage() -> None:
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("multiply", {"a": 12, "b": 7}),
            "12 times 7 is 84.",
            "It is 10.",  # wrong, and no tool: the second case fails both ways
        ]
    )
    agent = Agent("calc", model, tools=[multiply])

    report = await arith().evaluate(agent, concurrency=1)

    assert report.dataset == "arith"
    assert report.target == "agent calc (scripted:scripted)"
    first, second = report.cases
    assert first.passed
    assert first.output == "12 times 7 is 84."
    assert [(c.name, c.arguments, c.result) for c in first.tool_calls] == [
        ("multiply", {"a": 12, "b": 7}, "84")
    ]
    assert [r.name for r in first.results] == ["contains", "called_tool(multiply)"]
    assert first.usage is not None
    assert first.usage.input_tokens > 0
    assert first.attempts == 1
    assert first.error is None
    assert first.duration > 0
    assert not second.passed
    assert second.tool_calls == []
    assert second.results[0].reason == "expected '9'; missing ['9'] in 'It is 10.'"
    assert second.metadata == {"level": "easy"}
    # Each case ran on a memory of its own: the second call saw only its own question.
    assert [m.text for m in model.requests[2].messages] == ["What is 3*3?"]
    assert await agent.memory.get() == []
    model.assert_consumed()


async def test_an_agent_asked_for_a_schema_answers_structured() -> None:
    model = ScriptedModel(
        ["thinking about it", ScriptedModel.tool_call("generate_response", {"value": 84})]
    )
    ds = Dataset("s", [Case("x", "12*7?", expected={"value": 84})], output_schema=Answer)

    report = await ds.evaluate(Agent("calc", model))

    [case] = report.cases
    assert case.output == {"value": 84}
    assert case.passed
    assert [r.name for r in case.results] == ["equals"]


async def test_a_chat_model_is_called_once_per_case() -> None:
    model = ScriptedModel(["The answer is 84.", "I do not know."])

    report = await arith().evaluate(model, concurrency=1, name="baseline")

    assert report.target == "baseline"
    assert [c.output for c in report.cases] == ["The answer is 84.", "I do not know."]
    # No tool was called by a bare model: the case's CalledTool fails and says so.
    called = report.cases[0].results[1]
    assert not called.passed
    assert called.reason == "expected a call of multiply; made: none"
    usage = report.cases[1].usage
    assert usage is not None  # the scripted model counts words: 3 in, 4 out and 1
    assert (usage.input_tokens, usage.output_tokens) == (3, 5)


async def test_a_chat_model_with_a_schema_uses_structured_output() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("generate_response", {"value": 84})])
    ds = Dataset("s", [Case("x", "12*7?", expected={"value": 84}, output_schema=Answer)])

    report = await ds.evaluate(model)

    assert report.cases[0].output == {"value": 84}
    assert report.cases[0].passed


async def test_functions_sync_or_async_with_or_without_the_context() -> None:
    async def answer(inputs: str) -> str:
        return f"echo: {inputs}"

    def with_context(inputs: dict[str, int], ctx: EvalContext) -> int:
        ctx.record_tool_call("lookup", {"key": "n"}, "5")
        ctx.retrieved.append("doc-7\nThe number is five.")
        ctx.add_usage(Usage(input_tokens=3, output_tokens=1, cost=0.5))
        return inputs["n"] * 2

    echo = Dataset("e", [Case("a", "hi", expected="echo: hi")])
    numbers = Dataset("n", [Case("five", {"n": 5}, expected=10)])

    first = await echo.evaluate(answer)
    second = numbers.evaluate_sync(with_context)

    assert first.target.endswith("<locals>.answer")
    assert first.cases[0].passed
    assert first.cases[0].output == "echo: hi"
    [case] = second.cases
    assert case.passed
    assert case.output == 10
    assert case.tool_calls[0].name == "lookup"
    assert case.retrieved == ["doc-7\nThe number is five."]
    assert case.usage is not None
    assert case.usage.cost == 0.5


async def test_a_function_returning_a_message_counts_its_usage() -> None:
    async def reply(inputs: str) -> Msg:
        return Msg.assistant("fine", usage=Usage(input_tokens=2, output_tokens=1))

    report = await Dataset("m", [Case("a", "hi", expected="fine")]).evaluate(reply)
    assert report.cases[0].output == "fine"
    assert report.cases[0].usage is not None
    assert report.cases[0].usage.total_tokens == 3


async def test_concurrency_bounds_the_cases_in_flight() -> None:
    in_flight = 0
    most = 0
    gate = asyncio.Event()
    started = 0

    async def slow(inputs: int) -> int:
        nonlocal in_flight, most, started
        in_flight += 1
        started += 1
        most = max(most, in_flight)
        if started >= 3:
            gate.set()
        await gate.wait()  # the first three wait for each other: 3 at once if allowed
        await asyncio.sleep(0)
        in_flight -= 1
        return inputs

    ds = Dataset("c", [Case(f"c{i}", i, expected=i) for i in range(10)])
    report = await ds.evaluate(slow, concurrency=3)

    assert most == 3
    assert [c.output for c in report.cases] == list(range(10))  # the dataset's order
    assert report.settings == {"concurrency": 3, "retries": 2}


async def test_a_target_that_raises_gives_its_case_an_error_and_the_run_goes_on() -> None:
    async def flaky(inputs: str) -> str:
        if inputs == "bad":
            raise ValueError("cannot answer that")
        return inputs

    ds = Dataset("e", [Case("ok", "fine", expected="fine"), Case("bad", "bad", expected="x")])
    report = await ds.evaluate(flaky, retries=3)

    ok, bad = report.cases
    assert ok.passed
    assert ok.error is None
    assert not bad.passed
    assert bad.error == "ValueError: cannot answer that"
    assert bad.attempts == 1  # a user's error is never tried again
    assert bad.results == []
    assert bad.score == 0.0
    assert report.summary().errors == 1


async def test_a_case_slower_than_the_timeout_ends_with_its_error_and_is_not_tried_again() -> None:
    started: list[str] = []
    release = asyncio.Event()  # never set: the slow case would wait forever without a timeout

    async def target(inputs: str) -> str:
        started.append(inputs)
        if inputs == "slow":
            await release.wait()
        return inputs

    ds = Dataset(
        "t", [Case("slow", "slow", expected="slow"), Case("fast", "fast", expected="fast")]
    )
    report = await ds.evaluate(target, retries=2, timeout=0.2)

    slow, fast = report.cases
    assert slow.error == "CaseTimeoutError: took longer than 0.2 s"
    assert slow.attempts == 1  # a slow model would be as slow again
    assert started.count("slow") == 1
    assert fast.passed
    assert report.settings["timeout"] == 0.2
    with pytest.raises(UserError, match="timeout must be above 0 seconds, got 0"):
        await ds.evaluate(target, timeout=0)


async def test_a_provider_error_is_retried_with_the_attempts_recorded() -> None:
    model = ScriptedModel([ModelHTTPError(503, "busy"), ModelHTTPError(500, "oops"), "84"])
    ds = Dataset("r", [Case("a", "12*7?", expected="84")])

    report = await ds.evaluate(model, retries=2, retry_policy=FAST)

    [case] = report.cases
    assert case.passed
    assert case.attempts == 3
    model.assert_consumed()


async def test_an_evaluator_that_raises_is_a_failed_verdict_with_its_reason() -> None:
    class Broken(Evaluator):
        async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
            raise RuntimeError("the check broke")

    ds = Dataset("b", [Case("a", "q", expected="q")], evaluators=[Broken(), Contains()])
    report = await ds.evaluate(lambda inputs: inputs)

    broken, contains = report.cases[0].results
    assert not broken.passed
    assert broken.reason == "evaluator raised RuntimeError: the check broke"
    assert contains.passed


async def test_bad_settings_and_targets_are_refused() -> None:
    ds = Dataset("d", [Case("a", "q")])
    with pytest.raises(UserError, match="concurrency must be at least 1"):
        await ds.evaluate(lambda x: x, concurrency=0)
    with pytest.raises(UserError, match="cannot evaluate int"):
        await ds.evaluate(42)  # type: ignore[arg-type]


async def test_cancelling_the_run_cancels_the_cases_in_flight() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []

    async def forever(inputs: str) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(inputs)
            raise
        return inputs

    ds = Dataset("f", [Case(n, n) for n in ("a", "b", "c")])
    task = asyncio.create_task(ds.evaluate(forever, concurrency=2))
    await started.wait()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["a", "b"]  # the two in flight; the third never started


def test_inputs_as_messages_reach_a_model_as_they_are() -> None:
    model = ScriptedModel(["ok"])
    ds = Dataset(
        "m", [Case("a", [Msg.system("Be brief."), Msg.user("hi")], evaluators=[Regex("ok")])]
    )
    report = ds.evaluate_sync(model)
    assert report.cases[0].passed
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]


# -- retries against the project's OpenAI wire server -------------------------------------------


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture
async def openai_model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    """A model of the server's that does not retry itself: the runner's retries show."""
    model = OpenAIChatModel(server.credential(), "gpt-4o-mini", max_retries=0)
    yield model
    await model.aclose()


async def test_a_500_and_a_429_from_the_provider_are_retried(
    server: OpenAIServer, openai_model: OpenAIChatModel
) -> None:
    server.add(HTTPError(500), HTTPError.rate_limit(retry_after=0.01), Reply(text="It is 84."))
    ds = Dataset("r", [Case("a", "What is 12*7?", expected="84")])

    report = await ds.evaluate(openai_model, retries=2, retry_policy=FAST)

    [case] = report.cases
    assert case.passed
    assert case.attempts == 3
    assert case.error is None
    assert len(server.requests) == 3
    server.assert_consumed()


async def test_retries_run_out_and_the_last_error_is_the_cases(
    server: OpenAIServer, openai_model: OpenAIChatModel
) -> None:
    server.add(HTTPError(503), HTTPError(503))
    ds = Dataset("r", [Case("a", "q", expected="x")])

    report = await ds.evaluate(openai_model, retries=1, retry_policy=FAST)

    [case] = report.cases
    assert case.attempts == 2
    assert case.error is not None
    assert case.error.startswith("ModelHTTPError")
    assert not case.passed


async def test_a_bad_request_is_not_retried(
    server: OpenAIServer, openai_model: OpenAIChatModel
) -> None:
    server.add(HTTPError(400, "invalid model parameters"))
    ds = Dataset("r", [Case("a", "q", expected="x")])

    report = await ds.evaluate(openai_model, retries=3, retry_policy=FAST)

    [case] = report.cases
    assert case.attempts == 1
    assert case.error is not None
    assert "invalid model parameters" in case.error
    assert len(server.requests) == 1


# -- tracing --------------------------------------------------------------------------------------


async def test_each_case_runs_in_a_span_with_the_agents_spans_beneath(spans: Spans) -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("multiply", {"a": 12, "b": 7}), "84", "no idea"],
        model="scripted-1",
    )
    agent = Agent("calc", model, tools=[multiply])

    report = await arith().evaluate(agent, concurrency=1)

    first, second = spans.named("parley.eval 12x7") + spans.named("parley.eval 3x3")
    assert attrs(first) == {
        "parley.eval.dataset": "arith",
        "parley.eval.case": "12x7",
        "parley.eval.passed": True,
        "parley.eval.score": 1.0,
        "parley.eval.attempts": 1,
    }
    assert attrs(second)["parley.eval.passed"] is False
    [run_one, run_two] = spans.named("invoke_agent calc")
    assert parent_of(run_one) == span_id(first)
    assert parent_of(run_two) == span_id(second)
    assert first.parent is None  # each case is a trace of its own
    assert first.context is not None
    assert report.cases[0].trace_id == format(first.context.trace_id, "032x")
    assert report.cases[0].trace_id != report.cases[1].trace_id


async def test_a_failed_case_fails_its_span(spans: Spans) -> None:
    async def broken(inputs: str) -> str:
        raise ValueError("no")

    await Dataset("e", [Case("a", "q")]).evaluate(broken)

    span = spans.one("parley.eval a")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "ValueError"


async def test_without_tracing_there_is_no_trace_id(clean_tracing: None) -> None:
    report = await Dataset("e", [Case("a", "q")]).evaluate(lambda inputs: inputs)
    assert report.cases[0].trace_id is None


# -- the real embedded model ----------------------------------------------------------------------


def test_end_to_end_on_the_embedded_local_model() -> None:
    require_module("llama_cpp", "local")
    from parley.providers.local import LocalChatModel  # noqa: PLC0415

    model = LocalChatModel(parameters={"seed": 7, "max_tokens": 24, "temperature": 0})
    ds = Dataset(
        "easy",
        [
            Case("capital", "What is the capital of France? Answer in one word.", expected="Paris"),
            Case("greet", "Say hello.", evaluators=[Regex("(?i)hello|hi")]),
        ],
    )

    report = ds.evaluate_sync(model, concurrency=2)

    assert report.target.startswith("local:")
    assert [c.name for c in report.cases] == ["capital", "greet"]
    for case in report.cases:
        assert case.error is None
        assert isinstance(case.output, str)
        assert case.output.strip()
        assert case.usage is not None
        assert case.usage.output_tokens > 0
        assert case.duration > 0
    # The default evaluator for a text `expected`, and the case's own.
    assert [r.name for r in report.case("capital").results] == ["contains"]
    assert [r.name for r in report.case("greet").results] == ["regex"]
    summary = report.summary()
    assert summary.cases == 2
    assert 0.0 <= summary.score <= 1.0


def test_ctrl_c_in_evaluate_sync_cancels_the_cases_in_flight() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def forever(inputs: str) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return inputs

    def interrupt() -> None:
        if started.wait(timeout=30):
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl+C sends

    ds = Dataset("f", [Case("a", "a")])
    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        ds.evaluate_sync(forever)
    assert cancelled.wait(timeout=30)


async def test_an_agent_whose_model_fails_with_a_provider_error_is_tried_again() -> None:
    model = ScriptedModel([ModelHTTPError(502, "bad gateway"), "84"])
    ds = Dataset("r", [Case("a", "12*7?", expected="84")])

    report = await ds.evaluate(Agent("calc", model), retry_policy=FAST)

    [case] = report.cases
    assert case.passed
    assert case.attempts == 2
    model.assert_consumed()
