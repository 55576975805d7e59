"""Two runs compared: which cases improved, regressed, appeared or went, and by how much."""

from __future__ import annotations

from parley.evals import CaseResult, EvaluatorResult
from tests.evals._reports import errored, failing, passing, report


def _case(name: str, *verdicts: tuple[bool, float]) -> CaseResult:
    results = [
        EvaluatorResult(name=f"e{i}", passed=p, score=s) for i, (p, s) in enumerate(verdicts)
    ]
    return CaseResult(name=name, results=results)


def test_cases_are_classified_by_name() -> None:
    before = report(passing("same"), failing("fixed"), passing("broke"), passing("gone"))
    after = report(passing("same"), passing("fixed"), failing("broke"), passing("new"))
    comparison = after.compare(before)
    assert [c.name for c in comparison.improved] == ["fixed"]
    assert [c.name for c in comparison.regressed] == ["broke"]
    assert comparison.unchanged == ["same"]
    assert comparison.added == ["new"]
    assert comparison.removed == ["gone"]
    fixed = comparison.improved[0]
    assert (fixed.before, fixed.after, fixed.passed_before, fixed.passed_after) == (
        0.25,
        1.0,
        False,
        True,
    )


def test_a_better_score_with_the_same_verdict_is_an_improvement() -> None:
    comparison = report(passing("a", score=0.9)).compare(report(passing("a", score=0.5)))
    assert [c.name for c in comparison.improved] == ["a"]
    assert round(comparison.improved[0].delta, 2) == 0.2


def test_a_verdict_flip_with_the_same_score_counts() -> None:
    # Both score 0.5 on average; only which evaluator passes changed, and with it the verdict.
    before = report(_case("a", (True, 1.0), (False, 0.0)))
    after = report(_case("a", (True, 0.5), (True, 0.5)))
    assert [c.name for c in after.compare(before).improved] == ["a"]
    assert [c.name for c in before.compare(after).regressed] == ["a"]


def test_a_case_that_now_fails_regressed_even_if_its_score_rose() -> None:
    before = report(_case("a", (True, 0.6)))
    after = report(_case("a", (True, 1.0), (False, 0.9)))  # mean 0.95, but it fails now
    comparison = after.compare(before)
    assert [c.name for c in comparison.regressed] == ["a"]
    assert not comparison.improved


def test_an_error_is_a_regression() -> None:
    comparison = report(errored("a")).compare(report(passing("a")))
    assert [(c.name, c.after, c.passed_after) for c in comparison.regressed] == [("a", 0.0, False)]


def test_the_text_table_shows_the_deltas_and_the_changes() -> None:
    before = report(failing("fixed"), passing("broke"), failing("gone"), target="v1")
    after = report(passing("fixed"), failing("broke"), passing("new"), target="v2")
    text = after.compare(before).render()
    lines = text.splitlines()
    assert lines[0].startswith("dataset arith: v2 (2026-12-02 06:20) against the baseline v1")
    figures = {line.split()[0]: line.split()[1:] for line in lines[2:10] if line.strip()}
    assert figures["passed"] == ["1", "(33%)", "2", "(67%)", "+33", "pts"]
    assert figures["score"] == ["0.50", "0.75", "+0.25"]
    assert figures["time"] == ["2.50", "s", "2.50", "s", "±0"]
    assert figures["contains"] == ["pass", "rate", "33%", "67%", "+33", "pts"]
    changes = [
        line.split()[:2]
        for line in lines
        if line.startswith(("improved", "regressed", "added", "removed"))
    ]
    assert changes == [
        ["improved", "fixed"],
        ["regressed", "broke"],
        ["added", "new"],
        ["removed", "gone"],
    ]
    assert lines[-1] == "1 improved · 1 regressed · 0 unchanged · 1 added · 1 removed"


def test_nothing_changed_shows_no_changes_table() -> None:
    run = report(passing("a"))
    text = run.compare(run).render()
    assert "improved  " not in text
    assert text.splitlines()[-1].startswith("0 improved")


def test_a_baseline_of_another_dataset_is_named() -> None:
    other = report(passing("a")).model_copy(update={"dataset": "arith-v0"})
    lines = report(passing("a")).compare(other).render().splitlines()
    assert lines[1] == "(the baseline ran the dataset arith-v0)"
