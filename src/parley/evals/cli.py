"""`parley eval`: run a dataset over an agent, a model or a function, and hold it to a bar.

    parley eval sets/arith.yaml --agent myapp.agents:maths
    parley eval sets/arith.yaml --model openai:gpt-4o-mini --json run.json --html run.html
    parley eval sets/arith.yaml --function myapp.qa:answer --baseline old.json --min-score 0.8

It prints the report's table (and, with `--baseline`, how the run compares with that earlier
one), writes the JSON and HTML reports when asked, and exits 0 when the run meets the bar,
1 when it does not, and 2 on bad usage (a missing dataset, a target that does not import, an
unknown provider). The bar is `--min-score` or `--min-pass-rate`; without either, every case
must pass, as in a test suite.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parley._terminal import progress, visible
from parley.errors import ConfigurationError

if TYPE_CHECKING:
    from parley.evals.dataset import Dataset
    from parley.evals.report import EvalReport

__all__ = ["add_commands", "eval_command", "import_object"]


def add_commands(commands: Any) -> None:
    """Add `eval` to the `parley` command's subparsers."""
    parser = commands.add_parser(
        "eval",
        help="run an evaluation dataset over an agent, a model or a function",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "dataset",
        metavar="DATASET",
        help="a dataset file (YAML, JSON or .py), or a shipped set: tools, qa, structured",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--agent",
        metavar="MODULE:ATTR",
        help="an Agent (or a function of no arguments that returns one), e.g. myapp.agents:maths",
    )
    target.add_argument(
        "--model", metavar="SPEC", help="a chat model, provider[:model], e.g. openai:gpt-4o-mini"
    )
    target.add_argument(
        "--function",
        metavar="MODULE:ATTR",
        help="a function f(inputs) or f(inputs, ctx), async or not, whose result is the output",
    )
    parser.add_argument(
        "--concurrency", type=_positive, default=4, metavar="N", help="cases at once (default 4)"
    )
    parser.add_argument(
        "--retries",
        type=_count,
        default=2,
        metavar="N",
        help="retries of a case after a provider error (default 2)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="the most one try of a case may take; longer is that case's error (default none)",
    )
    parser.add_argument(
        "--judge", metavar="SPEC", help="the model `judge` evaluators ask, provider[:model]"
    )
    parser.add_argument(
        "--case",
        action="append",
        dest="cases",
        metavar="NAME",
        help="run only this case (repeatable)",
    )
    parser.add_argument("--json", metavar="OUT", help="write the report as JSON to OUT")
    parser.add_argument("--html", metavar="OUT", help="write the report as an HTML page to OUT")
    parser.add_argument(
        "--baseline",
        metavar="OLD.json",
        help="compare with an earlier run's JSON report: what improved, what regressed",
    )
    bar = parser.add_mutually_exclusive_group()
    bar.add_argument(
        "--min-score", type=_fraction, metavar="X", help="pass when the mean score is at least X"
    )
    bar.add_argument(
        "--min-pass-rate",
        type=_fraction,
        metavar="X",
        help="pass when at least this share of cases pass (default 1: every case)",
    )
    parser.set_defaults(run=eval_command)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 1") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not from 0 to 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be above 0")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def eval_command(args: argparse.Namespace) -> int:
    """Run `parley eval`: 0 when the bar holds, 1 when not (2, raised as errors, on bad usage)."""
    from parley.evals.report import EvalReport  # noqa: PLC0415

    dataset = _dataset(args.dataset, args.cases)
    baseline = EvalReport.load(args.baseline) if args.baseline else None
    target = _shipped_target(args) or _target(args)
    judge = _model(args.judge) if args.judge else None
    cases = len(dataset.cases)
    label = f"Evaluating {visible(dataset.name)}: {cases} case" + ("" if cases == 1 else "s")
    with progress(label):  # a spinner on a terminal, one line otherwise (stderr)
        report = dataset.evaluate_sync(
            target,
            concurrency=args.concurrency,
            retries=args.retries,
            judge_model=judge,
            timeout=args.timeout,
        )
    _show(report, baseline, args)
    shortfall = report.check(min_score=args.min_score, min_pass_rate=args.min_pass_rate)
    if shortfall is not None:
        sys.stderr.write(visible(f"parley eval: {shortfall}") + "\n")
        return 1
    return 0


