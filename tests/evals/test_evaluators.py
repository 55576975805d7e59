"""Every evaluator on a scripted target: a case it passes and a case it FAILS (the baselines that
prove each check can fail), with the reason a failure gives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from parley.agents import Agent
from parley.evals import (
    CalledTool,
    Case,
    Contains,
    Dataset,
    Equals,
    EvalContext,
    EvalReport,
    Evaluator,
    EvaluatorResult,
    Judge,
    MatchesSchema,
    MaxCost,
    MaxLatency,
    Regex,
    RetrievalHit,
)
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel
from parley.rag.index import DocumentIndex
from parley.rag.tool import RetrievalTool
from parley.tools import tool
from tests.evals import _fixtures

multiply = tool(_fixtures.multiply)


@tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}"


def verdicts(report: EvalReport) -> dict[str, tuple[bool, str | None]]:
    """Each case's one verdict: passed, and the reason."""
    found = {}
    for case in report.cases:
        assert case.error is None, case.error
        [result] = case.results
        found[case.name] = (result.passed, result.reason)
    return found


async def on_model(evaluator: Evaluator, *answers: str | ChatResponse, **case: Any) -> Any:
    """`evaluator` over a scripted model answering `pass` then `fail`."""
    ds = Dataset(
        "d",
        [Case("pass", "question", **case), Case("fail", "question", **case)],
        evaluators=[evaluator],
    )
    return verdicts(await ds.evaluate(ScriptedModel(list(answers)), concurrency=1))


async def test_equals() -> None:
    found = await on_model(Equals(), " 84\n", "85", expected="84")
    assert found == {"pass": (True, None), "fail": (False, "expected '84', got '85'")}


async def test_equals_compares_structured_values() -> None:
    ds = Dataset("d", [Case("p", 1, expected={"a": [1]}), Case("f", 2, expected={"a": [1]})])
    report = await ds.evaluate(lambda n: {"a": [n]})
    assert verdicts(report)["p"] == (True, None)
    assert verdicts(report)["f"] == (False, "expected '{\"a\": [1]}', got '{\"a\": [2]}'")


async def test_contains_ignores_case_by_default() -> None:
    found = await on_model(Contains("Paris"), "It is PARIS.", "It is Lyon.")
    assert found["pass"] == (True, None)
    assert found["fail"] == (False, "expected 'Paris'; missing ['Paris'] in 'It is Lyon.'")


async def test_contains_case_sensitive_all_and_any() -> None:
    sensitive = await on_model(Contains("Paris", case_sensitive=True), "Paris", "PARIS")
    assert sensitive["pass"][0]
    assert not sensitive["fail"][0]
    every = await on_model(Contains(["red", "blue"]), "red and blue", "red only")
    assert every["pass"][0]
    assert every["fail"] == (
        False,
        "expected all of ['red', 'blue']; missing ['blue'] in 'red only'",
    )
    some = await on_model(Contains(["red", "blue"], any=True), "blue", "green")
    assert some["pass"][0]
    assert not some["fail"][0]


async def test_regex() -> None:
    found = await on_model(Regex(r"\b84\b"), "The answer: 84.", "The answer: 840.")
    assert found["pass"] == (True, None)
    assert found["fail"] == (False, "'The answer: 840.' does not match /\\b84\\b/")
    whole = await on_model(Regex(r"\d+", full=True), " 84 ", "about 84")
    assert whole["pass"][0]
    assert not whole["fail"][0]


class City(BaseModel):
    name: str
    population: int


async def test_matches_schema_parses_text_and_fenced_json() -> None:
    good = '```json\n{"name": "Paris", "population": 2100000}\n```'
    found = await on_model(MatchesSchema(City), good, '{"name": "Paris", "population": "many"}')
    assert found["pass"] == (True, None)
    assert found["fail"] == (False, "population: 'many' is not of type 'integer'")
    not_json = await on_model(MatchesSchema(City), '{"name": "x", "population": 1}', "Paris!")
    assert not_json["fail"][1] is not None
    assert not_json["fail"][1].startswith("the output is not JSON")


