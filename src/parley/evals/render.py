"""An evaluation's report, and two runs compared, as plain-text tables for a terminal.

    dataset arith · target agent 'maths' (openai:gpt-4o-mini) · 2026-12-02 06:20 UTC
    case     result  score  contains  regex  cost    time
    12x7     pass     1.00  ✓         ✓      0.0001  0.41 s
    capital  FAIL     0.50  ✓         ✗      0.0001  0.20 s

    Failures
      capital  regex: expected a match of '^Paris$', got 'paris is the capital'

    2 cases · 1 passed (50%) · score 0.75 · cost 0.0002 · 0.61 s (p50 0.31 s, max 0.41 s)

Columns are as wide as their widest cell (long names are cut with "…"); colour only on a
terminal, and never with NO_COLOR set (https://no-color.org). Every text that came from the
dataset or the model (a case's name, a reason, an error) goes through `parley._terminal.visible`
first: its control characters are shown as escapes, never obeyed by the terminal.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from parley._terminal import visible

if TYPE_CHECKING:
    from parley.evals.report import CaseChange, CaseResult, Comparison, EvalReport, ReportSummary

__all__ = [
    "NAME_WIDTH",
    "REASON_WIDTH",
    "UNKNOWN",
    "evaluator_names",
    "failure_reasons",
    "figure_rows",
    "format_cost",
    "format_seconds",
    "print_comparison",
    "print_report",
    "render_comparison",
    "render_failures",
    "render_table",
    "summary_line",
    "use_color",
]

NAME_WIDTH = 40
"""The widest a case's or an evaluator's name is shown in a table (cut with "…" beyond)."""

REASON_WIDTH = 400
"""The longest a failure's reason is shown (the HTML page and the JSON keep it whole)."""

UNKNOWN = "\u2013"
"""What a table shows for a figure not known (an unpriced cost): an en dash."""

_STYLES = {"pass": "32", "fail": "31;1", "error": "35;1", "dim": "2", "bold": "1"}


@dataclass(frozen=True)
class _Cell:
    """A table cell: its text, how it is aligned, and its colour (a key of `_STYLES`)."""

    text: str
    style: str | None = None
    right: bool = False


def use_color(file: IO[str]) -> bool:
    """Whether to colour what goes to `file`: a terminal, and NO_COLOR unset or empty."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(file, "isatty", None)
    return bool(isatty and isatty())


def print_report(
    report: EvalReport, file: IO[str] | None = None, *, color: bool | None = None
) -> None:
    """Print `render_table(report)` on `file` (stdout), coloured as `use_color` says."""
    out = file if file is not None else sys.stdout
    text = render_table(report, color=use_color(out) if color is None else color)
    print(_encodable(text, out), file=out)


def print_comparison(
    comparison: Comparison, file: IO[str] | None = None, *, color: bool | None = None
) -> None:
    """Print `render_comparison(comparison)` on `file` (stdout)."""
    out = file if file is not None else sys.stdout
    text = render_comparison(comparison, color=use_color(out) if color is None else color)
    print(_encodable(text, out), file=out)


def _encodable(text: str, out: IO[str]) -> str:
    # A console whose encoding lacks ✓ and ✗ (cp1252) gets the table rather than an error.
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return text.encode(encoding, "replace").decode(encoding, "replace")
    return text


# --- one run ------------------------------------------------------------------------------------


def render_table(report: EvalReport, *, color: bool = False) -> str:
    """The report as text: a heading, a row per case, the failures' reasons, the summary line."""
    parts = [_heading(report, color), _cases_table(report, color)]
    failures = _failure_lines(report, color)
    if failures:
        parts.append(_paint("Failures", "bold", color) + "\n" + "\n".join(failures))
    parts.append(summary_line(report.summary(), color=color))
    return "\n\n".join(parts)


def render_failures(report: EvalReport) -> str:
    """The failed cases only, as a table with their reasons below (an assertion's message)."""
    failed = report.model_copy(update={"cases": [c for c in report.cases if not c.passed]})
    parts = [_cases_table(failed, False)] if failed.cases else []
    failures = _failure_lines(failed, False)
    if failures:
        parts.append("\n".join(failures))
    parts.append(summary_line(report.summary()))
    return "\n\n".join(parts)


