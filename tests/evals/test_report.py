"""A report's JSON round trip, loading errors, and the bar a run is held to (`check`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parley.errors import ConfigurationError
from parley.evals import EvalReport
from tests.evals._reports import detailed, errored, failing, passing, report


def test_json_round_trip_keeps_every_field(tmp_path: Path) -> None:
    run = report(passing("a"), failing("b"), errored("c"), detailed())
    path = tmp_path / "run.json"
    text = run.to_json(path)
    assert json.loads(path.read_text()) == json.loads(text)
    loaded = EvalReport.load(path)
    assert loaded == run
    assert loaded.summary() == run.summary()
    assert loaded.case("tool use").tool_calls[0].arguments == {"code": "print(12*7)"}
    assert loaded.case("c").attempts == 3


def test_loading_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot read the report '.*nowhere.json'"):
        EvalReport.load(tmp_path / "nowhere.json")


@pytest.mark.parametrize(
    ("content", "where"),
    [("not json", "the top"), ('{"dataset": "x"}', "target"), ("[1, 2]", "the top")],
)
def test_loading_something_else_names_the_problem(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "other.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError) as caught:
        EvalReport.load(path)
    message = str(caught.value)
    assert "is not an evaluation report's JSON" in message
    assert f"at {where}" in message
    assert "--json PATH" in message


def test_without_a_bar_every_case_must_pass() -> None:
    assert report(passing("a"), passing("b")).check() is None
    assert (
        report(passing("a"), failing("b")).check() == "arith: 1 of 2 cases passed (50%, below 100%)"
    )


def test_a_pass_rate_bar() -> None:
    run = report(passing("a"), passing("b"), passing("c"), failing("d"))
    assert run.check(min_pass_rate=0.75) is None
    assert run.check(min_pass_rate=0.8) == "arith: 3 of 4 cases passed (75%, below 80%)"


def test_a_score_bar_alone_lets_failed_cases_through() -> None:
    run = report(passing("a"), failing("b"))  # scores 1.0 and 0.25
    assert run.check(min_score=0.6) is None
    assert run.check(min_score=0.7) == "arith: score 0.625 is below 0.7"


def test_both_bars_name_both_shortfalls() -> None:
    shortfall = report(failing("a")).check(min_score=0.5, min_pass_rate=0.5)
    assert shortfall == "arith: score 0.250 is below 0.5; 0 of 1 cases passed (0%, below 50%)"


def test_an_error_fails_the_bar() -> None:
    assert report(errored("a")).check(min_score=0.0, min_pass_rate=0.0) is None
    assert report(errored("a")).check(min_pass_rate=0.01) is not None


def test_the_repr_names_the_run_not_every_case() -> None:
    # asyncio.run on 3.11 reprs the report it returns: it must not cost a walk of every case.
    run = report(passing("a"), failing("b"), errored("c"))
    assert repr(run) == (
        "EvalReport(dataset='arith', target=\"agent 'maths' (scripted)\", cases=3, passed=1)"
    )


def test_the_judges_cost_is_summed_apart_from_the_targets() -> None:
    from parley.messages import Usage  # noqa: PLC0415

    judged = [passing("a"), passing("b"), passing("c")]
    judged[0] = judged[0].model_copy(
        update={"judge_usage": Usage(input_tokens=100, output_tokens=20, cost=0.002)}
    )
    judged[1] = judged[1].model_copy(
        update={"judge_usage": Usage(input_tokens=50, output_tokens=10, cost=0.001)}
    )
    summary = report(*judged).summary()
    assert summary.judge_cost == pytest.approx(0.003)
    assert summary.judge_tokens == 180
    assert summary.cost == pytest.approx(0.0003)  # the target's three calls only
    assert "judge 0.003000, 180 tokens" in report(*judged).render()
    unpriced = judged[0].model_copy(update={"judge_usage": Usage(input_tokens=5)})
    assert report(unpriced).summary().judge_cost is None
    assert report(passing("d")).summary().judge_tokens == 0
