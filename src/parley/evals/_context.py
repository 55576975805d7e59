"""`EvalContext`: what a target's run of one case left, as the evaluators see it.

The runner fills one per case: a function target that takes two parameters gets it while it
runs (`f(inputs, ctx)`) and may record in it what the runner cannot see itself: the tool
calls it made (`ctx.tool_calls`), the passages it retrieved (`ctx.retrieved`), the usage of
its model calls (`ctx.add_usage(...)`). The evaluators then read the case, the output and
all of that; a `Judge` adds its own usage to `judge_usage`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parley.evals.report import ToolCallRecord
from parley.messages import Msg, Usage

if TYPE_CHECKING:
    from parley.evals.dataset import Case
    from parley.models.base import ChatModel

__all__ = ["EvalContext", "output_text"]


@dataclass
class EvalContext:
    """One case's run: its inputs, what the target answered and how.

    Args:
        case: The case.
        output: What the target answered: text, or a structured value (None before the run,
            or when it failed).
        tool_calls: The tool calls made, in order, with their results.
        retrieved: The passages retrieval tools returned, in order (each a source line and
            its text).
        usage: Tokens and cost of the target's model calls (None when unknown).
        duration: Seconds the target took (the last attempt).
        messages: The conversation of an agent's or a model's run (empty for a function).
        output_schema: The JSON schema the answer was asked to follow, if any.
        judge_model: The model a `Judge` without one of its own uses.
        judge_usage: What the case's judges spent (kept apart from the target's usage).
    """

    case: Case
    output: Any = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)
    usage: Usage | None = None
    duration: float = 0.0
    messages: list[Msg] = field(default_factory=list)
    output_schema: dict[str, Any] | None = None
    judge_model: ChatModel | None = None
    judge_usage: Usage | None = None

    @property
    def inputs(self) -> Any:
        """The case's inputs."""
        return self.case.inputs

    @property
    def expected(self) -> Any:
        """The case's expected output (None when it has none)."""
        return self.case.expected

    @property
    def metadata(self) -> dict[str, Any]:
        """The case's metadata."""
        return self.case.metadata

    @property
    def text(self) -> str:
        """The output as text (structured values as JSON)."""
        return output_text(self.output)

    def add_usage(self, usage: Usage | None) -> None:
        """Count a model call's usage in the case's (a function target calls this)."""
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage

    def add_judge_usage(self, usage: Usage | None) -> None:
        """Count a judge's model call in the case's judge usage."""
        if usage is not None:
            self.judge_usage = usage if self.judge_usage is None else self.judge_usage + usage

    def record_tool_call(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        result: str | None = None,
        *,
        is_error: bool = False,
    ) -> None:
        """Note a tool call the target made (a function target calls this)."""
        self.tool_calls.append(
            ToolCallRecord(name=name, arguments=arguments, result=result, is_error=is_error)
        )

    def reset(self) -> None:
        """Forget what an attempt recorded (before the runner tries the case again)."""
        self.output = None
        self.tool_calls = []
        self.retrieved = []
        self.usage = None
        self.messages = []


def output_text(output: Any) -> str:
    """An output as text: a string as it is, a message's text, anything else as JSON."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, Msg):
        return output.text
    dump = getattr(output, "model_dump", None)
    if callable(dump):
        output = dump(mode="json")
    try:
        return json.dumps(output, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(output)
