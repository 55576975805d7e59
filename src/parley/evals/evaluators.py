"""Evaluators: each judges one case's run and gives a verdict.

An evaluator is a small pydantic model with an async `evaluate(ctx)` that returns an
`EvaluatorResult`, a bool (passed or not) or a float (a score from 0 to 1, passed at
`threshold` or above). Any function of the context works as one too (`FunctionEvaluator`
wraps it: `evaluators=[lambda ctx: "84" in ctx.text]`).

The built-in ones, by their `type` (the name a YAML or JSON dataset gives them):

| type | class | passes when |
|---|---|---|
| `equals` | `Equals` | the output equals `value` (default: the case's `expected`) |
| `contains` | `Contains` | the output contains `value` (one text, or all/any of several) |
| `regex` | `Regex` | the output matches `pattern` |
| `schema` | `MatchesSchema` | the output (JSON text or a value) validates against a JSON schema |
| `called_tool` | `CalledTool` | the target called tool `name` with matching arguments |
| `retrieval_hit` | `RetrievalHit` | an expected passage is among the first `k` retrieved |
| `max_cost` | `MaxCost` | the case's cost (or tokens) stays under a bound |
| `max_latency` | `MaxLatency` | the target answered within `seconds` |
| `judge` | `Judge` | a model, given a rubric, says the answer passes |

In YAML: `{type: contains, value: "84", case_sensitive: true}`; `Evaluator.from_spec` builds
the class from that, and `to_spec()` writes it back. A subclass of your own that sets `type`
is registered under that name as soon as its module is imported, so files may name it too.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from parley.errors import ConfigurationError, UserError
from parley.evals._context import EvalContext, output_text
from parley.evals.report import EvaluatorResult, ToolCallRecord

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = [
    "CalledTool",
    "Contains",
    "Equals",
    "Evaluator",
    "EvaluatorOutput",
    "FunctionEvaluator",
    "Judge",
    "MatchesSchema",
    "MaxCost",
    "MaxLatency",
    "Regex",
    "RetrievalHit",
    "Verdict",
    "as_evaluator",
    "default_evaluator",
    "registered",
    "run_evaluator",
]

ModelClass = type[BaseModel]

EvaluatorOutput = EvaluatorResult | bool | float
"""What `evaluate` may return: a full verdict, passed or not, or a score from 0 to 1."""

_REGISTRY: dict[str, type[Evaluator]] = {}


class Evaluator(BaseModel):
    """The base of evaluators: subclass it, set `type`, and write `evaluate`.

    Attributes:
        name: The name the report shows (default: the type, with its main argument).
        threshold: The score at or above which a float verdict passes.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    type: ClassVar[str] = ""
    """The evaluator's name in a dataset file (`{type: contains, ...}`); "" for none."""

    name: str = ""
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.type:
            _REGISTRY[cls.type] = cls

    def model_post_init(self, context: Any, /) -> None:
        """Name it after its type when no name is given."""
        if not self.name:
            self.name = self.default_name()

    def default_name(self) -> str:
        """The name when none is given: the type (or the class's name)."""
        return self.type or type(self).__name__

    async def evaluate(self, ctx: EvalContext) -> EvaluatorOutput:
        """Judge the case's run."""
        raise NotImplementedError

    # -- specs ------------------------------------------------------------------------------

    @staticmethod
    def from_spec(spec: Mapping[str, Any] | str | Evaluator) -> Evaluator:
        """The evaluator a dataset file describes: `{type: contains, value: "84"}` or `"equals"`.

        Raises:
            ConfigurationError: The type is unknown (the known ones are named).
            pydantic.ValidationError: A field is missing or of the wrong kind.
        """
        if isinstance(spec, Evaluator):
            return spec
        if isinstance(spec, str):
            spec = {"type": spec}
        fields = dict(spec)
        kind = fields.pop("type", None)
        cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
        if cls is None:
            known = ", ".join(sorted(_REGISTRY))
            raise ConfigurationError(f"unknown evaluator type {kind!r}: use one of {known}")
        return cls.model_validate(fields)

    @classmethod
    def spec_schema(cls) -> dict[str, Any]:
        """The JSON schema of this evaluator's spec in a file (`type` and its fields)."""
        schema = cls.model_json_schema()
        properties = {"type": {"const": cls.type}, **schema.get("properties", {})}
        return {
            "type": "object",
            "title": cls.__name__,
            "description": (cls.__doc__ or "").strip().split("\n", 1)[0],
            "properties": properties,
            "required": ["type", *schema.get("required", [])],
            "additionalProperties": False,
        }

    def to_spec(self) -> dict[str, Any]:
        """This evaluator as a dataset file writes it (what `from_spec` reads back).

        Raises:
            UserError: It has no `type`, or holds a value a file cannot (a function, a model
                object).
        """
        if not self.type:
            raise UserError(f"{type(self).__name__} has no `type`: it cannot be written to a file")
        fields = self.model_dump(mode="python", exclude_defaults=True)
        if fields.get("name") == self.default_name():
            del fields["name"]
        try:
            json.dumps(fields)
        except (TypeError, ValueError):
            raise UserError(
                f"evaluator {self.name!r} holds a value a dataset file cannot keep "
                "(a function or a model object): build it in Python instead"
            ) from None
        return {"type": self.type, **fields}


