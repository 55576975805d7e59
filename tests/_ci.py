"""What `CI=true` changes in a test run: nothing may be skipped, and Hypothesis replays.

A pytest plugin, registered for the whole suite by `tests/conftest.py`.

* **No skip passes for a success.** Under CI every skipped test, and every module skipped at
  collection, is reported as a failure that gives the skip's reason. A test whose optional part
  is missing already fails there through `tests._requires.unavailable`; this catches any skip
  that did not go through it (a `skipif` mark, a plugin's skip). An expected failure (`xfail`)
  is not a skip and stays as it is; `xfail_strict` already fails one that passes.
* **Hypothesis profiles.** `ci` (loaded under `CI=true`) is derandomized (the examples follow
  from each test, so every run tries the same ones), keeps no example database and prints the
  blob that reproduces a failure. `dev` (loaded otherwise) is Hypothesis's default: random
  examples each run, failures remembered in `.hypothesis/` and tried first next time. `hunt`
  tries 2,000 examples per test (where the test sets no `max_examples` of its own), for a
  search by hand: `pytest --hypothesis-profile=hunt --hypothesis-seed=N tests/compat`.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest
from hypothesis import settings

from tests._requires import in_ci

# No deadline anywhere: it is a wall-clock assertion, and on a loaded 2-core machine a 200 ms
# deadline failed examples that are merely slow there (conversions of large conversations).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.register_profile("hunt", max_examples=2000, deadline=None)
settings.load_profile("ci" if in_ci() else "dev")


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    # A skip's longrepr is (file, line, "Skipped: reason").
    return longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.outcome = "failed"
    report.longrepr = (
        f"{_skip_reason(report)}\n(CI=true: a skipped test fails here, where a skip would pass "
        "for a success; see tests/_requires.py)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI, report a skipped test (not an expected failure) as failed."""
    report = yield
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        _fail_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Under CI, report a module skipped at collection as a collection error."""
    report = yield
    if in_ci() and report.skipped:
        _fail_skip(report)
    return report
