"""Datasets of cases: made in Python, or loaded from YAML, JSON or a Python file.

```python
ds = Dataset("arith", [Case("12x7", "What is 12*7?", expected="84")], evaluators=[Contains()])
report = ds.evaluate_sync(agent)
```

A file holds the same fields; evaluators are written as specs (`{type: contains, value: "84"}`,
see `parley.evals.evaluators`):

```yaml
name: arith
evaluators: [{type: contains}]
cases:
  - name: 12x7
    inputs: What is 12*7?
    expected: "84"
    evaluators: [{type: called_tool, tool: python}]
```

Which evaluators judge a case: the dataset's, then the case's own. When the dataset names none,
a case with an `expected` is judged first by `Contains` when `expected` is text and by
`Equals` otherwise (`default_evaluator`), then by its own.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from parley._sync import run_sync
from parley.errors import ConfigurationError
from parley.evals.evaluators import Evaluator, as_evaluator, default_evaluator, registered

if TYPE_CHECKING:
    from parley.evals.report import EvalReport
    from parley.evals.runner import EvaluateOptions, Target

__all__ = ["Case", "Dataset", "DatasetError", "EvaluatorInput"]

EvaluatorInput = Evaluator | Mapping[str, Any] | str | Callable[..., Any]
"""What a dataset or a case takes as an evaluator: one, a spec, a type name, or a function."""

_UNSET: Any = object()
_SUFFIXES = (".yaml", ".yml", ".json", ".py")


class DatasetError(ConfigurationError):
    """A dataset file cannot be read, or is not a valid dataset.

    The message names the file, then each problem: which case, which field, what is wrong.
    """


def _evaluators(values: Any) -> list[Evaluator]:
    if values is None:
        return []
    # A list or a tuple first: the ABC checks cost more than the rest of a case's validation.
    if not isinstance(values, list | tuple) and (
        isinstance(values, Mapping | str) or not isinstance(values, Sequence)
    ):
        values = [values]
    return [_evaluator(index, value) for index, value in enumerate(values)]


def _evaluator(index: int, value: Any) -> Evaluator:
    """One evaluator of a list; a bad spec's error names its place and type."""
    try:
        return as_evaluator(value)
    except ValidationError as exc:
        kind = value.get("type") if isinstance(value, Mapping) else type(value).__name__
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'spec'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"evaluator {index + 1} ({kind}): {problems}") from None


def _json_schema(schema: Any) -> dict[str, Any] | None:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if schema is None or isinstance(schema, dict):
        return schema
    raise ValueError("output_schema is a JSON schema (a mapping) or a pydantic model class")


