"""Reports built by hand, as the runner would make them, for the report tests."""

from __future__ import annotations

from datetime import UTC, datetime

from parley.evals.report import CaseResult, EvalReport, EvaluatorResult, ToolCallRecord
from parley.messages import Usage

HOSTILE = '</script><script>window.pwned=1;alert(1)</script><img src=x onerror="window.pwned=2">'
"""An output that would run a script on a page that did not escape it."""


def passing(name: str, *, score: float = 1.0, cost: float | None = 0.0001) -> CaseResult:
    """A case both evaluators passed."""
    return CaseResult(
        name=name,
        inputs=f"question {name}",
        expected="84",
        output="It is 84.",
        results=[
            EvaluatorResult(name="contains", passed=True, score=1.0),
            EvaluatorResult(name="judge", passed=True, score=score),
        ],
        usage=Usage(input_tokens=100, output_tokens=20, cost=cost),
        duration=0.5,
    )


def failing(
    name: str, *, reason: str = "expected '84' in the output, got 'It is 85.'"
) -> CaseResult:
    """A case the `contains` evaluator failed."""
    return CaseResult(
        name=name,
        inputs=f"question {name}",
        expected="84",
        output="It is 85.",
        results=[
            EvaluatorResult(name="contains", passed=False, score=0.0, reason=reason),
            EvaluatorResult(name="judge", passed=True, score=0.5),
        ],
        usage=Usage(input_tokens=100, output_tokens=20, cost=0.0001),
        duration=1.5,
    )


def errored(name: str) -> CaseResult:
    """A case whose target raised."""
    return CaseResult(
        name=name,
        inputs=f"question {name}",
        error="ProviderError: 503 Service Unavailable",
        attempts=3,
        duration=0.25,
    )


def detailed() -> CaseResult:
    """A case with everything the HTML page shows: tool calls, passages, a trace id."""
    return CaseResult(
        name="tool use",
        inputs="What is 12*7? Use Python.",
        expected="84",
        output="12*7 is 84.",
        metadata={"topic": "arithmetic"},
        results=[EvaluatorResult(name="called_tool", passed=True, score=1.0)],
        tool_calls=[
            ToolCallRecord(name="code_interpreter", arguments={"code": "print(12*7)"}, result="84")
        ],
        retrieved=["doc-7: multiplication tables"],
        usage=Usage(input_tokens=300, output_tokens=40, cost=0.0003),
        judge_usage=Usage(input_tokens=50, output_tokens=5, cost=0.00002),
        duration=2.0,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
    )


def report(*cases: CaseResult, target: str = "agent 'maths' (scripted)") -> EvalReport:
    """A report of `cases` over the dataset `arith`, at a fixed time."""
    return EvalReport(
        dataset="arith",
        target=target,
        cases=list(cases),
        started_at=datetime(2026, 12, 2, 6, 20, tzinfo=UTC),
        duration=2.5,
        settings={"concurrency": 4},
    )
