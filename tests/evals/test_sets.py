"""The shipped evaluation sets: they load, and their evaluators tell right answers from wrong.

Each set runs twice on `ScriptedModel`: once answering every case as the set expects (the
real tools run: the sandboxed code interpreter, `convert_units`, a search of the pydocs
index), which must score 100%, and once answering wrongly, which must score low. A set
whose evaluators passed anything, or failed a right answer, fails here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from parley.errors import ConfigurationError
from parley.evals import EvalReport
from parley.evals.sets import (
    NAMES,
    Contact,
    load,
    path,
    qa_agent,
    structured_agent,
    tools_agent,
)
from parley.evals.sets._pydocs import corpus_folder, load_corpus, open_index
from parley.evals.sets._tools import convert
from parley.models.base import ChatRequest
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _retrieval_set  # noqa: E402
from tests._requires import require_module  # noqa: E402

Answer = Callable[[dict[str, Any], ChatRequest], "ChatResponse | str"]


def _raw(name: str) -> dict[str, Any]:
    """The set's file as data (the scripted answers are made from its cases)."""
    data: dict[str, Any] = yaml.safe_load(path(name).read_text(encoding="utf-8"))
    return data


def _oracle(name: str, answer: Answer, calls_per_case: int) -> ScriptedModel:
    """A scripted model whose every step answers the case its conversation asks."""
    by_question = {case["inputs"]: case for case in _raw(name)["cases"]}

    def step(request: ChatRequest) -> ChatResponse | str:
        question = next(m.text for m in request.messages if m.role == "user")
        return answer(by_question[question], request)

    return ScriptedModel([step] * (calls_per_case * len(by_question)))


def _after_tool(request: ChatRequest) -> bool:
    return request.messages[-1].role == "tool"


def _spec(case: dict[str, Any]) -> dict[str, Any] | None:
    return next((e for e in case["evaluators"] if e["type"] == "called_tool"), None)


def _right_tool_answer(case: dict[str, Any], request: ChatRequest) -> ChatResponse | str:
    spec = _spec(case)
    if spec is None or spec["tool"] == "*" or _after_tool(request):
        return f"The answer is {case['expected'] or 'hello'}."
    if spec["tool"] == "code_interpreter":
        return ScriptedModel.tool_call("code_interpreter", {"code": f"print({case['expected']})"})
    return ScriptedModel.tool_call("convert_units", dict(spec["arguments"]))


def _wrong_tool_answer(case: dict[str, Any], request: ChatRequest) -> ChatResponse | str:
    spec = _spec(case)
    if spec is not None and spec["tool"] == "*" and not _after_tool(request):
        return ScriptedModel.tool_call("code_interpreter", {"code": "print(1)"})
    return "I am not sure."


def _summary(report: EvalReport) -> tuple[int, float, float]:
    s = report.summary()
    return s.cases, s.score, s.pass_rate


def test_the_shipped_sets_load_with_their_evaluators() -> None:
    sizes = {name: len(load(name).cases) for name in NAMES}
    assert sizes == {"tools": 50, "qa": 21, "structured": 20}
    tools = load("tools")
    categories = [c.metadata["category"] for c in tools.cases]
    assert {k: categories.count(k) for k in set(categories)} == {
        "arithmetic": 15,
        "function": 12,
        "choice": 13,
        "no_tool": 10,
    }
    assert all(c.evaluators for c in tools.cases)
    schema = load("structured").output_schema
    assert schema is not None
    assert schema["required"] == list(Contact.model_fields)  # the file and the model agree


def test_an_unknown_set_is_refused_with_the_known_names() -> None:
    with pytest.raises(ConfigurationError, match="tools, qa, structured"):
        path("tool")


def test_the_expected_conversions_are_the_tools_own_results() -> None:
    for case in _raw("tools")["cases"]:
        spec = _spec(case)
        if spec is not None and spec["tool"] == "convert_units":
            args = spec["arguments"]
            result = convert(args["value"], args["from_unit"], args["to_unit"])
            assert f"{result:g}" == case["expected"], case["name"]


async def test_the_tools_set_scores_a_right_model_full_and_a_wrong_one_zero() -> None:
    dataset = load("tools")
    right = _oracle("tools", _right_tool_answer, 2)
    report = await dataset.evaluate(tools_agent(right), concurrency=4, retries=0)
    assert [c.name for c in report.cases if not c.passed] == []
    assert _summary(report) == (50, 1.0, 1.0)
    # The interpreter really ran: its printed result reached the answer's evaluator.
    case = report.case("arith-2pow20")
    assert "1048576" in str(case.tool_calls[0].result)

    wrong = _oracle("tools", _wrong_tool_answer, 2)
    report = await dataset.evaluate(tools_agent(wrong), concurrency=4, retries=0)
    cases, score, pass_rate = _summary(report)
    assert (cases, pass_rate) == (50, 0.0)
    assert score == 0.0