class Case(BaseModel):
    """One question for the target, and what a good answer is.

    Attributes:
        name: Unique in its dataset (the report's rows and comparisons go by it).
        inputs: What the target is given: a question (text), a `Msg` or a list of them for an
            agent or a model, any JSON-able value for a function.
        expected: The expected output, for the evaluators that compare with it.
        metadata: Anything to keep with the case (a category, a difficulty); in the report.
        evaluators: Evaluators of this case only, after the dataset's.
        output_schema: A JSON schema (or pydantic model) the answer must follow: an agent or
            a model is then asked for structured output (default: the dataset's).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    inputs: Any
    expected: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    evaluators: list[Evaluator] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = None

    def __init__(
        self,
        name: str = _UNSET,
        inputs: Any = _UNSET,
        expected: Any = None,
        metadata: Mapping[str, Any] | None = None,
        evaluators: Sequence[EvaluatorInput] = (),
        **fields: Any,
    ) -> None:
        given = {k: v for k, v in (("name", name), ("inputs", inputs)) if v is not _UNSET}
        super().__init__(
            **given,
            expected=expected,
            metadata=dict(metadata or {}),
            evaluators=evaluators,
            **fields,
        )

    _as_evaluators = field_validator("evaluators", mode="before")(_evaluators)

    @field_validator("output_schema", mode="before")
    @classmethod
    def _schema(cls, schema: Any) -> dict[str, Any] | None:
        return _json_schema(schema)

    def to_data(self) -> dict[str, Any]:
        """The case as a dataset file writes it (empty fields left out)."""
        data: dict[str, Any] = {"name": self.name, "inputs": _jsonable(self.inputs)}
        if self.expected is not None:
            data["expected"] = _jsonable(self.expected)
        if self.metadata:
            data["metadata"] = self.metadata
        if self.evaluators:
            data["evaluators"] = [e.to_spec() for e in self.evaluators]
        if self.output_schema is not None:
            data["output_schema"] = self.output_schema
        return data


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


class Dataset(BaseModel):
    """Named cases, and the evaluators that judge every one of them.

    Attributes:
        name: The dataset's name (the report's title).
        cases: The cases, in order; their names must be unique.
        evaluators: Evaluators of every case (each may add its own).
        output_schema: A JSON schema (or pydantic model) every answer must follow; a case's
            own wins.
        description: What the dataset measures.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    cases: list[Case] = Field(default_factory=list)
    evaluators: list[Evaluator] = Field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    description: str = ""

    def __init__(
        self,
        name: str = _UNSET,
        cases: Sequence[Case | Mapping[str, Any]] = (),
        evaluators: Sequence[EvaluatorInput] = (),
        **fields: Any,
    ) -> None:
        given = {"name": name} if name is not _UNSET else {}
        super().__init__(**given, cases=list(cases), evaluators=evaluators, **fields)

    _as_evaluators = field_validator("evaluators", mode="before")(_evaluators)

    @field_validator("output_schema", mode="before")
    @classmethod
    def _schema(cls, schema: Any) -> dict[str, Any] | None:
        return _json_schema(schema)

    @field_validator("cases", mode="before")
    @classmethod
    def _named(cls, cases: Any) -> Any:
        """A case of a file without a `name` is named by its place: `case 3`."""
        if not isinstance(cases, list):
            return cases
        return [
            {**case, "name": f"case {i + 1}"}
            if isinstance(case, Mapping) and "name" not in case
            else case
            for i, case in enumerate(cases)
        ]

    @model_validator(mode="after")
    def _unique(self) -> Dataset:
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise ValueError(f"two cases are named {case.name!r}: case names must be unique")
            seen.add(case.name)
        return self

    def case(self, name: str) -> Case:
        """The case called `name`.

        Raises:
            KeyError: No case has that name.
        """
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(f"no case {name!r} in dataset {self.name!r}")

    def evaluators_for(self, case: Case) -> list[Evaluator]:
        """What judges `case`: the dataset's evaluators, then its own.

        When the dataset names none and the case has an `expected`, the default evaluator
        (`Contains` for text, `Equals` otherwise) comes first.
        """
        shared = list(self.evaluators)
        if not shared and case.expected is not None:
            shared = [default_evaluator(case.expected)]
        return [*shared, *case.evaluators]

    def schema_for(self, case: Case) -> dict[str, Any] | None:
        """The JSON schema `case`'s answer must follow (its own, else the dataset's)."""
        return case.output_schema if case.output_schema is not None else self.output_schema

    # -- running ----------------------------------------------------------------------------

    async def evaluate(self, target: Target, **options: Unpack[EvaluateOptions]) -> EvalReport:
        """Run every case over `target` and judge it; see `parley.evals.runner.evaluate`."""
        from parley.evals.runner import evaluate  # noqa: PLC0415

        return await evaluate(self, target, **options)

    def evaluate_sync(self, target: Target, **options: Unpack[EvaluateOptions]) -> EvalReport:
        """`evaluate`, from synchronous code."""
        return run_sync(self.evaluate(target, **options))

    # -- files ------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Dataset:
        """A dataset from a YAML or JSON file, or a Python file that defines `dataset`.

        A file without a `name` takes its own name (without the suffix).

        Raises:
            DatasetError: The file is missing or unreadable, or not a valid dataset: the message
                names the case and the field.
        """
        path = Path(path)
        if path.suffix not in _SUFFIXES:
            raise DatasetError(f"{path}: a dataset is a .yaml, .yml, .json or .py file")
        if not path.is_file():
            raise DatasetError(f"{path}: no such file")
        if path.suffix == ".py":
            return _load_python(path)
        data = _read_data(path)
        data.setdefault("name", path.stem)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise DatasetError(f"{path} is not a valid dataset:\n{_problems(exc, data)}") from None

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, source: str = "dataset") -> Dataset:
        """A dataset from its file form (a dict as YAML or JSON gives it).

        Raises:
            DatasetError: Not a valid dataset (which case, which field, what is wrong).
        """
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise DatasetError(
                f"{source} is not a valid dataset:\n{_problems(exc, data)}"
            ) from None

    def to_data(self) -> dict[str, Any]:
        """The dataset as its file holds it (what `from_data` reads back).

        Raises:
            UserError: An evaluator holds what a file cannot (a function, a model object).
        """
        data: dict[str, Any] = {"name": self.name}
        if self.description:
            data["description"] = self.description
        if self.output_schema is not None:
            data["output_schema"] = self.output_schema
        if self.evaluators:
            data["evaluators"] = [e.to_spec() for e in self.evaluators]
        data["cases"] = [case.to_data() for case in self.cases]
        return data

    @staticmethod
    def file_schema() -> dict[str, Any]:
        """The JSON schema of a dataset file, for an editor's completion and checks.

        Evaluator specs are those of the registered types (`registered()`), a type's name
        alone, or its fields with `type`.
        """
        specs = [cls.spec_schema() for _, cls in sorted(registered().items())]
        evaluators = {
            "type": "array",
            "items": {"anyOf": [{"enum": sorted(registered())}, *specs]},
        }
        case = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "inputs": {"description": "A question, messages, or any JSON value."},
                "expected": {"description": "The expected output."},
                "metadata": {"type": "object"},
                "evaluators": evaluators,
                "output_schema": {"type": "object"},
            },
            "required": ["inputs"],
            "additionalProperties": False,
        }
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "parley evaluation dataset",
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "description": {"type": "string"},
                "output_schema": {"type": "object"},
                "evaluators": evaluators,
                "cases": {"type": "array", "items": case},
            },
            "required": ["cases"],
            "additionalProperties": False,
        }

    def to_file(self, path: str | Path, *, schema: bool = False) -> Path:
        """Write the dataset as YAML (`.yaml`, `.yml`) or JSON (`.json`); returns the path.

        Args:
            path: Where.
            schema: Also write `file_schema()` beside it (`NAME_schema.json`), and point a YAML
                file at it (the `yaml-language-server` comment editors read).

        Raises:
            UserError: Another suffix, or an evaluator a file cannot hold.
        """
        path = Path(path)
        data = self.to_data()
        if path.suffix in (".yaml", ".yml"):
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
            if schema:
                text = f"# yaml-language-server: $schema={path.stem}_schema.json\n{text}"
        elif path.suffix == ".json":
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        else:
            raise DatasetError(f"{path}: write a dataset to a .yaml, .yml or .json file")
        if schema:
            written = json.dumps(self.file_schema(), indent=2) + "\n"
            path.with_name(f"{path.stem}_schema.json").write_text(written, encoding="utf-8")
        path.write_text(text, encoding="utf-8")
        return path


