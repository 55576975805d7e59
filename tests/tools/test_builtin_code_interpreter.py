"""The code interpreter and its sandbox, in every sandbox mode.

Tests are parametrized by mode (`[bwrap]`, `[unshare]`, `[rlimits]`: the fixtures `mode` and
`ci` of tests/tools/conftest.py); a mode the machine lacks is skipped with the reason on a
developer's machine and fails under CI. The escapes each mode must stop are in
test_code_interpreter_escapes.py; sessions per conversation, reaping and deletion in
test_code_interpreter_sessions.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from parley.errors import ConfigurationError
from parley.messages import ImageBlock, TextBlock, ToolCallBlock
from parley.tools import TOOL_REGISTRY, Toolkit
from parley.tools.builtin import (
    CodeInterpreter,
    SandboxLimits,
    available_sandbox_modes,
    detect_sandbox_mode,
)
from tests._requires import require_module
from tests.tools._sandbox_modes import ALL_MODES, make

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


# -- the mode --------------------------------------------------------------------------------


def test_the_strongest_available_mode_is_chosen_and_reported(tmp_path: Path) -> None:
    available = available_sandbox_modes()
    assert available[-1] == "rlimits"
    assert detect_sandbox_mode() == available[0]
    with CodeInterpreter({"work_dir": str(tmp_path)}) as ci:
        assert ci.sandbox == available[0]
        assert ci.run_code("1").sandbox == available[0]


def test_unknown_or_unavailable_modes_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="unknown sandbox mode"):
        detect_sandbox_mode("docker")
    missing = [m for m in ALL_MODES if m not in available_sandbox_modes()]
    for name in missing:
        with pytest.raises(ConfigurationError, match="does not work on this machine"):
            detect_sandbox_mode(name)


# -- what the sandbox refuses ----------------------------------------------------------------


def test_network_is_refused(ci: CodeInterpreter) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
            "    print('CONNECTED')\n"
            "except OSError as exc:\n"
            "    print('refused:', type(exc).__name__, exc)\n"
        )
        run = ci.run_code(code)
        assert run.error is None, run.error
        assert "refused:" in run.stdout
        assert "CONNECTED" not in run.stdout
        server.settimeout(0.3)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever reached the listening port


@pytest.mark.parametrize("where", ["tmp", "repo"])
def test_writes_outside_the_work_directory_are_refused(ci: CodeInterpreter, where: str) -> None:
    folder = Path("/tmp") if where == "tmp" else REPO
    target = folder / f"parley-escape-{uuid.uuid4().hex}"
    run = ci.run_code(f"open({str(target)!r}, 'w').write('escaped')")
    assert run.error is not None
    assert "Read-only file system" in run.error or "not allowed in this sandbox" in run.error
    assert not target.exists()


def test_removing_or_linking_out_of_the_work_directory_is_refused(
    ci: CodeInterpreter, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    removed = ci.run_code(f"import os\nos.remove({str(victim)!r})")
    assert removed.error is not None
    linked = ci.run_code(
        f"import os\nos.symlink({str(victim)!r}, 'link')\nopen('link', 'w').write('x')"
    )
    assert linked.error is not None
    assert victim.read_text() == "keep me"


def test_writes_inside_the_work_directory_work_and_are_listed(
    ci: CodeInterpreter,
) -> None:
    run = ci.run_code("open('out.csv', 'w').write('a,b\\n1,2\\n')\nprint('ok')")
    assert run.error is None, run.error
    assert run.files == ["out.csv"]
    assert (ci.work_dir() / "out.csv").read_text() == "a,b\n1,2\n"
    assert "files written in the work directory: out.csv" in run.to_text()


def test_files_and_folders_inside_the_work_directory_can_be_changed(
    ci: CodeInterpreter,
) -> None:
    run = ci.run_code(
        "import os, shutil\n"
        "os.makedirs('a/b')\n"
        "open('a/b/f.txt', 'w').write('x')\n"
        "os.rename('a/b/f.txt', 'a/g.txt')\n"
        "os.symlink('g.txt', 'a/link')\n"
        "os.link('a/g.txt', 'a/hard')\n"
        "os.chmod('a/g.txt', 0o600)\n"
        "shutil.copytree('a', 'c', symlinks=True)\n"
        "shutil.rmtree('a')\n"
        "sorted(os.listdir('c'))"
    )
    assert run.error is None, run.error
    assert run.result == "['b', 'g.txt', 'hard', 'link']"


def test_child_processes_run_only_inside_bubblewrap(ci: CodeInterpreter, mode: str) -> None:
    run = ci.run_code("import subprocess\nsubprocess.run(['echo', 'from a child'])")
    if mode == "bwrap":
        assert run.error is None, run.error
        assert "from a child" in run.stdout  # fd-level output of a child is captured
    else:
        assert run.error is not None
        assert "starting a process is not allowed" in run.error


def test_the_parents_environment_does_not_leak(
    ci: CodeInterpreter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_TEST_SECRET", "s3cret")
    run = ci.run_code("import os\nos.environ.get('PARLEY_TEST_SECRET')")
    assert run.error is None
    assert run.result is None


# -- limits ----------------------------------------------------------------------------------


def test_a_runaway_loop_is_stopped_at_the_wall_time(mode: str, tmp_path: Path) -> None:
    limits = SandboxLimits(wall_time=1.5, cpu_time=60)
    with make(mode, tmp_path, limits) as ci:
        ci.run_code("x = 1")
        run = ci.run_code("import time\nwhile True:\n    time.sleep(0.01)")
        assert run.error is not None
        assert run.error.startswith("Timeout")
        after = ci.run_code("x")
        assert after.notice is not None
        assert "restarted" in after.notice
        assert "time limit" in after.notice
        assert after.error is not None
        assert "NameError" in after.error  # the state went with the killed worker


def test_a_cpu_bound_loop_is_stopped_by_rlimit_cpu(mode: str, tmp_path: Path) -> None:
    limits = SandboxLimits(wall_time=60, cpu_time=1)
    with make(mode, tmp_path, limits) as ci:
        run = ci.run_code("while True:\n    pass")
        assert run.error is not None
        assert "CPU time limit" in run.error
        assert ci.run_code("print('back')").stdout == "back\n"


@pytest.mark.parametrize(
    ("code", "error"),
    [
        pytest.param("hog = bytearray(4 * 1024 ** 3)", "MemoryError", id="memory-hog"),
        pytest.param("import sys\nsys.exit(2)", "SystemExit: 2", id="sys-exit"),
    ],
)
def test_the_session_survives_an_error_that_ends_a_cell(
    ci: CodeInterpreter, code: str, error: str
) -> None:
    ci.run_code("kept = 7")
    run = ci.run_code(code)
    assert run.error is not None
    assert error in run.error
    after = ci.run_code("kept")
    assert after.result == "7"
    assert after.notice is None  # the same worker: not restarted


def test_files_past_the_size_limit_fail(mode: str, tmp_path: Path) -> None:
    limits = SandboxLimits(file_size_bytes=1024 * 1024)
    with make(mode, tmp_path, limits) as ci:
        run = ci.run_code("open('big.bin', 'wb').write(b'x' * (2 * 1024 * 1024))")
        assert run.error is not None
        assert "File too large" in run.error


def test_long_output_is_cut_in_the_middle(mode: str, tmp_path: Path) -> None:
    with make(mode, tmp_path, SandboxLimits(output_chars=1000)) as ci:
        run = ci.run_code("print('head'); print('x' * 50_000); print('tail')")
        assert run.stdout.startswith("head")
        assert run.stdout.rstrip().endswith("tail")
        assert "bytes cut" in run.stdout
        assert len(run.stdout) < 1200


# -- sessions and output ---------------------------------------------------------------------


def test_state_is_kept_within_a_session_and_apart_between_sessions(
    ci: CodeInterpreter,
) -> None:
    assert ci.run_code("x = 41", session="a").error is None
    assert ci.run_code("x + 1", session="a").result == "42"
    other = ci.run_code("x", session="b")
    assert other.error is not None
    assert "NameError" in other.error
    assert ci.work_dir("a") != ci.work_dir("b")


def test_a_session_outlives_the_thread_that_started_it(ci: CodeInterpreter) -> None:
    # bubblewrap's --die-with-parent follows the starting *thread*; workers must not.
    starter = threading.Thread(target=ci.run_code, args=("kept = 5",))
    starter.start()
    starter.join()
    time.sleep(0.3)
    after = ci.run_code("kept")
    assert after.notice is None
    assert after.result == "5"


def test_stdout_stderr_and_the_traceback_come_back(ci: CodeInterpreter) -> None:
    code = (
        "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n\ndef f():\n    1 / 0\nf()"
    )
    run = ci.run_code(code)
    assert run.stdout == "to out\n"
    assert run.stderr == "to err\n"
    assert run.error is not None
    assert run.error.startswith("Traceback")
    assert 'File "<cell-1>", line 7' in run.error
    assert "1 / 0" in run.error
    assert "ZeroDivisionError: division by zero" in run.error
    assert "_worker.py" not in run.error
    text = run.to_text()
    assert "stdout:\n\n```\nto out\n```" in text
    assert "stderr:" in text
    assert "error:" in text


def test_a_syntax_error_is_reported(ci: CodeInterpreter) -> None:
    run = ci.run_code("def broken(:\n    pass")
    assert run.error is not None
    assert "SyntaxError" in run.error


def test_a_crashed_worker_restarts_and_says_so(ci: CodeInterpreter) -> None:
    ci.run_code("z = 1")
    crashed = ci.run_code("import os\nos._exit(3)")
    assert crashed.error is not None
    assert "exited with status 3" in crashed.error
    after = ci.run_code("print('again')")
    assert after.stdout == "again\n"
    assert after.notice is not None
    assert "restarted" in after.notice


def test_a_markdown_fence_around_the_code_is_removed(ci: CodeInterpreter) -> None:
    assert ci.run_code("```python\n6 * 7\n```").result == "42"


def test_a_matplotlib_figure_comes_back_as_an_image(ci: CodeInterpreter) -> None:
    require_module("matplotlib", "tools")  # the worker runs this same Python
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3], [1, 4, 9])\n"
        "plt.title('squares')\n"
        "plt.savefig('squares.png')\n"
        "plt.show()"
    )
    run = ci.run_code(code)
    assert run.error is None, run.error
    assert run.stderr == ""
    assert len(run.images) == 1
    assert run.images[0].startswith(b"\x89PNG\r\n\x1a\n")
    assert run.files == ["squares.png"]
    output = run.to_output()
    assert isinstance(output, list)
    assert isinstance(output[0], TextBlock)
    assert isinstance(output[1], ImageBlock)
    assert output[1].source.media_type == "image/png"
    assert ci.run_code("1").images == []  # figures are closed once returned


# -- as a tool -------------------------------------------------------------------------------


async def test_it_runs_as_a_tool_with_the_session_from_the_context(tmp_path: Path) -> None:
    assert TOOL_REGISTRY["code_interpreter"] is CodeInterpreter
    with make("rlimits", tmp_path) as ci:
        toolkit = Toolkit([ci])
        first = ToolCallBlock(id="c1", name="code_interpreter", input={"code": "n = 20"})
        second = ToolCallBlock(id="c2", name="code_interpreter", input={"code": "n * 2 + 2"})
        await toolkit.run(first, thread_id="t-1")
        result = await toolkit.run(second, thread_id="t-1")
        assert not result.is_error
        assert result.output == "execute_result:\n\n```\n42\n```"
        elsewhere = await toolkit.run(second, thread_id="t-2")
        assert "NameError" in str(elsewhere.output)


async def test_sessions_run_concurrently(tmp_path: Path) -> None:
    # Each cell says it started, then waits for a go the test gives only once all three have
    # started: run one after another, the first would wait in vain and never say 'done'.
    code = (
        "import os, time\n"
        "open('started', 'w').close()\n"
        "for _ in range(400):\n"
        "    if os.path.exists('go'):\n"
        "        break\n"
        "    time.sleep(0.05)\n"
        "'done' if os.path.exists('go') else 'alone'"
    )
    with make("rlimits", tmp_path) as ci:
        runs = asyncio.gather(*(ci.execute(code, session=f"s{i}") for i in range(3)))
        folders = [ci.work_dir(f"s{i}") for i in range(3)]
        for _ in range(600):
            if all((folder / "started").exists() for folder in folders):
                break
            await asyncio.sleep(0.05)
        for folder in folders:
            (folder / "go").touch()
        assert [r.result for r in await runs] == ["'done'"] * 3


def test_qwen_style_call_and_the_sync_twin(tmp_path: Path) -> None:
    with make("rlimits", tmp_path) as ci:
        assert ci.call('{"code": "print(\'hi\')"}') == "stdout:\n\n```\nhi\n```"
        assert ci.call({"code": "pass"}) == "Finished execution."
        assert ci.execute_sync("2 ** 10").result == "1024"
        assert ci.file_access


def test_files_under_the_file_roots_are_copied_into_the_work_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    data = shared / "data.txt"
    data.write_text("payload")
    with make("rlimits", tmp_path / "ci", file_roots=[str(shared)]) as ci:
        run = ci.run_code("open('data.txt').read()", files=[data.as_uri(), "https://x.test/a"])
        assert run.result == "'payload'"
        assert run.notice is not None
        assert "https://x.test/a (not a local file)" in run.notice


def test_a_file_root_holding_the_workspace_gives_no_other_conversations_files(
    tmp_path: Path,
) -> None:
    # A file root as wide as the whole folder (the workspace inside it): a call still gets
    # no file of another conversation, though the root covers it.
    with make("rlimits", tmp_path / "ci", file_roots=[str(tmp_path)]) as ci:
        ci.run_code("open('secret.txt', 'w').write('theirs')", session="a")
        theirs = ci.work_dir("a") / "secret.txt"
        (tmp_path / "mine.txt").write_text("mine")
        run = ci.run_code(
            "import os\nos.path.exists('secret.txt'), open('mine.txt').read()",
            session="b",
            files=[str(theirs), str(tmp_path / "mine.txt")],
        )
        assert run.result == "(False, 'mine')"
        assert run.notice is not None
        assert f"{theirs} (outside this conversation's files and the file_roots)" in run.notice


def test_close_stops_workers_and_keeps_the_conversations_files(tmp_path: Path) -> None:
    ci = make("rlimits", tmp_path)
    pid = ci.run_code("import os\nos.getpid()").result
    assert pid is not None
    ci.run_code("open('kept.txt', 'w').write('x')")
    ci.close()
    assert ci.live_sessions() == []
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
    assert (ci.work_dir() / "kept.txt").read_text() == "x"  # removed with its thread
    with pytest.raises(ConfigurationError, match="closed"):
        ci.run_code("1")