def registered() -> dict[str, type[Evaluator]]:
    """The evaluator types a dataset file may name, with their classes."""
    return dict(_REGISTRY)


class FunctionEvaluator(Evaluator):
    """A function of the context as an evaluator: `f(ctx)`, sync or async.

    Attributes:
        function: Returns an `EvaluatorResult`, a bool or a score.
    """

    function: Callable[[EvalContext], Any]

    def default_name(self) -> str:
        """The function's name."""
        return getattr(self.function, "__name__", "function")

    async def evaluate(self, ctx: EvalContext) -> EvaluatorOutput:
        """Call the function."""
        result = self.function(ctx)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, EvaluatorResult | bool | float | int):
            raise TypeError(
                f"evaluator {self.name!r} returned {type(result).__name__}: "
                "return an EvaluatorResult, a bool or a float"
            )
        return result


def as_evaluator(value: Evaluator | Mapping[str, Any] | str | Callable[..., Any]) -> Evaluator:
    """An evaluator from what a dataset takes: one, a spec, a type name or a function."""
    if isinstance(value, Evaluator):
        return value
    if isinstance(value, Mapping | str):
        return Evaluator.from_spec(value)
    if callable(value):
        return FunctionEvaluator(function=value)
    raise UserError(
        f"not an evaluator: {value!r} (give an Evaluator, a spec such as "
        "{'type': 'contains', 'value': '84'}, or a function of the context)"
    )


def default_evaluator(expected: Any) -> Evaluator:
    """What judges a case with an `expected` and no evaluator of its own.

    `Contains` for text (a model's answer rarely is the bare value), `Equals` for the rest.
    """
    return Contains() if isinstance(expected, str) else Equals()


async def run_evaluator(evaluator: Evaluator, ctx: EvalContext) -> EvaluatorResult:
    """Run `evaluator` on `ctx`, its answer as a full verdict.

    An evaluator that raises fails the case with the error as its reason: a broken check is
    not a pass.
    """
    try:
        verdict = await evaluator.evaluate(ctx)
    except Exception as error:  # any failure of the check is its verdict, not the run's end
        # The first line says what failed; pydantic's details and links would swamp a table.
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        reason = f"evaluator raised {type(error).__name__}: {first}"[:300]
        return EvaluatorResult(name=evaluator.name, passed=False, score=0.0, reason=reason)
    return _verdict(evaluator, verdict)


def _verdict(evaluator: Evaluator, verdict: EvaluatorOutput) -> EvaluatorResult:
    if isinstance(verdict, EvaluatorResult):
        return verdict
    if isinstance(verdict, bool):
        reason = None if verdict else "failed"
        return EvaluatorResult(
            name=evaluator.name, passed=verdict, score=float(verdict), reason=reason
        )
    score = min(1.0, max(0.0, float(verdict)))
    passed = score >= evaluator.threshold
    reason = None if passed else f"score {score:.2f} below the threshold {evaluator.threshold}"
    return EvaluatorResult(name=evaluator.name, passed=passed, score=score, reason=reason)


