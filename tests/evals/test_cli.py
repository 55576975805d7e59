"""`parley eval` end to end: a real `parley` process over a dataset file and a target named by
`module:attribute` (`tests/evals/_fixtures.py`, a scripted agent), or a model served by the
project's OpenAI wire server; its table, files, comparison, exit codes and one-line errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parley.cli import main
from parley.evals import EvalReport
from tests._requires import require_module
from tests.cli._run import run_parley
from tests.evals._reports import failing, passing, report

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120

DATASET = """\
name: arith
cases:
  - name: 12x7
    inputs: What is 12*7?
    expected: "84"
  - name: 13x7
    inputs: What is 13*7?
    expected: "91"
  - name: tool
    inputs: What is 6*7? Use the tool.
    expected: "42"
    evaluators: [{type: called_tool, tool: multiply, arguments: {a: 6}}]
"""


def _parley(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `parley` in a process of its own, with this checkout's sources and tests importable."""
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    base.pop("NO_COLOR", None)
    return run_parley("eval", *args, env={**base, **(env or {})}, cwd=cwd, timeout=TIMEOUT)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "arith.yaml"
    path.write_text(DATASET)
    return path


def _rows(stdout: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()
        for line in stdout.splitlines()
        if line[:2] in {"12", "13", "to"}
    }


def test_a_run_over_an_agent_prints_the_table_and_fails_below_the_bar(dataset: Path) -> None:
    done = _parley(str(dataset), "--agent", "tests.evals._fixtures:agent", cwd=dataset.parent)
    assert done.returncode == 1, done.stderr
    rows = _rows(done.stdout)
    assert rows["12x7"][:4] == ["12x7", "pass", "1.00", "✓"]
    assert rows["13x7"][:4] == ["13x7", "FAIL", "0.00", "✗"]
    assert rows["tool"][:5] == ["tool", "pass", "1.00", "✓", "✓"]  # contains, then called_tool
    assert "13x7  contains: expected '91'" in done.stdout
    assert done.stderr.splitlines() == [
        "Evaluating arith: 3 cases...",  # not a terminal: one line, no spinner
        "parley eval: arith: 2 of 3 cases passed (67%, below 100%)",
    ]


@pytest.mark.parametrize(
    ("bar", "code"),
    [
        (["--min-pass-rate", "0.6"], 0),
        (["--min-pass-rate", "0.7"], 1),
        (["--min-score", "0.6"], 0),
        (["--min-score", "0.7"], 1),
    ],
)
def test_the_bar_decides_the_exit_code(dataset: Path, bar: list[str], code: int) -> None:
    done = _parley(
        str(dataset), "--agent", "tests.evals._fixtures:make_agent", *bar, cwd=dataset.parent
    )
    assert done.returncode == code, done.stderr


def test_chosen_cases_only(dataset: Path) -> None:
    done = _parley(
        str(dataset),
        "--function",
        "tests.evals._fixtures:answer",
        "--case",
        "12x7",
        cwd=dataset.parent,
    )
    assert done.returncode == 0, done.stderr
    assert list(_rows(done.stdout)) == ["12x7"]


def test_json_html_and_a_baseline(dataset: Path, tmp_path: Path) -> None:
    old = report(failing("13x7"), passing("12x7"), passing("gone"), target="v1")
    old.to_json(tmp_path / "old.json")
    done = _parley(
        str(dataset),
        "--agent",
        "tests.evals._fixtures:agent",
        "--json",
        "run.json",
        "--html",
        "run.html",
        "--baseline",
        "old.json",
        "--min-pass-rate",
        "0.5",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    saved = EvalReport.load(tmp_path / "run.json")
    assert [c.name for c in saved.cases] == ["12x7", "13x7", "tool"]
    assert saved.case("tool").tool_calls[0].arguments == {"a": 6, "b": 7}
    # The comparison follows the table: 12x7 as before, 13x7 worse (a judge's 0.5 is gone).
    changes = [
        line.split()[:2]
        for line in done.stdout.splitlines()
        if line.startswith(("improved", "regressed", "added", "removed"))
    ]
    assert changes == [["regressed", "13x7"], ["added", "tool"], ["removed", "gone"]]
    page = (tmp_path / "run.html").read_text()
    assert '<section id="comparison">' in page
    assert "&quot;a&quot;: 6" in page  # the tool call's arguments, in the case's details
    assert json.loads((tmp_path / "run.json").read_text())["dataset"] == "arith"


def test_a_module_in_the_working_directory_imports(dataset: Path) -> None:
    (dataset.parent / "mytargets.py").write_text("def answer(inputs):\n    return '84'\n")
    done = _parley(
        str(dataset), "--function", "mytargets:answer", "--case", "12x7", cwd=dataset.parent
    )
    assert done.returncode == 0, done.stderr


def test_a_model_on_the_openai_wire(dataset: Path) -> None:
    require_module("openai", "openai")
    from parley.providers.openai.server import OpenAIServer, Reply  # noqa: PLC0415

    with OpenAIServer([Reply(text="It is 84.")]) as server:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url}
        done = _parley(
            str(dataset),
            "--model",
            "openai:gpt-4o-mini",
            "--case",
            "12x7",
            cwd=dataset.parent,
            env=env,
        )
        server.assert_consumed()
    assert done.returncode == 0, done.stderr
    assert _rows(done.stdout)["12x7"][:2] == ["12x7", "pass"]
    assert "openai" in done.stdout.splitlines()[0]