async def test_matches_schema_defaults_to_the_datasets_schema() -> None:
    ds = Dataset(
        "d",
        [Case("pass", "q"), Case("fail", "q")],
        evaluators=[MatchesSchema()],
        output_schema=City,
    )

    def answer(inputs: str, ctx: EvalContext) -> dict[str, Any]:
        return {"name": "Oslo", "population": 700000} if ctx.case.name == "pass" else {"name": 1}

    found = verdicts(await ds.evaluate(answer))
    assert found["pass"] == (True, None)
    assert found["fail"][0] is False


async def calls(evaluator: Evaluator, *scripts: list[Any]) -> dict[str, tuple[bool, str | None]]:
    """`evaluator` over an agent with real tools, one scripted run per case."""
    model = ScriptedModel([step for script in scripts for step in script])
    agent = Agent("a", model, tools=[multiply, weather])
    names = ["pass", "fail", *[f"extra{i}" for i in range(len(scripts) - 2)]]
    ds = Dataset("d", [Case(n, "question") for n in names], evaluators=[evaluator])
    found = verdicts(await ds.evaluate(agent, concurrency=1))
    model.assert_consumed()
    return found


def call(name: str, **arguments: Any) -> ChatResponse:
    return ScriptedModel.tool_call(name, arguments)


async def test_called_tool_with_matching_arguments() -> None:
    found = await calls(
        CalledTool("multiply", {"a": 12, "b": "re:^7$"}),
        [call("multiply", a=12, b=7), "84"],
        [call("multiply", a=12, b=8), "96"],
    )
    assert found["pass"] == (True, None)
    assert found["fail"] == (
        False,
        "expected a call of multiply with {'a': 12, 'b': 're:^7$'}; "
        'made: [\'multiply({"a": 12, "b": 8})\']',
    )


async def test_called_tool_with_a_function_of_the_argument() -> None:
    found = await calls(
        CalledTool("weather", {"city": lambda city: city.lower() == "paris"}),
        [call("weather", city="PARIS"), "Sunny."],
        [call("weather", city="Rome"), "Sunny."],
    )
    assert found["pass"][0]
    assert not found["fail"][0]


async def test_called_tool_times_and_no_tool_at_all() -> None:
    twice = await calls(
        CalledTool("multiply", times=2),
        [call("multiply", a=1, b=2), call("multiply", a=3, b=4), "done"],
        [call("multiply", a=1, b=2), "done"],
    )
    assert twice["pass"][0]
    assert twice["fail"][1] is not None
    assert twice["fail"][1].startswith("expected 2 call(s) of multiply, got 1")
    none = await calls(
        CalledTool("*", times=0), ["No tool needed: 4."], [call("weather", city="x"), "ok"]
    )
    assert none["pass"][0]
    assert not none["fail"][0]


async def test_called_tool_after_another() -> None:
    found = await calls(
        CalledTool("multiply", after="weather"),
        [call("weather", city="x"), call("multiply", a=1, b=2), "ok"],
        [call("multiply", a=1, b=2), call("weather", city="x"), "ok"],
    )
    assert found["pass"][0]
    assert found["fail"] == (False, "multiply was not called after weather")


@pytest.fixture
async def index(tmp_path: Path) -> Any:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days of a return.")
    (docs / "shipping.md").write_text("# Shipping\n\nParcels ship from Lyon every Monday.")
    opened = await DocumentIndex.open(tmp_path / "index.db", embedding_model=None)
    await opened.add([docs / "refunds.md", docs / "shipping.md"])
    yield opened
    await opened.close()


async def test_retrieval_hit_reads_the_passages_of_a_real_retrieval_tool(index: Any) -> None:
    model = ScriptedModel(
        [
            call("retrieval", query="refunds paid"),
            "Within 14 days [1].",
            call("retrieval", query="parcels ship Monday"),
            "Mondays [1].",
        ]
    )
    agent = Agent("rag", model, tools=[RetrievalTool(index, top_k=1)])
    ds = Dataset(
        "r",
        [Case("pass", "When are refunds paid?"), Case("fail", "When do parcels ship?")],
        evaluators=[RetrievalHit("refunds.md", k=1)],
    )
    report = await ds.evaluate(agent, concurrency=1)

    found = verdicts(report)
    assert found["pass"] == (True, None)
    assert found["fail"] == (
        False,
        "found 0 of ['refunds.md'] in the first 1 1 passage(s) retrieved",
    )
    [passage] = report.case("pass").retrieved
    assert passage.startswith("refunds.md")
    assert "within 14 days" in passage


