"""Evaluations: datasets of cases run over an agent, a model or a function, and judged.

```python
from parley.agents import Agent
from parley.evals import Case, Dataset
from parley.models.spec import model_from_spec

agent = Agent("calc", model_from_spec("local"), tools=["code_interpreter"])
ds = Dataset("arith", [Case("12x7", "What is 12*7?", expected="84")])  # judged by Contains
ds.evaluate_sync(agent).print()  # or: report = await ds.evaluate(agent, concurrency=4)
```

The target may also be a `ChatModel` or any function of a case's inputs (async or not).

`Dataset.load("sets/tools.yaml")` reads a dataset from YAML, JSON or a Python file that defines
`dataset`; the evaluators (`parley.evals.evaluators`) check the answer (`Equals`, `Contains`,
`Regex`, `MatchesSchema`), how it was reached (`CalledTool`, `RetrievalHit`), what it cost
(`MaxCost`, `MaxLatency`), or ask a model (`Judge`). When a dataset names no evaluator, a
case with an `expected` is judged by `Contains` (text) or `Equals` (anything else). The runner
(`parley.evals.runner`) runs the cases concurrently, retries provider errors and traces each
case; the result types are in `parley.evals.report`. See docs/evals.md.
"""

from parley.evals._context import EvalContext
from parley.evals.dataset import Case, Dataset, DatasetError
from parley.evals.evaluators import (
    CalledTool,
    Contains,
    Equals,
    Evaluator,
    FunctionEvaluator,
    Judge,
    MatchesSchema,
    MaxCost,
    MaxLatency,
    Regex,
    RetrievalHit,
)
from parley.evals.pytest_plugin import assert_passes
from parley.evals.report import (
    CaseChange,
    CaseResult,
    Comparison,
    EvalReport,
    EvaluatorResult,
    ReportSummary,
    ToolCallRecord,
)
from parley.evals.runner import CaseTimeoutError, EvaluateOptions, Target, evaluate

__all__ = [
    "CalledTool",
    "Case",
    "CaseChange",
    "CaseResult",
    "CaseTimeoutError",
    "Comparison",
    "Contains",
    "Dataset",
    "DatasetError",
    "Equals",
    "EvalContext",
    "EvalReport",
    "EvaluateOptions",
    "Evaluator",
    "EvaluatorResult",
    "FunctionEvaluator",
    "Judge",
    "MatchesSchema",
    "MaxCost",
    "MaxLatency",
    "Regex",
    "ReportSummary",
    "RetrievalHit",
    "Target",
    "ToolCallRecord",
    "assert_passes",
    "evaluate",
]