def _read_data(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot be read ({exc})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise DatasetError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise DatasetError(
            f"{path}: a dataset is a mapping with `cases` (and `name`, `evaluators`), "
            f"not {type(data).__name__}"
        )
    return data


def _load_python(path: Path) -> Dataset:
    module_name = f"_parley_dataset_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DatasetError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pydantic look their module up
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise DatasetError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(module_name, None)
    found = getattr(module, "dataset", None)
    if not isinstance(found, Dataset):
        raise DatasetError(
            f"{path}: define a `dataset = Dataset(...)` at the top level "
            f"(found {type(found).__name__ if found is not None else 'none'})"
        )
    return found


def _problems(error: ValidationError, data: Mapping[str, Any]) -> str:
    """Each problem on a line: where (the case by its number and name, then the field), what."""
    cases = data.get("cases")
    lines = []
    for problem in error.errors():
        where = list(problem["loc"])
        if len(where) >= 2 and where[0] == "cases" and isinstance(where[1], int):
            index = where[1]
            case = cases[index] if isinstance(cases, list) and index < len(cases) else None
            label = f"case {index + 1}"
            if isinstance(case, Mapping) and isinstance(case.get("name"), str):
                label += f" ({case['name']!r})"
            where = [label, *where[2:]]
        path = ".".join(str(part) for part in where) or "the dataset"
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"  {path}: {message}")
    return "\n".join(lines)
