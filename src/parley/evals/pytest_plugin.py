"""Evaluations in a test suite: `assert_passes`, and an opt-in pytest plugin that keeps reports.

    from parley.evals import Dataset
    from parley.evals.pytest_plugin import assert_passes

    def test_maths_agent():
        report = Dataset.load("evals/arith.yaml").evaluate_sync(maths_agent)
        assert_passes(report, min_pass_rate=0.9)      # or: report.assert_passes(...)

A failing run raises AssertionError whose message is the failed cases' table and their
reasons, so pytest's own output says which cases failed and why.

The plugin is opt-in: `pytest_plugins = ["parley.evals.pytest_plugin"]` in a `conftest.py`
adds `--evals-dir DIR`, where every report given to `assert_passes` is written (JSON and HTML,
one pair per test) for a look after the run, or for CI to keep. parley registers no `pytest11`
entry point: a helper needs none, and an entry point would load into every pytest session of
every project that installs parley.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from parley.evals.report import EvalReport

__all__ = ["assert_passes", "pytest_addoption", "pytest_configure", "pytest_runtest_setup"]

_reports_dir: Path | None = None
"""Where `--evals-dir` keeps the reports (None: not asked, or the plugin not loaded)."""
_test_name = "report"
"""The test running now, for the kept reports' file names."""


def assert_passes(
    report: EvalReport, *, min_score: float | None = None, min_pass_rate: float | None = None
) -> None:
    """Fail the test unless `report` meets the bar; the message is the failures' table.

    Args:
        report: A run's report.
        min_score: The lowest mean score (0 to 1) that passes.
        min_pass_rate: The lowest share of cases passed that passes; with neither bar given,
            every case must pass.

    Raises:
        AssertionError: The run falls short: its message says how, then lists the failed
            cases with their reasons, then the run's summary line.
    """
    __tracebackhide__ = True  # pytest points at the test's line, not this one
    _keep(report)
    report.assert_passes(min_score=min_score, min_pass_rate=min_pass_rate)


def _keep(report: EvalReport) -> None:
    if _reports_dir is None:
        return
    _reports_dir.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^\w.-]+", "_", f"{_test_name}-{report.dataset}").strip("_")[:150]
    report.to_json(_reports_dir / f"{stem}.json")
    report.to_html(_reports_dir / f"{stem}.html")


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--evals-dir DIR`: keep the JSON and HTML of each report `assert_passes` is given."""
    parser.getgroup("parley").addoption(
        "--evals-dir",
        metavar="DIR",
        help="write each report that assert_passes checks to DIR (JSON and HTML)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Read `--evals-dir`."""
    global _reports_dir  # noqa: PLW0603  (pytest runs one session per process)
    given = config.getoption("--evals-dir")
    _reports_dir = Path(given) if given else None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Note the test's name, for the reports it keeps."""
    global _test_name  # noqa: PLW0603
    _test_name = item.name
