"""The code interpreter's sessions: one per user and thread, reaped when idle, ended on delete.

The run context reaches the tool as the lead's agent loop will pass it: `ctx=RunContext(...)`
as a keyword of `acall`. Sessions run in the plain `rlimits` mode here (the sandbox modes
have their own tests): a worker's pid is then a real pid the test can look for.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter
from parley.tools.builtin.sandbox import SandboxMode
from parley.tools.workspace import Workspace
from tests.tools._sandbox_modes import ALL_MODES, make, require_mode, wait_until

pytestmark = pytest.mark.timeout(120)

ALICE_A = RunContext.detached(thread_id="A", user_id="alice")
ALICE_B = RunContext.detached(thread_id="B", user_id="alice")
BOB_A = RunContext.detached(thread_id="A", user_id="bob")
BOB_B = RunContext.detached(thread_id="B", user_id="bob")
# A cell that says it started, then waits (boundedly) for the test's go.
BLOCKING = (
    "import os, time\n"
    "open('started', 'w').close()\n"
    "for _ in range(1200):\n"
    "    if os.path.exists('go'):\n"
    "        break\n"
    "    time.sleep(0.05)\n"
    "'released' if os.path.exists('go') else 'never released'"
)


@pytest.fixture
def ci(tmp_path: Path) -> Iterator[CodeInterpreter]:
    with make(require_mode("rlimits"), tmp_path / "ws") as interpreter:
        yield interpreter


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pid_of(ci: CodeInterpreter, ctx: RunContext[None]) -> int:
    result = ci.run_code("import os\nos.getpid()", ctx=ctx).result
    assert result is not None
    return int(result)


# -- one session per user and thread ------------------------------------------------------


async def test_a_variable_set_in_one_thread_is_not_seen_from_another(ci: CodeInterpreter) -> None:
    set_it = await ci.acall(
        {"code": "secret = 'alice-A'\n_ = open('notes.txt', 'w').write('A')"}, ctx=ALICE_A
    )
    assert set_it == "files written in the work directory: notes.txt"
    for other in (ALICE_B, BOB_A, BOB_B):
        seen = await ci.acall({"code": "print(secret)"}, ctx=other)
        assert "NameError: name 'secret' is not defined" in str(seen)
        listed = await ci.acall({"code": "import os\nsorted(os.listdir('.'))"}, ctx=other)
        assert "notes.txt" not in str(listed)
    assert (
        await ci.acall({"code": "secret"}, ctx=ALICE_A) == "execute_result:\n\n```\n'alice-A'\n```"
    )


def test_the_work_directory_is_the_threads_directory_in_the_workspace(
    ci: CodeInterpreter, tmp_path: Path
) -> None:
    ci.run_code("open('report.csv', 'w').write('a,b')", ctx=BOB_B)
    # What storage and doc_parser see for that thread: the same folder.
    folder = Workspace(tmp_path / "ws").session_dir("bob", "B", create=False)
    assert (folder / "report.csv").read_text() == "a,b"
    assert ci.work_dir("B", user_id="bob") == folder


async def test_a_slash_in_a_user_or_thread_never_joins_two_conversations(
    ci: CodeInterpreter,
) -> None:
    one = RunContext.detached(thread_id="bob/notes", user_id="acme")
    two = RunContext.detached(thread_id="notes", user_id="acme/bob")
    await ci.acall({"code": "secret = 'one'\n_ = open('mine.txt', 'w').write('one')"}, ctx=one)
    seen = await ci.acall({"code": "import os\nprint(os.listdir('.'))\nsecret"}, ctx=two)
    assert "NameError: name 'secret' is not defined" in str(seen)
    assert "mine.txt" not in str(seen)
    assert ci.live_sessions() == ["acme/bob%2Fnotes", "acme%2Fbob/notes"]
    assert ci.work_dir("bob/notes", "acme") != ci.work_dir("notes", "acme/bob")


async def test_the_context_wins_and_the_old_keywords_still_name_a_thread(
    ci: CodeInterpreter,
) -> None:
    await ci.acall({"code": "n = 1"}, ctx=ALICE_A, thread_id="elsewhere")
    assert await ci.acall({"code": "n"}, ctx=ALICE_A) == "execute_result:\n\n```\n1\n```"
    await ci.acall({"code": "m = 2"}, thread_id="t-1")  # Qwen-Agent style, no context
    assert ci.run_code("m", session="t-1").result == "2"
    assert "NameError" in str(await ci.acall({"code": "m"}, ctx=ALICE_A))


# -- reaping --------------------------------------------------------------------------------


def test_an_idle_session_is_reaped_by_the_timer_and_its_next_call_says_so(
    tmp_path: Path,
) -> None:
    with make(require_mode("rlimits"), tmp_path, idle_timeout=0.3) as ci:
        ci.run_code("kept = 1\nopen('file.txt', 'w').write('x')", ctx=ALICE_A)
        pid = pid_of(ci, ALICE_A)
        # No further call: only the timer can reap it.
        wait_until(lambda: ci.live_sessions() == [], "the idle session was reaped")
        assert not is_running(pid)
        after = ci.run_code("open('file.txt').read()", ctx=ALICE_A)
        assert after.result == "'x'"  # its files stay
        assert after.notice is not None
        assert "idle for more than 0.3 seconds" in after.notice
        assert "NameError" in str(ci.run_code("kept", ctx=ALICE_A).error)


def test_a_new_session_over_the_cap_stops_the_least_recently_used(tmp_path: Path) -> None:
    with make(require_mode("rlimits"), tmp_path, max_sessions=2) as ci:
        ci.run_code("a = 1", ctx=ALICE_A)
        b_pid = pid_of(ci, BOB_B)
        ci.run_code("a", ctx=ALICE_A)  # alice's thread is now the more recent one
        ci.run_code("c = 3", ctx=ALICE_B)
        assert ci.live_sessions() == ["alice/A", "alice/B"]
        assert not is_running(b_pid)
        back = ci.run_code("1", ctx=BOB_B)
        assert back.notice is not None
        assert "more than 2 sessions were live" in back.notice


def test_a_busy_session_is_not_reaped_and_a_session_over_the_cap_is_refused(
    tmp_path: Path,
) -> None:
    with make(require_mode("rlimits"), tmp_path, max_sessions=1) as ci:
        busy: list[str | None] = []
        runner = threading.Thread(
            target=lambda: busy.append(ci.run_code(BLOCKING, ctx=ALICE_A).result)
        )
        runner.start()
        wait_until((ci.work_dir("A", "alice") / "started").exists, "alice started")
        refused = ci.run_code("1", ctx=BOB_A)
        assert refused.error is not None
        assert "already runs 1 sessions, all busy" in refused.error
        (ci.work_dir("A", "alice") / "go").touch()
        runner.join(60)
        assert busy == ["'released'"]  # alice's call was never cut short
        assert ci.run_code("1", ctx=BOB_A).result == "1"  # alice is idle now: she makes room
        assert ci.live_sessions() == ["bob/A"]


def test_the_reaper_timer_stops_once_no_session_is_left(tmp_path: Path) -> None:
    def reapers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "parley-ci-reaper"]

    with make(require_mode("rlimits"), tmp_path, idle_timeout=0.2) as ci:
        ci.run_code("1", ctx=ALICE_A)
        assert reapers()  # armed by the call
        wait_until(lambda: ci.live_sessions() == [] and not reapers(), "the timer retired")
    with make(require_mode("rlimits"), tmp_path, idle_timeout=600) as ci:
        ci.run_code("1", ctx=ALICE_A)
        assert reapers()
    wait_until(lambda: not reapers(), "close cancelled the timer")


# -- deleting a thread ----------------------------------------------------------------------


async def test_deleting_a_thread_ends_its_session_and_removes_its_files(
    ci: CodeInterpreter,
) -> None:
    ci.run_code("gone = 1\nopen('mine.txt', 'w').write('alice')", ctx=ALICE_A)
    alice_pid = pid_of(ci, ALICE_A)
    ci.run_code("open('mine.txt', 'w').write('bob')", ctx=BOB_A)
    alice_dir, bob_dir = ci.work_dir("A", "alice"), ci.work_dir("A", "bob")
    await ci.end_session("alice", "A")
    assert not alice_dir.exists()
    assert not is_running(alice_pid)
    assert ci.live_sessions() == ["bob/A"]
    assert (bob_dir / "mine.txt").read_text() == "bob"
    fresh = ci.run_code("gone", ctx=ALICE_A)  # a new conversation of the same id
    assert fresh.notice is None
    assert "NameError" in str(fresh.error)


async def test_deleting_a_thread_stops_the_call_running_in_it(ci: CodeInterpreter) -> None:
    running = asyncio.ensure_future(ci.execute(BLOCKING, ctx=ALICE_A))
    started = ci.work_dir("A", "alice") / "started"
    for _ in range(1000):
        if started.exists():
            break
        await asyncio.sleep(0.02)
    await ci.end_session("alice", "A")
    stopped = await running
    assert stopped.error == "This conversation was deleted while the code ran; it was stopped."
    assert not ci.work_dir("A", "alice").exists()


# -- files a call names ---------------------------------------------------------------------


def test_files_outside_the_conversation_and_the_file_roots_are_refused(
    ci: CodeInterpreter, tmp_path: Path
) -> None:
    ci.run_code("open('secret.txt', 'w').write('bob only')", ctx=BOB_B)
    bobs = ci.work_dir("B", "bob") / "secret.txt"
    env = tmp_path / ".env"
    env.write_text("API_KEY=sk-1")
    run = ci.run_code(
        "import os\nsorted(os.listdir('.'))",
        ctx=ALICE_A,
        files=["file:///etc/passwd", str(bobs), bobs.as_uri(), str(env), "../../bob/B/secret.txt"],
    )
    assert run.result == "['.parley']"  # nothing was copied in
    assert run.notice is not None
    assert run.notice.count("outside this conversation's files and the file_roots") == 5


def test_a_file_of_the_conversation_is_used_where_it_is(ci: CodeInterpreter) -> None:
    ci.run_code("os_made = open('in.txt', 'w').write('here')", ctx=ALICE_A)
    run = ci.run_code("open('in.txt').read()", ctx=ALICE_A, files=["in.txt", "missing.txt"])
    assert run.result == "'here'"
    assert run.notice == "Files not copied: missing.txt (no such file)"


# -- what the model and the service are told ------------------------------------------------


@pytest.mark.parametrize("name", ALL_MODES)
def test_the_description_says_what_the_mode_allows(
    name: SandboxMode, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mode = require_mode(name)
    with caplog.at_level(logging.INFO, logger="parley.tools"), make(mode, tmp_path) as ci:
        spec = ci.tool_spec().description
        assert "There is no network access." in spec
        assert "read and written only in the current directory" in spec
        if mode == "bwrap":
            assert "Child processes are allowed." in spec
            assert ci.isolated
        else:
            assert "Starting other programs (subprocess, os.system) is not allowed." in spec
            assert not ci.isolated
        assert ci.function["description"] == spec
        assert f"code_interpreter: sandbox {ci.sandbox_description}" in caplog.text
        assert ci.sandbox_description.startswith("bubblewrap" if mode == "bwrap" else mode)