def _heading(report: EvalReport, color: bool) -> str:
    when = report.started_at.strftime("%Y-%m-%d %H:%M UTC")
    text = f"dataset {_one_line(report.dataset)} · target {_one_line(report.target)} · {when}"
    return _paint(text, "bold", color)


def evaluator_names(cases: Sequence[CaseResult]) -> list[str]:
    """The evaluators' names in the order they first judged a case (the table's columns)."""
    names: dict[str, None] = {}
    for case in cases:
        for result in case.results:
            names.setdefault(result.name, None)
    return list(names)


def _cases_table(report: EvalReport, color: bool) -> str:
    names = evaluator_names(report.cases)
    header = ["case", "result", "score", *(_cut(visible(n), NAME_WIDTH) for n in names)]
    header += ["cost", "time"]
    rows = [_case_row(case, names) for case in report.cases]
    return _table(header, rows, color, right={2, len(header) - 2, len(header) - 1})


def _case_row(case: CaseResult, names: Sequence[str]) -> list[_Cell]:
    verdict = _verdict(case)
    row = [
        _Cell(_cut(visible(case.name), NAME_WIDTH)),
        _Cell(verdict, style=verdict.lower() if verdict != "pass" else "pass"),
        _Cell(f"{case.score:.2f}", right=True),
    ]
    row.extend(_evaluator_cell(case, name) for name in names)
    row.append(_Cell(format_cost(case.cost), right=True))
    row.append(_Cell(format_seconds(case.duration), right=True))
    return row


def _verdict(case: CaseResult) -> str:
    if case.error is not None:
        return "ERROR"
    return "pass" if case.passed else "FAIL"


def _evaluator_cell(case: CaseResult, name: str) -> _Cell:
    results = [r for r in case.results if r.name == name]
    if not results:
        return _Cell("·", style="dim")  # the case was not judged by this evaluator
    marks = []
    for result in results:
        mark = "✓" if result.passed else "✗"
        # A finer score than pass or fail is shown beside the mark.
        marks.append(mark if result.score in (0.0, 1.0) else f"{mark} {result.score:.2f}")
    passed = all(r.passed for r in results)
    return _Cell(" ".join(marks), style="pass" if passed else "fail")


def _failure_lines(report: EvalReport, color: bool) -> list[str]:
    failed = [c for c in report.cases if not c.passed]
    width = max((_width(_cut(visible(c.name), NAME_WIDTH)) for c in failed), default=0)
    lines = []
    for case in failed:
        name = _pad(_cut(visible(case.name), NAME_WIDTH), width)
        for label, reason in failure_reasons(case):
            lines.append(f"  {name}  {_paint(label, 'fail', color)}: {reason}")
            name = " " * width  # the case's name once, its reasons aligned under it
    return lines


def failure_reasons(case: CaseResult) -> list[tuple[str, str]]:
    """Why `case` failed: (label, one-line reason) for its error and each failed evaluator."""
    reasons = []
    if case.error is not None:
        reasons.append(("error", _cut(_one_line(case.error), REASON_WIDTH)))
    for result in case.results:
        if not result.passed:
            why = result.reason or f"score {result.score:.2f}, no reason given"
            reasons.append(
                (_cut(visible(result.name), NAME_WIDTH), _cut(_one_line(why), REASON_WIDTH))
            )
    return reasons


def summary_line(summary: ReportSummary, *, color: bool = False) -> str:
    """The run's figures in one line: cases, passed, errors, score, cost, time and tokens."""
    passed = f"{summary.passed} passed ({summary.pass_rate:.0%})"
    parts = [
        f"{summary.cases} case" + ("" if summary.cases == 1 else "s"),
        _paint(passed, "pass" if summary.passed == summary.cases else "fail", color),
    ]
    if summary.errors:
        errors = f"{summary.errors} error" + ("s" if summary.errors > 1 else "")
        parts.append(_paint(errors, "error", color))
    parts.append(f"score {summary.score:.2f}")
    parts.append(f"cost {format_cost(summary.cost)}")
    if summary.judge_tokens:
        parts.append(f"judge {format_cost(summary.judge_cost)}, {summary.judge_tokens:,} tokens")
    parts.append(
        f"{format_seconds(summary.duration)} (p50 {format_seconds(summary.latency_p50)}, "
        f"max {format_seconds(summary.latency_max)})"
    )
    if summary.input_tokens or summary.output_tokens:
        parts.append(f"{summary.input_tokens:,} tokens in, {summary.output_tokens:,} out")
    return " · ".join(parts)