async def test_retrieval_hit_all_and_the_score() -> None:
    def retrieving(inputs: list[str], ctx: EvalContext) -> str:
        ctx.retrieved.extend(inputs)
        return "ok"

    ds = Dataset(
        "r",
        [
            Case("pass", ["doc-a text", "doc-b text"], expected=["doc-a", "doc-b"]),
            Case("fail", ["doc-a text", "doc-c text"], expected=["doc-a", "doc-b"]),
        ],
        evaluators=[RetrievalHit(all=True)],
    )
    report = await ds.evaluate(retrieving)
    assert verdicts(report)["pass"] == (True, None)
    assert not verdicts(report)["fail"][0]
    assert report.case("fail").results[0].score == 0.5


async def test_retrieval_hit_by_source_is_not_fooled_by_a_passage_that_mentions_the_id() -> None:
    def retrieving(inputs: list[str], ctx: EvalContext) -> str:
        ctx.retrieved.extend(inputs)
        return "ok"

    mentions = "os.rmdir\nRemove an empty directory; to remove whole trees see shutil.rmtree."
    right = "shutil.rmtree, page 2\nDelete an entire directory tree."
    ds = Dataset(
        "r",
        [
            Case("mentioned", [mentions], expected=["shutil.rmtree"]),
            Case("retrieved", [mentions, right], expected=["shutil.rmtree"]),
        ],
        evaluators=[RetrievalHit(where="source")],
    )
    report = await ds.evaluate(retrieving)
    assert not verdicts(report)["mentioned"][0]
    assert verdicts(report)["retrieved"] == (True, None)
    # Matched anywhere (the default) or in the text, the mention counts.
    for where in ("any", "text"):
        loose = ds.model_copy(update={"evaluators": [RetrievalHit(where=where)]})
        assert verdicts(await loose.evaluate(retrieving))["mentioned"] == (True, None)
    assert RetrievalHit.from_spec({"type": "retrieval_hit", "where": "source"}).where == "source"


async def test_max_cost_and_tokens() -> None:
    cheap = ChatResponse.model_validate(
        {"content": [{"type": "text", "text": "a"}], "usage": {"input_tokens": 5, "cost": 0.001}}
    )
    dear = ChatResponse.model_validate(
        {"content": [{"type": "text", "text": "b"}], "usage": {"input_tokens": 5, "cost": 0.5}}
    )
    found = await on_model(MaxCost(cost=0.01), cheap, dear)
    assert found["pass"] == (True, None)
    assert found["fail"] == (False, "cost 0.5 over 0.01")
    # An unpriced model's cost is unknown: a cost bound fails, a token bound still works.
    unpriced = await on_model(MaxCost(cost=1.0), "x", "y")
    assert unpriced["pass"] == (False, "the cost is unknown (the model has no price)")
    tokens = await on_model(MaxCost(tokens=5), "short", "a much longer answer than that")
    assert tokens["pass"][0]
    assert tokens["fail"][1] is not None
    assert tokens["fail"][1].endswith("tokens over 5")


async def test_max_latency() -> None:
    async def answer(inputs: str) -> str:
        if inputs == "slow":
            await asyncio.sleep(0.05)  # at least this long, however fast the machine
        return inputs

    ds = Dataset(
        "l", [Case("pass", "fast"), Case("fail", "slow")], evaluators=[MaxLatency(seconds=0.04)]
    )
    report = await ds.evaluate(answer)
    found = verdicts(report)
    assert found["fail"][0] is False
    assert found["fail"][1] is not None
    assert "over 0.04s" in found["fail"][1]
    # A bound generous enough for any machine passes.
    loose = Dataset("l", [Case("pass", "fast")], evaluators=[MaxLatency(60)])
    assert verdicts(await loose.evaluate(answer))["pass"] == (True, None)


def verdict(passed: bool, score: float, reason: str) -> ChatResponse:
    return call("generate_response", passed=passed, score=score, reason=reason)


