"""The `fields_equal` evaluator of the structured-output set: field by field, with a score.

`equals` on a whole record passes or fails it; a small model that gets three fields of four
right deserves a score that says so, and the report a reason that names the wrong field.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from parley.evals._context import EvalContext
from parley.evals.evaluators import Evaluator
from parley.evals.report import EvaluatorResult

__all__ = ["FieldsEqual"]


def _same(wanted: Any, got: Any) -> bool:
    """Text compared without case or surrounding space; anything else by equality."""
    if isinstance(wanted, str) and isinstance(got, str):
        return wanted.strip().casefold() == got.strip().casefold()
    return bool(wanted == got)


class FieldsEqual(Evaluator):
    """Each field of the expected record equals the output's (score: the share equal).

    Args:
        fields: The fields to compare; None: every field of the case's `expected`.
        threshold: The share of equal fields at which the case passes (default all of them).
    """

    type: ClassVar[str] = "fields_equal"
    fields: list[str] | None = None
    threshold: float = 1.0

    async def evaluate(self, ctx: EvalContext) -> EvaluatorResult:
        """Compare field by field."""
        wanted = ctx.expected
        if not isinstance(wanted, dict) or not wanted:
            return self._verdict(0.0, "the case's expected value is not a record of fields")
        got = ctx.output
        if isinstance(got, str):
            try:
                got = json.loads(got)
            except ValueError:
                return self._verdict(0.0, f"the output is not JSON: {got[:80]!r}")
        if hasattr(got, "model_dump"):
            got = got.model_dump(mode="json")
        if not isinstance(got, dict):
            return self._verdict(0.0, f"the output is not a record: {type(got).__name__}")
        names = self.fields or list(wanted)
        wrong = [n for n in names if not _same(wanted.get(n), got.get(n))]
        reason = "; ".join(f"{n}: expected {wanted.get(n)!r}, got {got.get(n)!r}" for n in wrong)
        return self._verdict(1 - len(wrong) / len(names), reason)

    def _verdict(self, score: float, reason: str) -> EvaluatorResult:
        passed = score >= self.threshold
        return EvaluatorResult(
            name=self.name, passed=passed, score=score, reason=None if passed else reason
        )