# --- two runs -----------------------------------------------------------------------------------


def render_comparison(comparison: Comparison, *, color: bool = False) -> str:
    """Two runs compared: the figures before and after, then the cases that changed."""
    before, after = comparison.summaries()
    heading = _paint(
        f"dataset {_one_line(comparison.after.dataset)}: "
        f"{_one_line(comparison.after.target)} ({_when(comparison.after)}) against the baseline "
        f"{_one_line(comparison.before.target)} ({_when(comparison.before)})",
        "bold",
        color,
    )
    if comparison.before.dataset != comparison.after.dataset:
        heading += f"\n(the baseline ran the dataset {_one_line(comparison.before.dataset)})"
    parts = [heading, _figures_table(before, after, color)]
    changes = _changes_table(comparison, color)
    if changes:
        parts.append(changes)
    parts.append(_counts_line(comparison, color))
    return "\n\n".join(parts)


def _when(report: EvalReport) -> str:
    return report.started_at.strftime("%Y-%m-%d %H:%M")


def figure_rows(
    before: ReportSummary, after: ReportSummary
) -> list[tuple[str, str, str, str, int]]:
    """The compared figures: (label, before, after, change, sign) with sign +1 better, -1 worse.

    Shared by the text table and the HTML page, so both say the same.
    """
    rows = [
        (
            "cases",
            str(before.cases),
            str(after.cases),
            _signed(after.cases - before.cases, "{:+d}"),
            0,
        ),
        (
            "passed",
            f"{before.passed} ({before.pass_rate:.0%})",
            f"{after.passed} ({after.pass_rate:.0%})",
            _points(after.pass_rate - before.pass_rate),
            _sign(after.pass_rate - before.pass_rate),
        ),
        (
            "score",
            f"{before.score:.2f}",
            f"{after.score:.2f}",
            _signed(after.score - before.score, "{:+.2f}"),
            _sign(after.score - before.score),
        ),
        (
            "cost",
            format_cost(before.cost),
            format_cost(after.cost),
            _cost_delta(before.cost, after.cost),
            -_sign_of(before.cost, after.cost),
        ),
        (
            "time",
            format_seconds(before.duration),
            format_seconds(after.duration),
            _signed(after.duration - before.duration, "{:+.2f} s"),
            -_sign(after.duration - before.duration),
        ),
    ]
    for name in dict.fromkeys([*before.by_evaluator, *after.by_evaluator]):
        old, new = before.by_evaluator.get(name), after.by_evaluator.get(name)
        rows.append(
            (
                f"{visible(name)} pass rate",
                UNKNOWN if old is None else f"{old:.0%}",
                UNKNOWN if new is None else f"{new:.0%}",
                UNKNOWN if old is None or new is None else _points(new - old),
                0 if old is None or new is None else _sign(new - old),
            )
        )
    return rows


def _figures_table(before: ReportSummary, after: ReportSummary, color: bool) -> str:
    rows = []
    for label, old, new, change, sign in figure_rows(before, after):
        style = "pass" if sign > 0 else "fail" if sign < 0 else None
        rows.append(
            [
                _Cell(label),
                _Cell(old, right=True),
                _Cell(new, right=True),
                _Cell(change, style, right=True),
            ]
        )
    return _table(["", "baseline", "this run", "change"], rows, color, right={1, 2, 3})


def _changes_table(comparison: Comparison, color: bool) -> str:
    rows = [_change_row("improved", c, "pass") for c in comparison.improved]
    rows += [_change_row("regressed", c, "fail") for c in comparison.regressed]
    rows += [_presence_row("added", comparison.after.case(n)) for n in comparison.added]
    rows += [_presence_row("removed", comparison.before.case(n)) for n in comparison.removed]
    if not rows:
        return ""
    return _table(["change", "case", "score", "verdict"], rows, color, right=set())


