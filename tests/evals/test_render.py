"""The terminal table of a report: its rows, reasons, summary line, colour and hostile text."""

from __future__ import annotations

import io

import pytest

from parley.evals.render import UNKNOWN, render_table
from tests.evals._reports import detailed, errored, failing, passing, report


def test_a_row_per_case_with_each_evaluators_verdict_cost_and_time() -> None:
    text = render_table(report(passing("12x7", score=0.8), failing("capital"), errored("broken")))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("case"))
    assert header.split() == ["case", "result", "score", "contains", "judge", "cost", "time"]
    rows = {line.split()[0]: line.split() for line in lines if line[:1].isalnum()}
    assert rows["12x7"] == ["12x7", "pass", "0.90", "✓", "✓", "0.80", "0.000100", "0.50", "s"]
    assert rows["capital"] == ["capital", "FAIL", "0.25", "✗", "✓", "0.50", "0.000100", "1.50", "s"]
    # An errored case was judged by no evaluator, and its cost is not known.
    assert rows["broken"] == ["broken", "ERROR", "0.00", "·", "·", UNKNOWN, "0.25", "s"]


def test_columns_are_as_wide_as_their_widest_cell() -> None:
    text = render_table(report(passing("a"), passing("a much longer case name")))
    table = [line for line in text.splitlines() if line.startswith(("case", "a "))]
    # Every row's verdict starts in the same column.
    assert (
        len({line.index("pass") if "pass" in line else line.index("result") for line in table}) == 1
    )


def test_failures_reasons_are_listed_below_the_table() -> None:
    text = render_table(report(passing("ok"), failing("capital"), errored("broken")))
    failures = text.split("Failures\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert failures == [
        "  capital  contains: expected '84' in the output, got 'It is 85.'",
        "  broken   error: ProviderError: 503 Service Unavailable",
    ]


def test_no_failures_section_when_every_case_passed() -> None:
    assert "Failures" not in render_table(report(passing("a"), detailed()))


def test_the_summary_line_counts_cases_passes_errors_score_cost_and_time() -> None:
    last = render_table(report(passing("a"), failing("b"), errored("c"))).splitlines()[-1]
    assert last == (
        "3 cases · 1 passed (33%) · 1 error · score 0.42 · cost 0.000200 · 2.50 s "
        "(p50 0.50 s, max 1.50 s) · 200 tokens in, 40 out"
    )


def test_an_unpriced_case_makes_the_total_cost_unknown() -> None:
    last = render_table(report(passing("a"), passing("b", cost=None))).splitlines()[-1]
    assert f"cost {UNKNOWN}" in last


def test_control_characters_from_the_dataset_and_model_never_reach_the_terminal() -> None:
    case = failing(
        "clear\x1b[2J\x1b]0;owned\x07", reason="got \x1b[31mred\x1b[0m\nand a newline\u202e"
    )
    text = render_table(report(case))
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\u202e" not in text
    assert "clear\\x1b[2J" in text
    assert "got \\x1b[31mred\\x1b[0m\\nand a newline\\u202e" in text  # on one line


def test_long_names_are_cut() -> None:
    text = render_table(report(passing("x" * 100)))
    assert "x" * 39 + "…" in text
    assert "x" * 41 not in text


def test_wide_characters_count_two_columns() -> None:
    text = render_table(report(passing("算术"), passing("abcd")))
    rows = [line for line in text.splitlines() if line.startswith(("算术", "abcd"))]
    # "算术" is as wide as "abcd" on a terminal, so what follows starts at the same column.
    assert rows[0].replace("算术", "abcd") == rows[1]


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    run = report(passing("a"), failing("b"))

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    plain, terminal = io.StringIO(), Terminal()
    monkeypatch.delenv("NO_COLOR", raising=False)
    run.print(plain)
    run.print(terminal)
    assert "\x1b[" not in plain.getvalue()
    assert "\x1b[31;1mFAIL" in terminal.getvalue()
    # Colour never changes the text, only paints it.
    assert terminal.getvalue().replace("\x1b[0m", "").count("FAIL") == plain.getvalue().count(
        "FAIL"
    )

    monkeypatch.setenv("NO_COLOR", "1")
    no_color = Terminal()
    run.print(no_color)
    assert no_color.getvalue() == plain.getvalue()


def test_a_console_without_the_marks_gets_the_table_anyway() -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    report(passing("a")).print(out)
    out.flush()
    assert b"pass" in out.buffer.getvalue()  # type: ignore[attr-defined]


def test_the_table_of_a_run_by_the_runner() -> None:
    from parley.evals import Case, Contains, Dataset, Regex  # noqa: PLC0415
    from parley.models.testing import ScriptedModel  # noqa: PLC0415

    def answer(request: object) -> str:
        question = request.messages[-1].text  # type: ignore[attr-defined]
        return "12*7 is 84." if "12*7" in question else "No idea."

    dataset = Dataset(
        "arith",
        cases=[
            Case("12x7", "What is 12*7?", expected="84"),
            Case("13x7", "What is 13*7?", expected="91"),
        ],
        evaluators=[Contains(), Regex(pattern=r"^\d")],
    )
    run = dataset.evaluate_sync(ScriptedModel([answer, answer]), concurrency=1)
    text = render_table(run)
    rows = {line.split()[0]: line.split()[:5] for line in text.splitlines() if line.startswith("1")}
    assert rows == {
        "12x7": ["12x7", "pass", "1.00", "✓", "✓"],
        "13x7": ["13x7", "FAIL", "0.00", "✗", "✗"],
    }
    assert text.splitlines()[0].startswith("dataset arith · target scripted:scripted · ")
    assert "13x7  contains: expected '91'" in text
