"""`assert_passes` in a user's test suite: a readable failure, and the opt-in `--evals-dir`.

Each test runs a small suite of its own in pytest (`pytester`), as a user's would run.
"""

from __future__ import annotations

import json

import pytest

from parley.evals.pytest_plugin import assert_passes
from tests.evals._reports import errored, failing, passing, report

_SUITE = """
from datetime import UTC, datetime

from parley.evals import CaseResult, EvalReport, EvaluatorResult
from parley.evals.pytest_plugin import assert_passes


PASSED = EvaluatorResult(name="contains", passed=True, score=1)
FAILED = EvaluatorResult(
    name="contains", passed=False, score=0, reason="expected 'Paris', got 'Lyon'"
)


def _report():
    return EvalReport(
        dataset="arith",
        target="agent 'maths'",
        started_at=datetime(2026, 12, 2, tzinfo=UTC),
        cases=[
            CaseResult(name="12x7", results=[PASSED]),
            CaseResult(name="capital", output="Lyon", results=[FAILED]),
        ],
    )


def test_every_case():
    assert_passes(_report())


def test_half_is_enough():
    assert_passes(_report(), min_pass_rate=0.5)


def test_with_the_method():
    _report().assert_passes(min_score=0.9)
"""


def test_a_failing_run_fails_the_test_with_the_failures_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_agent=_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    # The message says how the run fell short, then the failed case, its reason, the totals;
    # the helper's own frame is hidden, so the test's line is the one shown.
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: arith: 1 of 2 cases passed (50%, below 100%)",
            "E*case     result  score  contains  cost    time",
            "E*capital  FAIL     0.00  ✗*0.00 s",
            "E*capital  contains: expected 'Paris', got 'Lyon'",
            "E*2 cases · 1 passed (50%) · score 0.50 · cost * · 0.00 s *",
            "*AssertionError: arith: score 0.500 is below 0.9",
        ]
    )
    assert "def assert_passes" not in result.stdout.str()
    assert "12x7" not in result.stdout.str()  # only the failed cases are listed


def test_the_opt_in_plugin_keeps_each_checked_report(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["parley.evals.pytest_plugin"]')
    pytester.makepyfile(test_agent=_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--evals-dir", "kept")
    result.assert_outcomes(passed=1, failed=2)
    kept = sorted(p.name for p in (pytester.path / "kept").iterdir())
    assert kept == [
        "test_every_case-arith.html",
        "test_every_case-arith.json",
        "test_half_is_enough-arith.html",
        "test_half_is_enough-arith.json",
    ]
    saved = json.loads((pytester.path / "kept" / "test_every_case-arith.json").read_text())
    assert saved["dataset"] == "arith"


def test_assert_passes_returns_quietly_when_the_bar_holds() -> None:
    assert_passes(report(passing("a"), passing("b")))
    assert_passes(report(passing("a"), failing("b")), min_pass_rate=0.5)
    with pytest.raises(AssertionError, match="ProviderError: 503"):
        assert_passes(report(passing("a"), errored("b")))