def _change_row(kind: str, change: CaseChange, style: str) -> list[_Cell]:
    verdicts = f"{_word(change.passed_before)} → {_word(change.passed_after)}"
    if change.passed_before == change.passed_after:
        verdicts = _word(change.passed_after)
    return [
        _Cell(kind, style),
        _Cell(_cut(visible(change.name), NAME_WIDTH)),
        _Cell(f"{change.before:.2f} → {change.after:.2f} ({change.delta:+.2f})"),
        _Cell(verdicts),
    ]


def _presence_row(kind: str, case: CaseResult) -> list[_Cell]:
    return [
        _Cell(kind, "dim"),
        _Cell(_cut(visible(case.name), NAME_WIDTH)),
        _Cell(f"{case.score:.2f}"),
        _Cell(_verdict(case)),
    ]


def _counts_line(comparison: Comparison, color: bool) -> str:
    return " · ".join(
        [
            _paint(
                f"{len(comparison.improved)} improved",
                "pass" if comparison.improved else None,
                color,
            ),
            _paint(
                f"{len(comparison.regressed)} regressed",
                "fail" if comparison.regressed else None,
                color,
            ),
            f"{len(comparison.unchanged)} unchanged",
            f"{len(comparison.added)} added",
            f"{len(comparison.removed)} removed",
        ]
    )


def _word(passed: bool) -> str:
    return "pass" if passed else "FAIL"


# --- numbers ------------------------------------------------------------------------------------


def format_cost(cost: float | None) -> str:
    """A cost for a table: `UNKNOWN` when unknown, four decimals, six below a hundredth."""
    if cost is None:
        return UNKNOWN
    return f"{cost:.4f}" if cost == 0 or cost >= 0.01 else f"{cost:.6f}"


def format_seconds(seconds: float) -> str:
    """Seconds for a table: two decimals under a minute, minutes and seconds above."""
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:04.1f} s"


def _signed(value: float, form: str) -> str:
    return "±0" if abs(value) < 1e-9 else form.format(value)


def _points(delta: float) -> str:
    """A change of rates in percentage points (50% to 75% is +25 pts)."""
    return _signed(round(delta * 100), "{:+d} pts")


def _sign(delta: float) -> int:
    return 0 if abs(delta) < 1e-9 else (1 if delta > 0 else -1)


def _sign_of(before: float | None, after: float | None) -> int:
    return 0 if before is None or after is None else _sign(after - before)


def _cost_delta(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return UNKNOWN
    delta = after - before
    return "±0" if abs(delta) < 1e-12 else ("+" if delta > 0 else "-") + format_cost(abs(delta))


# --- text ---------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """`text` on one line, its control characters (newlines among them) shown as escapes."""
    return visible(text)


def _cut(text: str, width: int) -> str:
    """`text` cut to `width` columns, its end marked with "…"."""
    if _width(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        if used + _char_width(char) > width - 1:
            break
        out.append(char)
        used += _char_width(char)
    return "".join(out) + "…"


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def _width(text: str) -> int:
    """The columns `text` takes on a terminal (a CJK character takes two)."""
    return sum(_char_width(c) for c in text)


def _pad(text: str, width: int, right: bool = False) -> str:
    gap = " " * (width - _width(text))
    return gap + text if right else text + gap


def _paint(text: str, style: str | None, color: bool) -> str:
    if not color or style is None:
        return text
    return f"\x1b[{_STYLES[style]}m{text}\x1b[0m"


def _table(
    header: Sequence[str], rows: Sequence[Sequence[_Cell]], color: bool, right: set[int]
) -> str:
    """Rows under a header, each column as wide as its widest cell, two spaces between.

    Colour is added after padding, so the escape codes never count toward a column's width.
    """
    widths = [_width(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], _width(cell.text))
    lines = ["  ".join(_pad(h, widths[i], i in right) for i, h in enumerate(header)).rstrip()]
    if color:
        lines[0] = _paint(lines[0], "bold", color)
    for row in rows:
        cells = [
            _paint(_pad(c.text, widths[i], c.right), c.style, color) for i, c in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
