"""What an evaluation gives back: each case's outcome, a summary, and two runs compared.

These are plain pydantic models, so a report round-trips through JSON (`report.to_json(path)`,
`EvalReport.load(path)`) and two runs made days apart can be compared (`report.compare(old)`).
Rendering them is `parley.evals.render`'s (the terminal table) and `parley.evals.html`'s (a
self-contained page); `report.check()` and `report.assert_passes()` hold a run to a bar.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, Field, ValidationError

from parley.errors import ConfigurationError
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

    Attributes:
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

    Attributes:
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
    judge_cost: float | None = None
    """What the `Judge` evaluators' model calls cost, apart from the target's (None: no judge
    call, or an unpriced one)."""
    judge_tokens: int = 0
    """Tokens in and out of the `Judge` evaluators' model calls."""


class EvalReport(BaseModel):
    """One dataset run over one target.

    Attributes:
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

    def __repr__(self) -> str:
        # Short: `asyncio.run` on Python 3.11 reprs its task's result (this report) when it
        # restores the SIGINT handler, 0.3 s for 10,000 cases with pydantic's full repr.
        return (
            f"EvalReport(dataset={self.dataset!r}, target={self.target!r}, "
            f"cases={len(self.cases)}, passed={sum(1 for c in self.cases if c.passed)})"
        )

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
        judged = [c.judge_usage for c in cases if c.judge_usage is not None]
        judge_costs = [u.cost for u in judged]
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
            judge_cost=(
                None if not judged or None in judge_costs else sum(c or 0.0 for c in judge_costs)
            ),
            judge_tokens=sum(u.input_tokens + u.output_tokens for u in judged),
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

    def render(self, *, color: bool = False) -> str:
        """The terminal table: a row per case, the failures' reasons, a summary line."""
        from parley.evals.render import render_table  # noqa: PLC0415  (render imports this)

        return render_table(self, color=color)

    def print(self, file: IO[str] | None = None, *, color: bool | None = None) -> None:
        """Print the table (`render`) on `file` (stdout); coloured on a terminal (not NO_COLOR)."""
        from parley.evals.render import print_report  # noqa: PLC0415

        print_report(self, file, color=color)

    def to_json(self, path: str | Path | None = None) -> str:
        """The report as JSON (indented); written to `path` too when given. `load` reads it."""
        text = self.model_dump_json(indent=2)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        """A report `to_json` wrote.

        Raises:
            ConfigurationError: No file there, or it is not a report's JSON.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read the report {str(path)!r}: {exc.strerror}"
            ) from exc
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the top"
            raise ConfigurationError(
                f"{str(path)!r} is not an evaluation report's JSON (at {where}: {first['msg']}); "
                "write one with `report.to_json(path)` or `parley eval ... --json PATH`"
            ) from exc

    def to_html(self, path: str | Path | None = None, *, baseline: EvalReport | None = None) -> str:
        """A self-contained HTML page of the run (per-case details; against `baseline` if given).

        The page loads nothing from elsewhere and runs only its own script (its
        Content-Security-Policy says so), so it opens from a file or an attachment as it is.
        Written to `path` too when given.
        """
        from parley.evals.html import render_html  # noqa: PLC0415  (html imports this)

        page = render_html(self, baseline=baseline)
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page

    def check(
        self, *, min_score: float | None = None, min_pass_rate: float | None = None
    ) -> str | None:
        """Whether the run meets a bar: None when it does, else one line saying how it fell short.

        Args:
            min_score: The lowest mean score (0 to 1) that passes.
            min_pass_rate: The lowest share of cases passed (0 to 1) that passes. With neither
                bar given, every case must pass (`min_pass_rate=1.0`), as in a test suite.
        """
        if min_score is None and min_pass_rate is None:
            min_pass_rate = 1.0
        summary = self.summary()
        shortfalls = []
        if min_score is not None and summary.score < min_score - 1e-9:
            shortfalls.append(f"score {summary.score:.3f} is below {min_score:g}")
        if min_pass_rate is not None and summary.pass_rate < min_pass_rate - 1e-9:
            shortfalls.append(
                f"{summary.passed} of {summary.cases} cases passed "
                f"({summary.pass_rate:.0%}, below {min_pass_rate:.0%})"
            )
        if not shortfalls:
            return None
        return f"{self.dataset}: " + "; ".join(shortfalls)

    def assert_passes(
        self, *, min_score: float | None = None, min_pass_rate: float | None = None
    ) -> None:
        """Raise AssertionError, its message the failures table, unless the run meets the bar.

        The bar is `check`'s (every case must pass when neither is given); for tests.
        """
        __tracebackhide__ = True  # pytest shows the caller's line, not this one
        shortfall = self.check(min_score=min_score, min_pass_rate=min_pass_rate)
        if shortfall is not None:
            from parley.evals.render import render_failures  # noqa: PLC0415

            raise AssertionError(f"{shortfall}\n\n{render_failures(self)}")


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
            comparison._classify(change)
        return comparison

    def _classify(self, change: CaseChange) -> None:
        # The verdict decides first: a case that now fails regressed even if its mean score
        # rose (one evaluator gained, another that must hold broke), and a flip counts when
        # the score does not move. Only with the same verdict does the score say which way.
        if change.passed_after != change.passed_before:
            better = change.passed_after
        elif abs(change.delta) > 1e-9:
            better = change.delta > 0
        else:
            self.unchanged.append(change.name)
            return
        (self.improved if better else self.regressed).append(change)

    def summaries(self) -> tuple[ReportSummary, ReportSummary]:
        """The baseline's figures and this run's."""
        return self.before.summary(), self.after.summary()

    def render(self, *, color: bool = False) -> str:
        """The comparison as a terminal table: the figures' deltas, then each changed case."""
        from parley.evals.render import render_comparison  # noqa: PLC0415

        return render_comparison(self, color=color)

    def print(self, file: IO[str] | None = None, *, color: bool | None = None) -> None:
        """Print `render`'s table on `file` (stdout); coloured on a terminal (not NO_COLOR)."""
        from parley.evals.render import print_comparison  # noqa: PLC0415

        print_comparison(self, file, color=color)

    def to_html(self, path: str | Path | None = None) -> str:
        """The later run's HTML page, with this comparison in it (`EvalReport.to_html`)."""
        return self.after.to_html(path, baseline=self.before)