async def test_judge_gives_the_models_verdict_and_counts_its_usage() -> None:
    judge_model = ScriptedModel(
        [verdict(True, 0.9, "Polite and right."), verdict(False, 0.2, "Rude.")]
    )
    ds = Dataset(
        "j",
        [Case("pass", "Say hi", expected="a greeting"), Case("fail", "Say hi")],
        evaluators=[Judge("The answer is a polite greeting.", model=judge_model)],
    )
    report = await ds.evaluate(ScriptedModel(["Hello there!", "Go away."]), concurrency=1)

    found = {
        c.name: (c.results[0].passed, c.results[0].score, c.results[0].reason) for c in report.cases
    }
    assert found == {"pass": (True, 0.9, "Polite and right."), "fail": (False, 0.2, "Rude.")}
    # The judge saw the rubric, the question, the expected answer and the answer.
    prompt = judge_model.requests[0].messages[-1].text
    for part in ("The answer is a polite greeting.", "Say hi", "a greeting", "Hello there!"):
        assert part in prompt
    assert "Expected answer" not in judge_model.requests[1].messages[-1].text
    # Its usage is the case's judge usage, apart from the target's.
    first = report.case("pass")
    assert first.judge_usage is not None
    assert first.judge_usage.input_tokens > 0
    assert first.usage is not None
    assert first.usage.input_tokens == 2  # the target's: "Say hi"


async def test_a_malformed_verdict_fails_the_case_with_the_reason() -> None:
    judge_model = ScriptedModel(
        [
            call("generate_response", passed="maybe", score=7),
            call("generate_response", verdict="x"),  # the one retry, still wrong
        ]
    )
    ds = Dataset("j", [Case("a", "q")], evaluators=[Judge("Polite.", model=judge_model)])
    report = await ds.evaluate(lambda inputs: "answer")

    [result] = report.cases[0].results
    assert not result.passed
    assert result.reason is not None
    assert result.reason.startswith("evaluator raised ModelOutputError:")
    assert "did not fit the schema" in result.reason
    judge_model.assert_consumed()


async def test_a_judge_without_a_model_uses_the_runs_judge_model() -> None:
    judge_model = ScriptedModel([verdict(True, 1.0, "Fine.")], model="judge-1")
    ds = Dataset("j", [Case("a", "q")], evaluators=[Judge("Polite.")])
    report = await ds.evaluate(lambda inputs: "answer", judge_model=judge_model)
    assert report.cases[0].passed
    assert report.settings["judge_model"] == "scripted:judge-1"
    alone = await ds.evaluate(lambda inputs: "answer")
    assert alone.cases[0].results[0].reason == (
        "evaluator raised UserError: Judge needs a model: "
        "Judge(rubric, model=...) or judge_model=..."
    )


async def test_a_subclass_with_a_type_can_be_named_in_a_file(tmp_path: Path) -> None:
    class Shouts(Evaluator):
        type: ClassVar[str] = "test_shouts"
        minimum: int = 1

        async def evaluate(self, ctx: EvalContext) -> EvaluatorResult | bool | float:
            return ctx.text.count("!") >= self.minimum

    path = tmp_path / "shouts.yaml"
    path.write_text(
        "cases: [{name: pass, inputs: hi!!}, {name: fail, inputs: hi}]\n"
        "evaluators: [{type: test_shouts, minimum: 2}]\n"
    )
    found = verdicts(await Dataset.load(path).evaluate(lambda s: s))
    assert found == {"pass": (True, None), "fail": (False, "failed")}


async def test_a_custom_evaluator_and_a_function_returning_a_score() -> None:
    class Short(Evaluator):
        async def evaluate(self, ctx: EvalContext) -> EvaluatorResult | bool | float:
            return len(ctx.text) < 10

    def share_of_words(ctx: EvalContext) -> float:
        return len(set(ctx.text.split()) & {"a", "b"}) / 2

    ds = Dataset("c", [Case("pass", "a b"), Case("fail", "a very long c")])
    report = await ds.evaluate(lambda s: s, name="echo")
    assert report.cases[0].results == []
    ds = ds.model_copy(
        update={"evaluators": [Short(), Evaluator.from_spec({"type": "contains", "value": "a"})]}
    )
    judged = await ds.evaluate(lambda s: s)
    assert [r.passed for r in judged.case("fail").results] == [False, True]
    assert judged.case("fail").results[0].reason == "failed"
    scored = Dataset("s", [Case("pass", "a b"), Case("fail", "c d")], evaluators=[share_of_words])
    found = await scored.evaluate(lambda s: s)
    assert found.case("pass").results[0].score == 1.0
    assert found.case("fail").results[0] == EvaluatorResult(
        name="share_of_words", passed=False, score=0.0, reason="score 0.00 below the threshold 0.5"
    )
