"""Evaluations: datasets of cases run over an agent, a model or a function, and judged.

See docs/evals.md. The result types are in `parley.evals.report`.
"""

from parley.evals.report import (
    CaseChange,
    CaseResult,
    Comparison,
    EvalReport,
    EvaluatorResult,
    ReportSummary,
    ToolCallRecord,
)

__all__ = [
    "CaseChange",
    "CaseResult",
    "Comparison",
    "EvalReport",
    "EvaluatorResult",
    "ReportSummary",
    "ToolCallRecord",
]