def _show(report: EvalReport, baseline: EvalReport | None, args: argparse.Namespace) -> None:
    report.print()
    if baseline is not None:
        sys.stdout.write("\n")
        report.compare(baseline).print()
    if args.json:
        report.to_json(args.json)
        sys.stderr.write(f"report: {visible(args.json)}\n")
    if args.html:
        report.to_html(args.html, baseline=baseline)
        sys.stderr.write(f"page: {visible(args.html)}\n")


def _dataset(path: str, names: list[str] | None) -> Dataset:
    from parley.evals import sets  # noqa: PLC0415
    from parley.evals.dataset import Dataset  # noqa: PLC0415

    if Path(path).is_file():
        dataset = Dataset.load(path)
    elif path in sets.NAMES:
        dataset = sets.load(path)
    else:
        raise ConfigurationError(
            f"no dataset at {path!r}: give a YAML, JSON or .py file, or a shipped set's name "
            f"({', '.join(sets.NAMES)})"
        )
    if not names:
        return dataset
    known = {case.name for case in dataset.cases}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigurationError(
            f"no case {', '.join(map(repr, unknown))} in {dataset.name!r}; its cases: "
            + ", ".join(sorted(known))
        )
    chosen = [case for case in dataset.cases if case.name in names]
    return dataset.model_copy(update={"cases": chosen})


def _shipped_target(args: argparse.Namespace) -> Any:
    """A shipped set named with `--model`: the set's own agent (its tools, prompt) on it."""
    from parley.evals import sets  # noqa: PLC0415

    if not args.model or args.dataset not in sets.NAMES or Path(args.dataset).is_file():
        return None
    model = _model(args.model)
    if args.dataset == "tools":
        return sets.tools_agent(model)
    if args.dataset == "structured":
        return sets.structured_agent(model)
    from parley._sync import run_sync  # noqa: PLC0415
    from parley.evals.sets._pydocs import open_index  # noqa: PLC0415

    # Built once (embedding the corpus takes minutes on a CPU), then reopened from the cache.
    cache = Path.home() / ".cache" / "parley" / "evals" / "pydocs.sqlite"
    return sets.qa_agent(model, run_sync(open_index(cache)))


def _target(args: argparse.Namespace) -> Any:
    if args.model:
        return _model(args.model)
    if args.function:
        function = import_object(args.function, "--function")
        if not callable(function):
            raise ConfigurationError(f"--function {args.function} is not callable")
        return function
    return _agent(args.agent)


def _agent(spec: str) -> Any:
    from parley.agents import Agent  # noqa: PLC0415

    found = import_object(spec, "--agent")
    # A factory gives each run an agent of its own making (settings read at call time).
    if not isinstance(found, Agent) and callable(found) and _takes_no_arguments(found):
        found = found()
    if not isinstance(found, Agent):
        raise ConfigurationError(
            f"--agent {spec} is not an Agent (it is {type(found).__name__}), nor a function of no "
            "arguments that returns one; for any other callable use --function"
        )
    return found


def _takes_no_arguments(function: Any) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
    )


def _model(spec: str) -> Any:
    from parley.models.spec import model_from_spec  # noqa: PLC0415

    return model_from_spec(spec)


def import_object(spec: str, option: str = "target") -> Any:
    """The object `spec` ("package.module:attribute", the attribute dotted or not) names.

    The working directory is searched first, as `python -m` does, so a project's own modules
    import without installing them.

    Raises:
        ConfigurationError: `spec` is not of that form, the module does not import, or it has
            no such attribute.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(
            f"{option} takes MODULE:ATTRIBUTE (e.g. myapp.agents:support), not {spec!r}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise ConfigurationError(
                f"{option} {spec}: no module named {exc.name!r} (run from the folder that holds "
                "it, or install it)"
            ) from exc
        raise ConfigurationError(f"{option} {spec}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:  # the module's own code raised: say so, in one line
        raise ConfigurationError(
            f"{option} {spec}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigurationError(
                f"{option} {spec}: {module_name} has no attribute {attribute!r}"
            ) from None
    return found