def _result(
    evaluator: Evaluator, passed: bool, reason: str, score: float | None = None
) -> EvaluatorResult:
    """A verdict: `reason` kept on a failure only (a pass needs no explanation)."""
    return EvaluatorResult(
        name=evaluator.name,
        passed=passed,
        score=float(passed) if score is None else score,
        reason=None if passed else reason,
    )


_UNSET: Any = object()
"""A required argument left out: pydantic then names the missing field (from a file too)."""


def _given(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not _UNSET}


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else output_text(value)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _plain(value: Any) -> Any:
    """A value as JSON data (a pydantic model dumped), for comparing."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


# -- output checks ------------------------------------------------------------------------------


class Equals(Evaluator):
    """The output equals `value` (default: the case's `expected`).

    Text is compared with surrounding whitespace stripped; a pydantic model as its JSON data.

    Args:
        value: What the output must equal; None: the case's `expected`.
    """

    type: ClassVar[str] = "equals"
    value: Any = None

    def __init__(self, value: Any = None, **fields: Any) -> None:
        super().__init__(**_given(value=value), **fields)

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Compare."""
        wanted = _plain(ctx.expected if self.value is None else self.value)
        got = _plain(ctx.output)
        if isinstance(wanted, str) and isinstance(got, str):
            wanted, got = wanted.strip(), got.strip()
        return _result(self, got == wanted, f"expected {_short(wanted)}, got {_short(got)}")


class Contains(Evaluator):
    """The output contains `value`: a text, or several (all of them, or any with `any`).

    Non-text outputs are searched as their JSON text.

    Attributes:
        value: The text or texts to find; None: the case's `expected`.
        case_sensitive: Whether case matters (it does not by default).
        any: Pass when one of several values is found (default: all must be).
    """

    type: ClassVar[str] = "contains"
    value: str | list[str] | None = None
    case_sensitive: bool = False
    any: bool = False

    def __init__(self, value: str | Sequence[str] | None = None, **fields: Any) -> None:
        if value is not None and not isinstance(value, str):
            value = list(value)
        super().__init__(**_given(value=value), **fields)

    def default_name(self) -> str:
        """`contains`."""
        return "contains"

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Search the output."""
        wanted = self.value if self.value is not None else ctx.expected
        if wanted is None:
            raise UserError("Contains has no value and the case no `expected`")
        values = [wanted] if isinstance(wanted, str) else [str(v) for v in wanted]
        text = ctx.text
        if not self.case_sensitive:
            text = text.casefold()
        found = [v for v in values if (v if self.case_sensitive else v.casefold()) in text]
        passed = bool(found) if self.any else len(found) == len(values)
        missing = [v for v in values if v not in found]
        which = "any of" if self.any else "all of"
        want = _short(values[0]) if len(values) == 1 else f"{which} {values!r}"
        reason = f"expected {want}; missing {missing!r} in {_short(ctx.output)}"
        return _result(self, passed, reason, score=len(found) / len(values))


class Regex(Evaluator):
    """The output (as text) matches the regular expression `pattern` (anywhere in it).

    Attributes:
        pattern: The expression (Python's `re` syntax).
        ignore_case: Match regardless of case.
        full: The whole output must match (stripped of surrounding whitespace).
    """

    type: ClassVar[str] = "regex"
    pattern: str
    ignore_case: bool = False
    full: bool = False

    def __init__(self, pattern: str = _UNSET, **fields: Any) -> None:
        super().__init__(**_given(pattern=pattern), **fields)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return pattern

    def default_name(self) -> str:
        """`regex`."""
        return "regex"

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Match."""
        flags = re.IGNORECASE if self.ignore_case else 0
        text = ctx.text
        match = (
            re.fullmatch(self.pattern, text.strip(), flags)
            if self.full
            else re.search(self.pattern, text, flags)
        )
        reason = f"{_short(ctx.output)} does not match /{self.pattern}/"
        return _result(self, match is not None, reason)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _parse_json(text: str) -> Any:
    """JSON from an answer's text: the whole of it, or the first fenced block."""
    try:
        return json.loads(text)
    except ValueError:
        fenced = _FENCE.search(text)
        if fenced is None:
            raise
        return json.loads(fenced.group(1))


class MatchesSchema(Evaluator):
    """The output validates against a JSON schema (text output is parsed as JSON first).

    Args:
        schema: The JSON schema, or a pydantic model class; None: the schema the case or the
            dataset asked the target to follow (`output_schema`).
    """

    type: ClassVar[str] = "schema"
    json_schema: dict[str, Any] | None = None

    def __init__(self, schema: dict[str, Any] | ModelClass | None = None, **fields: Any) -> None:
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            schema = schema.model_json_schema()
        if schema is not None:
            fields["json_schema"] = schema
        super().__init__(**fields)

    def default_name(self) -> str:
        """`schema`."""
        return "schema"

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Parse and validate."""
        schema = self.json_schema if self.json_schema is not None else ctx.output_schema
        if schema is None:
            raise UserError("MatchesSchema has no schema and the dataset asks for none")
        data = _plain(ctx.output)
        if isinstance(data, str):
            try:
                data = _parse_json(data)
            except ValueError as exc:
                return _result(self, False, f"the output is not JSON ({exc}): {_short(data)}")
        try:
            jsonschema.validate(data, schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "the output"
            return _result(self, False, f"{where}: {exc.message}")
        return _result(self, True, "")

    @classmethod
    def spec_schema(cls) -> dict[str, Any]:
        """The spec's JSON schema (the schema under `schema`, as files write it)."""
        schema = super().spec_schema()
        schema["properties"]["schema"] = schema["properties"].pop("json_schema")
        return schema

    def to_spec(self) -> dict[str, Any]:
        """As a file writes it (the schema under `schema`)."""
        spec = super().to_spec()
        if "json_schema" in spec:
            spec["schema"] = spec.pop("json_schema")
        return spec


# -- how the target got there -------------------------------------------------------------------


def _matches(wanted: Any, got: Any) -> bool:
    """Whether a tool call's argument fits what a case asks for.

    A string `re:PATTERN` is searched for in the value's text; a function is called with the
    value; a dict matches a dict holding at least its keys (recursively); else equality.
    """
    if isinstance(wanted, str) and wanted.startswith("re:"):
        return re.search(wanted[3:], got if isinstance(got, str) else json.dumps(got)) is not None
    if callable(wanted):
        return bool(wanted(got))
    if isinstance(wanted, Mapping):
        return isinstance(got, Mapping) and all(
            key in got and _matches(value, got[key]) for key, value in wanted.items()
        )
    return bool(wanted == got)


def _arguments(call: ToolCallRecord) -> Any:
    if isinstance(call.arguments, str):
        try:
            return json.loads(call.arguments)
        except ValueError:
            return call.arguments
    return call.arguments


class CalledTool(Evaluator):
    """The target called tool `name` with arguments matching `arguments`.

    `arguments` needs only the keys it names (other arguments may be anything); a value may be
    `"re:PATTERN"` (searched for in the argument's text) or, in Python, a function of the
    argument returning a bool. `times` counts the matching calls exactly (0: the tool must
    not be called so); `after` asks for a call of that tool before the first match. `name`
    `"*"` is any tool: `CalledTool("*", times=0)` passes when no tool was called at all.

    Attributes:
        tool: The tool's name, or `*`.
        arguments: What the call's arguments must hold.
        times: How many matching calls exactly; None: at least one.
        after: A tool that must have been called before the matching call.
    """

    type: ClassVar[str] = "called_tool"
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    times: int | None = Field(default=None, ge=0)
    after: str | None = None

    def __init__(
        self, tool: str = _UNSET, arguments: Mapping[str, Any] | None = None, **fields: Any
    ) -> None:
        super().__init__(**_given(tool=tool, arguments=dict(arguments or {})), **fields)

    def default_name(self) -> str:
        """`called_tool(NAME)`."""
        return f"called_tool({self.tool})"

    def _fits(self, call: ToolCallRecord) -> bool:
        return (self.tool in ("*", call.name)) and _matches(self.arguments, _arguments(call))

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Look through the calls made."""
        calls = ctx.tool_calls
        matching = [i for i, call in enumerate(calls) if self._fits(call)]
        made = [f"{c.name}({json.dumps(_arguments(c), default=str)})" for c in calls] or "none"
        wanted = f"{self.tool}" + (f" with {self.arguments}" if self.arguments else "")
        if self.times is not None:
            passed = len(matching) == self.times
            reason = f"expected {self.times} call(s) of {wanted}, got {len(matching)}; made: {made}"
            return _result(self, passed, reason)
        if not matching:
            return _result(self, False, f"expected a call of {wanted}; made: {made}")
        if self.after is not None:
            before = {call.name for call in calls[: matching[0]]}
            if self.after not in before:
                return _result(self, False, f"{self.tool} was not called after {self.after}")
        return _result(self, True, "")


class RetrievalHit(Evaluator):
    """Expected passages are among the first `k` retrieved (hit@k).

    Passages carry their source line (a file name, a URL, an id, then maybe `, page 2` or
    `: heading`) above their text. With `where="source"` an expected value is found when it
    is a passage's source (case-insensitive); with `"text"` when it occurs in a passage's
    text; with `"any"` (the default) in either. Match ids by source: a passage that only
    mentions `shutil.rmtree` in its text is not the `shutil.rmtree` passage. The score is the
    share of expected ones found (recall@k); it passes on one found, or on all with `all`.

    Attributes:
        expected: The ids or texts to find; None: the case's `expected` (a text or a list).
        k: How many of the first passages count; None: all retrieved.
        all: Pass only when every expected one is found.
        where: What an expected value is matched against: `source`, `text` or `any`.
    """

    type: ClassVar[str] = "retrieval_hit"
    expected: list[str] | None = None
    k: int | None = Field(default=None, ge=1)
    all: bool = False
    where: Literal["any", "source", "text"] = "any"

    def __init__(self, expected: str | Sequence[str] | None = None, **fields: Any) -> None:
        if isinstance(expected, str):
            expected = [expected]
        listed = list(expected) if expected is not None else None
        super().__init__(**_given(expected=listed), **fields)

    def default_name(self) -> str:
        """`retrieval_hit` (with `@k`)."""
        return f"retrieval_hit@{self.k}" if self.k else "retrieval_hit"

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Look through the passages retrieved."""
        wanted = self.expected if self.expected is not None else ctx.expected
        if isinstance(wanted, str):
            wanted = [wanted]
        if not wanted:
            raise UserError("RetrievalHit has nothing to find: give `expected`")
        passages = [p.casefold() for p in ctx.retrieved[: self.k]]
        found = [w for w in wanted if any(self._matches(str(w).casefold(), p) for p in passages)]
        passed = len(found) == len(wanted) if self.all else bool(found)
        top = f"the first {self.k}" if self.k else "the"
        reason = (
            f"found {len(found)} of {list(wanted)!r} in {top} {len(ctx.retrieved)} "
            "passage(s) retrieved"
        )
        return _result(self, passed, reason, score=len(found) / len(wanted))

    def _matches(self, wanted: str, passage: str) -> bool:
        source, _, text = passage.partition("\n")
        # A source line is the source, then maybe its place: `manual.pdf, page 2: Cleaning`.
        by_source = source == wanted or source.startswith((f"{wanted}, ", f"{wanted}: "))
        if self.where == "source":
            return by_source
        if self.where == "text":
            return wanted in text
        return by_source or wanted in passage


class MaxCost(Evaluator):
    """The case's model calls cost at most `cost`, and/or used at most `tokens`.

    A bound on cost fails when the cost is unknown (an unpriced model): bound the tokens
    instead for those.

    Attributes:
        cost: The most the case may cost (the model card's currency).
        tokens: The most tokens (input and output) it may use.
    """

    type: ClassVar[str] = "max_cost"
    cost: float | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> MaxCost:
        if self.cost is None and self.tokens is None:
            raise ValueError("MaxCost needs a bound: cost=... or tokens=...")
        return self

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Compare the usage with the bounds."""
        usage = ctx.usage
        if self.cost is not None:
            if usage is None or usage.cost is None:
                return _result(self, False, "the cost is unknown (the model has no price)")
            if usage.cost > self.cost:
                return _result(self, False, f"cost {usage.cost:.6g} over {self.cost:g}")
        if self.tokens is not None:
            used = usage.total_tokens if usage is not None else None
            if used is None:
                return _result(self, False, "the tokens used are unknown")
            if used > self.tokens:
                return _result(self, False, f"{used} tokens over {self.tokens}")
        return _result(self, True, "")


class MaxLatency(Evaluator):
    """The target answered within `seconds` (the case's last attempt).

    Args:
        seconds: The longest it may take.
    """

    type: ClassVar[str] = "max_latency"
    seconds: float = Field(gt=0)

    def __init__(self, seconds: float = _UNSET, **fields: Any) -> None:
        super().__init__(**_given(seconds=seconds), **fields)

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Compare the duration with the bound."""
        reason = f"took {ctx.duration:.3f}s, over {self.seconds:g}s"
        return _result(self, ctx.duration <= self.seconds, reason)


# -- a model as the judge -----------------------------------------------------------------------


class Verdict(BaseModel):
    """What a judging model answers."""

    passed: bool = Field(description="Whether the answer meets the rubric.")
    score: float = Field(ge=0.0, le=1.0, description="How well, from 0 (not at all) to 1.")
    reason: str = Field(description="Why, in one sentence.")


_JUDGE_PROMPT = (
    "You grade an answer against a rubric. Read the rubric, the question and the answer, "
    "then give your verdict: passed (true or false), a score from 0 to 1, and the reason "
    "in one sentence."
)


class Judge(Evaluator):
    """A model grades the answer against a rubric: it answers `{passed, score, reason}`.

    The judge's own usage is counted apart from the target's (the case's judge usage).

    Attributes:
        rubric: What a good answer does, in plain words.
        model: Any parley chat model, or a spec such as `openai:gpt-4o-mini`; None: the
            run's `judge_model`.
        include_inputs: Show the judge the case's inputs.
        include_expected: Show the judge the case's expected output, when it has one.
    """

    type: ClassVar[str] = "judge"
    rubric: str
    model: Any = None
    include_inputs: bool = True
    include_expected: bool = True

    def __init__(
        self, rubric: str = _UNSET, model: ChatModel | str | None = None, **fields: Any
    ) -> None:
        super().__init__(**_given(rubric=rubric, model=model), **fields)

    @field_validator("model")
    @classmethod
    def _a_model(cls, model: Any) -> Any:
        from parley.models.base import ChatModel  # noqa: PLC0415

        if model is None or isinstance(model, str | ChatModel):
            return model
        raise ValueError(f"a judge's model is a ChatModel or a spec, not {type(model).__name__}")

    def _chat_model(self, ctx: EvalContext) -> ChatModel:
        from parley.models.spec import model_from_spec  # noqa: PLC0415

        model = self.model if self.model is not None else ctx.judge_model
        if model is None:
            raise UserError("Judge needs a model: Judge(rubric, model=...) or judge_model=...")
        if isinstance(model, str):
            model = self.model = model_from_spec(model)
        return model

    def _prompt(self, ctx: EvalContext) -> str:
        parts = [f"Rubric:\n{self.rubric}"]
        if self.include_inputs:
            parts.append(f"Question:\n{output_text(ctx.inputs)}")
        if self.include_expected and ctx.expected is not None:
            parts.append(f"Expected answer:\n{output_text(ctx.expected)}")
        parts.append(f"Answer to grade:\n{ctx.text}")
        return "\n\n".join(parts)

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Ask the model."""
        from parley.messages import Msg  # noqa: PLC0415

        model = self._chat_model(ctx)
        messages = [Msg.system(_JUDGE_PROMPT), Msg.user(self._prompt(ctx))]
        response = await model.generate_structured_output(messages, Verdict)
        ctx.add_judge_usage(response.usage)
        try:
            verdict = Verdict.model_validate(response.content)
        except ValidationError as exc:  # a schema-less model may still slip
            raise ValueError(f"the judge's verdict is malformed: {exc}") from None
        return EvaluatorResult(
            name=self.name,
            passed=verdict.passed,
            score=verdict.score,
            reason=verdict.reason or None,
        )

    def to_spec(self) -> dict[str, Any]:
        """As a file writes it (the model as its spec string)."""
        if self.model is not None and not isinstance(self.model, str):
            raise UserError(
                f"judge {self.name!r} holds a model object: give its spec "
                "(Judge(rubric, model='openai:gpt-4o-mini')) to write it to a file"
            )
        return super().to_spec()
