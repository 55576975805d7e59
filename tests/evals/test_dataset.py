"""Datasets: built in Python, loaded from YAML, JSON and Python files, written back, refused
with a message naming the case and the field when malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from parley.evals import (
    CalledTool,
    Case,
    Contains,
    Dataset,
    DatasetError,
    Equals,
    Evaluator,
    FunctionEvaluator,
    Judge,
    MatchesSchema,
    Regex,
)
from parley.messages import Msg

YAML = """\
name: arith
description: Sums and products.
evaluators:
  - type: contains
cases:
  - name: 12x7
    inputs: What is 12*7?
    expected: "84"
    metadata: {level: easy}
    evaluators:
      - {type: called_tool, tool: python, arguments: {code: "re:12\\\\s*\\\\*\\\\s*7"}}
  - name: hello
    inputs: Say hello.
    evaluators:
      - {type: regex, pattern: "(?i)hello", name: greets}
"""


class Answer(BaseModel):
    value: int


def test_a_case_takes_its_name_and_inputs_positionally() -> None:
    case = Case("12x7", "What is 12*7?", expected="84", metadata={"level": "easy"})
    assert (case.name, case.inputs, case.expected) == ("12x7", "What is 12*7?", "84")
    assert case.metadata == {"level": "easy"}
    assert Case(name="k", inputs={"a": 1}).inputs == {"a": 1}


def test_evaluators_are_taken_as_objects_specs_names_or_functions() -> None:
    def starts_right(ctx: object) -> bool:
        return True

    ds = Dataset(
        "d",
        [Case("c", "q", evaluators=[{"type": "regex", "pattern": "x"}, "equals"])],
        evaluators=[Contains("84"), starts_right],
    )
    assert isinstance(ds.evaluators[0], Contains)
    assert isinstance(ds.evaluators[1], FunctionEvaluator)
    assert ds.evaluators[1].name == "starts_right"
    assert [type(e) for e in ds.cases[0].evaluators] == [Regex, Equals]


def test_the_default_evaluator_is_contains_for_text_and_equals_for_the_rest() -> None:
    ds = Dataset("d", [Case("t", "q", expected="84"), Case("n", "q", expected=84), Case("x", "q")])
    assert [type(e) for e in ds.evaluators_for(ds.case("t"))] == [Contains]
    assert [type(e) for e in ds.evaluators_for(ds.case("n"))] == [Equals]
    assert ds.evaluators_for(ds.case("x")) == []
    # A case's own evaluators come after the default one.
    own = Dataset("d", [Case("t", "q", expected="84", evaluators=[Regex("8")])])
    assert [type(e) for e in own.evaluators_for(own.cases[0])] == [Contains, Regex]
    # Naming any evaluator replaces the default.
    named = Dataset("d", [Case("t", "q", expected="84")], evaluators=[Regex("8")])
    assert [type(e) for e in named.evaluators_for(named.cases[0])] == [Regex]


def test_duplicate_case_names_are_refused() -> None:
    with pytest.raises(ValidationError, match="two cases are named 'a'"):
        Dataset("d", [Case("a", "q"), Case("b", "q"), Case("a", "r")])


def test_a_pydantic_model_as_output_schema_becomes_its_json_schema() -> None:
    ds = Dataset("d", [Case("c", "q", output_schema=Answer)], output_schema={"type": "object"})
    assert ds.schema_for(ds.cases[0]) == Answer.model_json_schema()
    assert Dataset("d", [Case("c", "q")], output_schema=Answer).schema_for(Case("c", "q")) == (
        Answer.model_json_schema()
    )


def test_yaml_loads_with_its_evaluators(tmp_path: Path) -> None:
    path = tmp_path / "arith.yaml"
    path.write_text(YAML)
    ds = Dataset.load(path)
    assert ds.name == "arith"
    assert ds.description == "Sums and products."
    assert [c.name for c in ds.cases] == ["12x7", "hello"]
    assert ds.cases[0].metadata == {"level": "easy"}
    [called] = ds.cases[0].evaluators
    assert isinstance(called, CalledTool)
    assert called.tool == "python"
    assert called.arguments == {"code": "re:12\\s*\\*\\s*7"}
    [regex] = ds.cases[1].evaluators
    assert isinstance(regex, Regex)
    assert regex.name == "greets"


def test_json_loads_and_a_file_without_a_name_takes_its_own(tmp_path: Path) -> None:
    path = tmp_path / "numbers.json"
    path.write_text(json.dumps({"cases": [{"name": "one", "inputs": {"n": 1}, "expected": 2}]}))
    ds = Dataset.load(path)
    assert ds.name == "numbers"
    assert ds.cases[0].inputs == {"n": 1}
    assert ds.cases[0].expected == 2


def test_a_python_file_exposing_dataset_loads(tmp_path: Path) -> None:
    path = tmp_path / "built.py"
    path.write_text(
        "from parley.evals import Case, Dataset, Contains\n"
        "dataset = Dataset('built', [Case('a', 'q', expected='x')], evaluators=[Contains()])\n"
    )
    ds = Dataset.load(path)
    assert ds.name == "built"
    assert ds.cases[0].expected == "x"


def test_a_python_file_without_dataset_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    with pytest.raises(DatasetError, match=r"empty.py: define a `dataset = Dataset\(...\)`"):
        Dataset.load(path)


def test_round_trip_through_yaml_and_json(tmp_path: Path) -> None:
    ds = Dataset(
        "rt",
        [
            Case("a", "What is 2+2?", expected="4", metadata={"k": 1}, evaluators=[Regex("4")]),
            Case("b", [Msg.user("hi")], evaluators=[CalledTool("add", {"a": 1}, times=1)]),
            Case("c", "json please", output_schema=Answer, evaluators=[MatchesSchema()]),
        ],
        evaluators=[Contains(["x", "y"], any=True), Judge("Polite?", model="openai:gpt-4o-mini")],
        description="round trip",
    )
    for suffix in (".yaml", ".json"):
        back = Dataset.load(ds.to_file(tmp_path / f"rt{suffix}"))
        assert back.to_data() == ds.to_data()
        assert Msg.model_validate(back.cases[1].inputs[0]).text == "hi"


def test_a_function_evaluator_cannot_be_written_to_a_file(tmp_path: Path) -> None:
    ds = Dataset("d", [Case("a", "q")], evaluators=[lambda ctx: True])
    with pytest.raises(Exception, match="has no `type`"):
        ds.to_file(tmp_path / "d.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "cases:\n  - name: ok\n    inputs: q\n  - name: broken\n    expected: 1\n",
            r"case 2 \('broken'\)\.inputs: Field required",
        ),
        (
            "cases:\n  - name: a\n    inputs: q\n    evaluators: [{type: contians}]\n",
            r"case 1 \('a'\)\.evaluators: unknown evaluator type 'contians': use one of "
            r"called_tool, contains",
        ),
        (
            "cases:\n  - name: a\n    inputs: q\n    evaluators: [{type: regex}]\n",
            r"case 1 \('a'\)\.evaluators: evaluator 1 \(regex\): pattern: Field required",
        ),
        (
            "cases:\n  - {name: a, inputs: q}\n  - {name: a, inputs: r}\n",
            "two cases are named 'a'",
        ),
        ("cases:\n  - {name: a, inputs: q, expeted: 1}\n", r"case 1 \('a'\)\.expeted: Extra"),
        ("- just a list\n", "a dataset is a mapping with `cases`"),
        ("cases: [\n", "not valid YAML"),
    ],
)
def test_a_malformed_file_says_which_case_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(DatasetError, match=message) as raised:
        Dataset.load(path)
    assert str(path) in str(raised.value)


def test_a_missing_file_or_an_unknown_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        Dataset.load(tmp_path / "none.yaml")
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(DatasetError, match=r"a \.yaml, \.yml, \.json or \.py file"):
        Dataset.load(tmp_path / "d.txt")


def test_from_spec_builds_each_registered_type() -> None:
    specs = [
        {"type": "equals", "value": 1},
        {"type": "contains", "value": ["a", "b"], "case_sensitive": True},
        {"type": "regex", "pattern": "x"},
        {"type": "schema", "schema": {"type": "object"}},
        {"type": "called_tool", "tool": "add"},
        {"type": "retrieval_hit", "expected": ["doc"], "k": 3},
        {"type": "max_cost", "cost": 0.01},
        {"type": "max_latency", "seconds": 2},
        {"type": "judge", "rubric": "Polite."},
    ]
    for spec in specs:
        evaluator = Evaluator.from_spec(spec)
        assert evaluator.to_spec() == spec
