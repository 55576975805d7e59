"""What an evaluation gives back: each case's outcome, a summary, and two runs compared.

These are plain pydantic models, so a report round-trips through JSON (`EvalReport.model_
validate_json(report.model_dump_json())`) and two runs made days apart can be compared.
Rendering them (a terminal table, JSON, a self-contained HTML page) is `parley.evals.render`'s.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from parley.messages import Usage

__all__ = [
    "CaseChange",
    "CaseResult",
    "Comparison",
    "EvalReport",
    "EvaluatorResult",
    "ReportSummary",
    "ToolCallRecord",
]


class EvaluatorResult(BaseModel):
    """One evaluator's verdict on one case.

    Args:
        name: The evaluator's name (as the report's columns show it).
        passed: Whether the case passed this evaluator.
        score: 0 to 1 (1 for a pass and 0 for a fail when the evaluator has no finer score).
        reason: Why, in one line: what was expected and what came (always set on a failure).
    """

    name: str
    passed: bool
    score: float = Field(ge=0.0, le=1.0)
    reason: str | None = None


class ToolCallRecord(BaseModel):
    """A tool call the target made while answering a case, with its result."""

    name: str
    arguments: dict[str, Any] | str
    result: str | None = None
    is_error: bool = False


class CaseResult(BaseModel):
    """One case's run and its verdicts.

    Args:
        name: The case's name.
        inputs: What the target was given (as JSON).
        expected: The case's expected output, if any.
        output: What the target answered: text, or a structured value (None when it failed).
        metadata: The case's metadata.
        results: One verdict per evaluator.
        tool_calls: The tool calls made, in order.
        retrieved: Passages retrieval tools returned (their ids or texts).
        usage: Tokens and cost of the case's model calls (None when unknown).
        judge_usage: Tokens and cost of the `Judge` evaluators' model calls, kept apart.
        duration: Seconds the target took (the last attempt).
        attempts: Tries it took (more than 1 after provider errors).
        error: The error that ended the case, when the target raised (the case fails).
        trace_id: The OpenTelemetry trace id of the case's span, when tracing is on.
    """

    name: str
    inputs: Any = None
    expected: Any = None
    output: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    results: list[EvaluatorResult] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    retrieved: list[str] = Field(default_factory=list)
    usage: Usage | None = None
    judge_usage: Usage | None = None
    duration: float = 0.0
    attempts: int = 1
    error: str | None = None
    trace_id: str | None = None

    @property
    def passed(self) -> bool:
        """No error, and every evaluator passed."""
        return self.error is None and all(r.passed for r in self.results)

    @property
    def score(self) -> float:
        """The mean of the evaluators' scores (0 after an error; 1 with no evaluator)."""
        if self.error is not None:
            return 0.0
        if not self.results:
            return 1.0
        return statistics.fmean(r.score for r in self.results)

    @property
    def cost(self) -> float | None:
        """What the case's model calls cost (None when unpriced)."""
        return self.usage.cost if self.usage else None


class ReportSummary(BaseModel):
    """A run's figures: how many cases passed, the mean score, cost and time."""

    cases: int
    passed: int
    errors: int
    score: float
    pass_rate: float
    cost: float | None
    input_tokens: int
    output_tokens: int
    duration: float
    """Seconds the whole run took (cases run concurrently)."""
    latency_p50: float
    latency_max: float
    by_evaluator: dict[str, float]
    """Each evaluator's pass rate over the cases it judged."""


class EvalReport(BaseModel):
    """One dataset run over one target.

    Args:
        dataset: The dataset's name.
        target: What was evaluated, in one line (an agent's name and model, a model, a function).
        cases: Each case's result, in the dataset's order.
        started_at: When the run began (UTC).
        duration: Seconds the whole run took.
        settings: What else identifies the run (concurrency, model parameters, a label).
    """

    dataset: str
    target: str
    cases: list[CaseResult] = Field(default_factory=list)
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    duration: float = 0.0
    settings: dict[str, Any] = Field(default_factory=dict)

    def summary(self) -> ReportSummary:
        """The run's figures."""
        cases = self.cases
        usages = [c.usage for c in cases if c.usage is not None]
        costs = [u.cost for u in usages]
        durations = [c.duration for c in cases] or [0.0]
        by_evaluator: dict[str, list[bool]] = {}
        for case in cases:
            for result in case.results:
                by_evaluator.setdefault(result.name, []).append(result.passed)
        passed = sum(1 for c in cases if c.passed)
        return ReportSummary(
            cases=len(cases),
            passed=passed,
            errors=sum(1 for c in cases if c.error is not None),
            score=statistics.fmean(c.score for c in cases) if cases else 0.0,
            pass_rate=passed / len(cases) if cases else 0.0,
            # Unpriced calls make the total unknown rather than understated.
            cost=None if not usages or None in costs else sum(c or 0.0 for c in costs),
            input_tokens=sum(u.input_tokens for u in usages),
            output_tokens=sum(u.output_tokens for u in usages),
            duration=self.duration,
            latency_p50=statistics.median(durations),
            latency_max=max(durations),
            by_evaluator={k: sum(v) / len(v) for k, v in by_evaluator.items()},
        )

    def case(self, name: str) -> CaseResult:
        """The result of the case called `name`.

        Raises:
            KeyError: No case has that name.
        """
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(f"no case {name!r} in this report of {self.dataset!r}")

    def compare(self, baseline: EvalReport) -> Comparison:
        """This run against `baseline`: which cases improved, regressed, appeared or went."""
        return Comparison.of(baseline, self)


class CaseChange(BaseModel):
    """A case whose score or verdict differs between two runs."""

    name: str
    before: float
    after: float
    passed_before: bool
    passed_after: bool

    @property
    def delta(self) -> float:
        """The score's change (after minus before)."""
        return self.after - self.before


class Comparison(BaseModel):
    """Two runs of a dataset side by side: `after` against the `before` baseline."""

    before: EvalReport
    after: EvalReport
    improved: list[CaseChange] = Field(default_factory=list)
    regressed: list[CaseChange] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, before: EvalReport, after: EvalReport) -> Comparison:
        """Compare case by case, matched by name."""
        old = {c.name: c for c in before.cases}
        new = {c.name: c for c in after.cases}
        comparison = cls(
            before=before,
            after=after,
            added=[n for n in new if n not in old],
            removed=[n for n in old if n not in new],
        )
        for name, case in new.items():
            if name not in old:
                continue
            prior = old[name]
            change = CaseChange(
                name=name,
                before=prior.score,
                after=case.score,
                passed_before=prior.passed,
                passed_after=case.passed,
            )
            # A verdict that flips counts even when the mean score does not move.
            if change.delta > 1e-9 or (case.passed and not prior.passed):
                comparison.improved.append(change)
            elif change.delta < -1e-9 or (prior.passed and not case.passed):
                comparison.regressed.append(change)
            else:
                comparison.unchanged.append(name)
        return comparison
