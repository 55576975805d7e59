"""The shipped evaluation sets on a model: tool use, question answering, structured output.

Runs `parley.evals.sets`' three sets (`tools`: 50 cases, `qa`: 21, `structured`: 20) on one
model, by default the embedded SmolLM2-135M, and prints per set the cases, mean score, pass
rate, cost and time; each run's report is written as JSON and HTML (`--out`, default
`.evals/`). With `--compare`, the sets run twice on the same model, under the default agent's
settings before and after issue 21's item 3 (`BEFORE` and `AFTER` below), and the comparison
of each pair is printed (what improved, what regressed).

The `qa` set searches an index of `benchmarks/data/pydocs` built once with the embedded
embedding model (`--cache-dir`, default `~/.cache/parley/evals`).

Run: `python benchmarks/evals.py [--model SPEC] [--sets tools,qa,structured] [--every N]
[--concurrency N] [--compare] [--out DIR]`; for example `--model local:qwen3-1.7b` (after
`parley models pull qwen3-1.7b`), `--model ollama:qwen3:1.7b` or `--model openai:gpt-4o-mini`.
benchmarks/README.md has the figures and how they were taken.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from parley.agents import Agent
from parley.evals import Comparison, EvalReport
from parley.evals.sets import NAMES, load, qa_agent, structured_agent, tools_agent
from parley.evals.sets._pydocs import open_index
from parley.models.base import ChatModel
from parley.models.spec import model_from_spec
from parley.service.registry import builtin_agent

OLD_PROMPT = (
    "You are a helpful assistant. To calculate, call code_interpreter with one line of "
    "Python that prints the result, for example print(3 * 4). Then answer with the number "
    "it printed."
)
"""The default agent's system prompt before issue 21 (it offered code_interpreter to every
model, with the embedded model's one-round tool policy, decoding greedily)."""


def page_agent(model: ChatModel, label: str) -> Agent:
    """The service's default agent (what the web page talks to): as it was, or as it ships."""
    if label == "after":
        return builtin_agent(model)
    from parley.tools import Toolkit  # noqa: PLC0415

    tools = Toolkit(["code_interpreter"])
    return Agent("assistant", model, system_prompt=OLD_PROMPT, tools=tools, max_iters=4)


async def run_set(
    name: str, model: ChatModel, label: str, *, index: Any, every: int, concurrency: int
) -> EvalReport:
    """One shipped set on `model` (every `every`th case).

    `label` "before" or "after" runs the `tools` set on the service's default agent before and
    after issue 21 (`page_agent`); "set" on the set's own agent. The other sets always run on
    their own agents (the default agent's settings do not reach them).
    """
    dataset = load(name)
    dataset = dataset.model_copy(update={"cases": dataset.cases[::every]})
    target: Any
    if name == "tools":
        target = tools_agent(model) if label == "set" else page_agent(model, label)
    elif name == "qa":
        target = qa_agent(model, index)
    else:
        target = structured_agent(model)
    settings = {"label": label, "model": model.model, "every": every}
    return await dataset.evaluate(target, concurrency=concurrency, retries=1, settings=settings)


ANSWER_CHECKS = ("regex", "contains", "fields_equal")
"""The evaluators that judge the answer itself (the others judge how it was reached)."""


def answers_right(report: EvalReport) -> str:
    """How many cases' answers passed their answer checks, of those that have any."""
    checked = [
        [r.passed for r in case.results if r.name in ANSWER_CHECKS]
        for case in report.cases
        if case.error is None
    ]
    judged = [all(verdicts) for verdicts in checked if verdicts]
    return f"{sum(judged)}/{len(judged)}"


def row(report: EvalReport) -> str:
    """A report's line in the summary table."""
    s = report.summary()
    cost = "-" if s.cost is None else f"${s.cost:.4f}"
    return (
        f"| {report.dataset} | {report.settings.get('label', '')} | {s.cases} | {s.score:.2f} | "
        f"{s.pass_rate:.0%} | {answers_right(report)} | {cost} | "
        f"{s.input_tokens:,} / {s.output_tokens:,} | {s.duration:.0f} s |"
    )


HEADER = (
    "| set | agent | cases | score | pass rate | answers right | cost | tokens in / out | time |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


async def main(argv: Sequence[str] | None = None) -> int:
    """Run the sets and print the table (and the comparison with `--compare`)."""
    args = parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in sets if s not in NAMES]
    if unknown:
        print(f"unknown sets {unknown}; the shipped ones are {', '.join(NAMES)}", file=sys.stderr)
        return 2
    model = model_from_spec(args.model)
    index = await open_index(args.cache_dir / "pydocs.sqlite") if "qa" in sets else None
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    runs = [(name, "set") for name in sets if name != "tools" or not args.compare]
    if args.compare and "tools" in sets:
        runs[:0] = [("tools", "before"), ("tools", "after")]
    reports: dict[tuple[str, str], EvalReport] = {}
    print(f"model: {args.model} ({model.model}); concurrency {args.concurrency}")
    try:
        for name, label in runs:
            began = time.perf_counter()
            report = await run_set(
                name, model, label, index=index, every=args.every, concurrency=args.concurrency
            )
            reports[name, label] = report
            stem = out / f"{name}-{label}"
            write(report, stem)
            took = time.perf_counter() - began
            print(f"{name} ({label}): {took:.0f} s, {row(report)}", flush=True)
    finally:
        if index is not None:
            await index.close()
    print()
    print(HEADER)
    for report in reports.values():
        print(row(report))
    if ("tools", "after") in reports:
        print("\nthe default agent on the tools set, after against before:")
        show(reports["tools", "after"].compare(reports["tools", "before"]))
    return 0


def write(report: EvalReport, stem: Path) -> None:
    """The report as JSON and, where the HTML renderer is installed, as a page."""
    stem.with_suffix(".json").write_text(report.model_dump_json(indent=1), encoding="utf-8")
    to_html = getattr(report, "to_html", None)  # parley.evals' renderer (issue 21, item 4)
    if to_html is not None:
        to_html(stem.with_suffix(".html"))


def show(comparison: Comparison) -> None:
    """The comparison: the rendered table where there is one, and the cases that moved."""
    render = getattr(comparison, "print", None)
    if render is not None:
        render()
    for title, changes in (("improved", comparison.improved), ("regressed", comparison.regressed)):
        moved = ", ".join(f"{c.name} {c.before:.2f}->{c.after:.2f}" for c in changes) or "none"
        print(f"{title} ({len(changes)}): {moved}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local", help="a model spec (default: local)")
    parser.add_argument("--sets", default=",".join(NAMES), help="comma-separated set names")
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        help="run every Nth case of each set (a sample across its categories; default all)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="cases run at once")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run the tools set on the default agent as before issue 21 and as it ships now",
    )
    parser.add_argument("--out", type=Path, default=Path(".evals"), help="reports' folder")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path.home() / ".cache" / "parley" / "evals",
        help="where the qa set's index is kept",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
