"""The suite's own rules: no test skips on its own, and under CI nothing skipped passes.

A test needing an optional part asks `tests/_requires.py` (skip on a developer's machine,
fail under `CI=true`); the source scan below keeps every other way of skipping out of the
suite, and `tests/_ci.py` turns any skip that still happens under CI into a failure. Under CI
Hypothesis also replays the same examples on every run.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._requires import require_module

TESTS = Path(__file__).parent
ROOT = TESTS.parent

HELPER = TESTS / "_requires.py"
SKIPPERS = {"skip", "skipif", "importorskip", "SkipTest"}


def direct_skips(source: str) -> list[str]:
    """The lines where `source` skips through pytest or unittest itself (`line: what`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in SKIPPERS:
            owner = ast.unparse(node.value)
            if owner in {"pytest", "pytest.mark", "unittest"}:
                found.append(f"{node.lineno}: {owner}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in {"pytest", "unittest"}:
            found.extend(
                f"{node.lineno}: from {node.module} import {alias.name}"
                for alias in node.names
                if alias.name in SKIPPERS
            )
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def test_no_test_skips_except_through_tests_requires() -> None:
    modules = sorted(p for p in TESTS.rglob("*.py") if p != HELPER)
    offending = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in modules
        for hit in direct_skips(path.read_text())
    ]
    assert not offending, (
        "skip only through tests/_requires.py (`unavailable`, `require_module`), which fails "
        "under CI instead:\n" + "\n".join(offending)
    )


def test_the_scan_finds_every_way_of_skipping() -> None:
    source = (
        "import pytest, unittest\n"
        "from pytest import importorskip\n"
        "pytest.importorskip('x')\n"
        "@pytest.mark.skipif(True, reason='r')\n"
        "def test_a(): pytest.skip('r')\n"
        "@pytest.mark.skip\n"
        "def test_b(): raise unittest.SkipTest('r')\n"
        "def test_c(): unavailable('r')\n"
    )
    assert direct_skips(source) == [
        "2: from pytest import importorskip",
        "3: pytest.importorskip",
        "4: pytest.mark.skipif",
        "5: pytest.skip",
        "6: pytest.mark.skip",
        "7: unittest.SkipTest",
    ]


# -- under CI, a skip is a failure -------------------------------------------------------------

SKIPPING = """
import pytest

def test_skips():
    pytest.skip("no widget on this machine")

@pytest.mark.skipif(True, reason="never here")
def test_marked():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_to_fail():
    raise AssertionError

def test_passes():
    pass
"""

SKIPPED_MODULE = """
import pytest

pytest.importorskip("no_such_module_anywhere")

def test_never_collected():
    pass
"""


@pytest.fixture
def skipping(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_skipping=SKIPPING, test_skipped_module=SKIPPED_MODULE)
    return pytester


def test_a_developer_run_skips(skipping: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = skipping.runpytest("-p", "tests._ci", "-rs")
    result.assert_outcomes(passed=1, skipped=3, xfailed=1)
    result.stdout.fnmatch_lines(["*no widget on this machine*"])


def test_a_ci_run_fails_every_skip(
    skipping: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = skipping.runpytest("-p", "tests._ci", "-rfE", "--continue-on-collection-errors")
    # A skip in a test's set-up (the skipif mark) is an error, as is the module skipped at
    # collection (which stops a run unless told to go on, as here); an expected failure
    # stays one.
    result.assert_outcomes(passed=1, failed=1, errors=2, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = result.stdout.str()
    for reason in ("no widget on this machine", "never here", "no_such_module_anywhere"):
        assert reason in report
    assert report.count("CI=true: a skipped test fails here") >= 3


# -- under CI, Hypothesis replays --------------------------------------------------------------

DRAWS = """
import os
from hypothesis import given, strategies as st

@given(st.integers(0, 10**12))
def test_draws(n):
    with open(os.environ["DRAWS_FILE"], "a") as out:
        out.write(f"{n}\\n")
"""


def _draws(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    out = pytester.path / name
    monkeypatch.setenv("DRAWS_FILE", str(out))
    # A process of its own: the profile is chosen when tests/_ci.py is imported.
    result = pytester.runpytest_subprocess("-p", "tests._ci", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    return out.read_text().split()


def test_ci_runs_draw_the_same_examples_and_developer_runs_new_ones(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_draws=DRAWS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CI", "true")
    first, second = _draws(pytester, monkeypatch, "ci1"), _draws(pytester, monkeypatch, "ci2")
    assert first == second
    assert not (pytester.path / ".hypothesis").exists()  # no example database under CI
    monkeypatch.delenv("CI")
    mine, again = _draws(pytester, monkeypatch, "dev1"), _draws(pytester, monkeypatch, "dev2")
    assert mine != again


# -- a program the suite cannot assume ---------------------------------------------------------

NEEDS_A_PROGRAM = """
from tests._requires import require_program

def test_speaks():
    require_program("espeak-ng")
"""


def test_a_missing_program_skips_here_and_fails_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_program=NEEDS_A_PROGRAM)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("PATH", str(pytester.path))  # a folder without espeak-ng
    monkeypatch.delenv("CI", raising=False)
    result = pytester.runpytest("-p", "tests._ci", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*espeak-ng is not on PATH (Debian package `espeak-ng`)*"])
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest("-p", "tests._ci", "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*espeak-ng is not on PATH*CI=true, so this fails*"])


def test_the_speech_tests_ask_for_espeak_ng(tmp_path: Path) -> None:
    # The local voice's espeak-ng engine is a Debian program, not a Python package: without it
    # on PATH, a test that speaks with it skips here (it failed with MissingDependencyError).
    require_module("piper", "tts-piper")  # the module's own need, which would skip it first
    node = "tests/agents/test_speech.py::test_a_run_takes_middleware_before_it_is_read_only"
    env = {**os.environ, "PATH": str(tmp_path)}
    env.pop("CI", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", node, "-p", "no:cacheprovider", "-q", "-rs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout
    assert "espeak-ng is not on PATH" in run.stdout