def test_a_shipped_set_by_name_runs_its_own_agent_on_the_model(tmp_path: Path) -> None:
    """`parley eval tools --model SPEC`: the set's agent (its code interpreter) on that model."""
    require_module("openai", "openai")
    from parley.providers.openai.server import OpenAIServer, Reply, ToolCall  # noqa: PLC0415

    steps = [
        Reply(tool_calls=[ToolCall("code_interpreter", {"code": "print(12*7)"})]),
        Reply(text="12*7 is 84."),
    ]
    with OpenAIServer(steps) as server:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url}
        done = _parley(
            "tools", "--model", "openai:gpt-4o-mini", "--case", "arith-12x7", cwd=tmp_path, env=env
        )
        server.assert_consumed()
        # The tool's result went back to the model: the interpreter really ran the code.
        second = server.requests[1].json["messages"]
    assert done.returncode == 0, done.stderr
    assert any(m.get("role") == "tool" and "84" in str(m.get("content")) for m in second)
    row = next(line for line in done.stdout.splitlines() if line.startswith("arith-12x7"))
    assert row.split()[1] == "pass"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["missing.yaml", "--agent", "x:y"],
            "parley: no dataset at 'missing.yaml': give a YAML, JSON or .py file, or a shipped "
            "set's name (tools, qa, structured)",
        ),
        (
            ["arith.yaml", "--agent", "nocolon"],
            "parley: --agent takes MODULE:ATTRIBUTE (e.g. myapp.agents:support), not 'nocolon'",
        ),
        (
            ["arith.yaml", "--agent", "no_such_module:agent"],
            "parley: --agent no_such_module:agent: no module named 'no_such_module' "
            "(run from the folder that holds it, or install it)",
        ),
        (
            ["arith.yaml", "--agent", "tests.evals._fixtures:nothing"],
            "parley: --agent tests.evals._fixtures:nothing: "
            "tests.evals._fixtures has no attribute 'nothing'",
        ),
        (
            ["arith.yaml", "--agent", "tests.evals._fixtures:not_an_agent"],
            "parley: --agent tests.evals._fixtures:not_an_agent is not an Agent (it is int), "
            "nor a function of no arguments that returns one; "
            "for any other callable use --function",
        ),
        (
            ["arith.yaml", "--function", "tests.evals._fixtures:not_an_agent"],
            "parley: --function tests.evals._fixtures:not_an_agent is not callable",
        ),
        (["arith.yaml", "--model", "nope:model"], "parley: unknown credential type 'nope'; *"),
        (
            ["arith.yaml", "--agent", "tests.evals._fixtures:agent", "--case", "14x7"],
            "parley: no case '14x7' in 'arith'; its cases: 12x7, 13x7, tool",
        ),
        (
            ["arith.yaml", "--agent", "tests.evals._fixtures:agent", "--baseline", "old.json"],
            "parley: cannot read the report 'old.json': No such file or directory",
        ),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    dataset: Path,
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In this process (the runs above are in their own): `main` as the `parley` command calls it.
    monkeypatch.chdir(dataset.parent)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["eval", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    if message.endswith("*"):
        assert line.startswith(message[:-1])
    else:
        assert line == message


@pytest.mark.parametrize(
    "args",
    [
        ["arith.yaml"],  # no target
        ["arith.yaml", "--agent", "a:b", "--model", "openai:x"],  # two
        ["arith.yaml", "--agent", "a:b", "--min-score", "1.5"],
        ["arith.yaml", "--agent", "a:b", "--min-score", "0.5", "--min-pass-rate", "0.5"],
        ["arith.yaml", "--agent", "a:b", "--concurrency", "0"],
        ["arith.yaml", "--agent", "a:b", "--timeout", "0"],
        ["arith.yaml", "--agent", "a:b", "--timeout", "soon"],
    ],
)
def test_bad_options_exit_2(
    dataset: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", *args])
    assert exited.value.code == 2
    assert "usage: parley eval" in capsys.readouterr().err