@pytest.fixture(scope="module")
def keyword_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pydocs index without vectors (keyword search: built in seconds)."""
    return tmp_path_factory.mktemp("pydocs") / "index.sqlite"


def test_the_qa_cases_expect_the_qrels_passages() -> None:
    labelled = _retrieval_set.load()
    corpus = load_corpus()
    assert corpus_folder() == _retrieval_set.DATA
    for case in load("qa").cases:
        assert sorted(case.expected) == sorted(labelled.qrels[case.name]), case.name
        assert all(entry in corpus for entry in case.expected)
        assert case.metadata["query"] == labelled.queries[case.name]


async def test_the_qa_set_hits_only_on_the_qrels_passages(keyword_index: Path) -> None:
    corpus = load_corpus()
    index = await open_index(keyword_index, keyword_only=True)
    try:

        def right(case: dict[str, Any], request: ChatRequest) -> ChatResponse | str:
            entry = case["expected"][0]
            if _after_tool(request):
                return f"Use {entry}."
            # The passage's own text as the query: keyword search ranks it first.
            return ScriptedModel.tool_call("retrieval", {"query": corpus[entry]})

        def wrong(case: dict[str, Any], request: ChatRequest) -> ChatResponse | str:
            if _after_tool(request):
                return "Use the print function."
            return ScriptedModel.tool_call("retrieval", {"query": "print objects to a stream"})

        dataset = load("qa")
        report = await dataset.evaluate(qa_agent(_oracle("qa", right, 2), index), retries=0)
        assert [c.name for c in report.cases if not c.passed] == []
        # Every case found a labelled passage (the score is recall: one of two counts half).
        assert report.summary().by_evaluator == {"retrieval_hit@3": 1.0, "regex": 1.0}
        hit = report.case("q001")
        assert hit.retrieved[0].startswith("shutil.rmtree")

        report = await dataset.evaluate(qa_agent(_oracle("qa", wrong, 2), index), retries=0)
        assert _summary(report) == (21, 0.0, 0.0)
        assert all(len(c.retrieved) == 3 for c in report.cases)  # it found other entries
    finally:
        await index.close()


async def test_the_qa_index_is_reused_while_the_corpus_is_unchanged(keyword_index: Path) -> None:
    index = await open_index(keyword_index, keyword_only=True)
    try:
        documents = await index.store.documents()
        assert len(documents) == len(load_corpus())
        held = {d.doc_id: d.indexed_at for d in documents}
    finally:
        await index.close()
    again = await open_index(keyword_index, keyword_only=True)
    try:
        assert {d.doc_id: d.indexed_at for d in await again.store.documents()} == held
    finally:
        await again.close()


async def test_the_structured_set_scores_field_by_field() -> None:
    cases = _raw("structured")["cases"]
    dataset = load("structured")

    def answers(change: Callable[[dict[str, Any]], dict[str, Any]]) -> ScriptedModel:
        def answer(case: dict[str, Any], request: ChatRequest) -> ChatResponse | str:
            record = change(dict(case["expected"]))
            # The agent asks a model without a native structured mode to call this tool.
            if any(spec.name == "generate_response" for spec in request.tools):
                return ScriptedModel.tool_call("generate_response", record)
            return json.dumps(record)

        return _oracle("structured", answer, 2)

    report = await dataset.evaluate(structured_agent(answers(lambda e: e)), retries=0)
    assert [c.name for c in report.cases if not c.passed] == []
    assert _summary(report) == (20, 1.0, 1.0)

    # Right shape, one field wrong of four: the schema passes, the fields score 3/4.
    report = await dataset.evaluate(
        structured_agent(answers(lambda e: {**e, "city": "Nowhere"})), retries=0
    )
    assert report.summary().pass_rate == 0.0
    assert report.summary().by_evaluator == {"schema": 1.0, "fields_equal": 0.0}
    assert {r.score for c in report.cases for r in c.results if r.name == "fields_equal"} == {0.75}
    reason = report.case("maria").results[1].reason
    assert "city: expected 'Madrid', got 'Nowhere'" in str(reason)
    assert len(cases) == 20


async def test_a_few_tool_cases_on_the_embedded_model_make_a_full_report() -> None:
    require_module("llama_cpp", "local")
    from parley.providers.local import LocalChatModel  # noqa: PLC0415

    dataset = load("tools")
    picked = [dataset.case("arith-12x7"), dataset.case("plain-capital-france")]
    dataset = dataset.model_copy(update={"cases": picked})
    report = await dataset.evaluate(tools_agent(LocalChatModel()), concurrency=1, retries=0)
    # Its scores are the model's business; the report's shape is the runner's and the set's.
    assert [c.name for c in report.cases] == ["arith-12x7", "plain-capital-france"]
    for case, asked in zip(report.cases, picked, strict=True):
        assert case.error is None
        assert [r.name for r in case.results] == [e.name for e in dataset.evaluators_for(asked)]
        assert case.usage is not None
        assert case.usage.output_tokens > 0
        assert case.cost == 0.0  # in-process: free
        assert isinstance(case.output, str)
    summary = report.summary()
    assert (summary.cases, summary.cost) == (2, 0.0)
