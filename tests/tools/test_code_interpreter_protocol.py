"""The worker's protocol channel: out of the code's reach, and bounded.

The code runs in a REPL child that holds none of the descriptors parley speaks through; its
supervisor reads the child with a line limit and checks each reply; parley reads the
supervisor with a line limit and a strict schema. Here the code looks for parley's pipes,
forges replies on every descriptor it holds (now and after its cell, for a later cell),
floods them, and reaches for its supervisor; and a stand-in supervisor sends parley what a
broken one might. Every mode; the stand-in runs in the plain mode.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter, SandboxLimits
from parley.tools.builtin import _process as worker_process
from parley.tools.builtin.sandbox import SandboxMode
from tests.tools._sandbox_modes import make, require_mode, wait_until

pytestmark = pytest.mark.timeout(120)

CTX = RunContext.detached(thread_id="t", user_id="alice")
MALFORMED = "the interpreter sent a malformed reply"


def own_pipes() -> set[str]:
    """The pipes this process (parley) holds, as /proc names them (`pipe:[inode]`)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


# Writes to every descriptor the code holds past stderr, ignoring those that refuse.
TO_EVERY_FD = """
import os
def to_every_fd(data):
    for fd in range(3, 256):
        try:
            os.set_blocking(fd, False)
            os.write(fd, data)
        except OSError:
            pass
"""
FORGED = [
    # parley's own protocol, as main's worker spoke it and as the supervisor does
    {"stdout": "forged", "stderr": "", "error": None, "result": "'forged'", "images": [],
     "files": []},
    {"kind": "cell", "cell": 2, "stdout": "forged", "stderr": "", "error": None,
     "result": "'forged'", "images": [], "files": [], "interrupted": False},
    # the child's, for the next cell
    {"cell": 2, "error": None, "result": "'forged'", "images": []},
]  # fmt: skip
FORGERY = b"".join(json.dumps(message).encode() + b"\n" for message in FORGED)


def test_the_code_holds_no_descriptor_of_parleys_pipes(ci: CodeInterpreter) -> None:
    run = ci.run_code(
        "import os\n"
        "links = {}\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        links[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
        "    except OSError:\n"
        "        pass\n"
        "links",
        ctx=CTX,
    )
    assert run.error is None, run.error
    assert run.result is not None
    held = set(ast.literal_eval(run.result).values())
    assert held & own_pipes() == set()


def test_a_forged_reply_is_never_taken_for_a_later_cells(ci: CodeInterpreter) -> None:
    # The cell returns at once; a thread of it writes the forgeries once it has returned,
    # between two cells (main's parley took one for the next cell's reply).
    code = TO_EVERY_FD + textwrap.dedent(
        f"""
        import threading, time
        def later():
            time.sleep(0.3)
            to_every_fd({FORGERY!r})
        threading.Thread(target=later, daemon=True).start()
        print('real 1')
        """
    )
    first = ci.run_code(code, ctx=CTX)
    assert first.stdout == "real 1\n"
    # The supervisor takes a line while no cell runs for what it is, and ends the worker.
    wait_until(lambda: ci.live_sessions() == [], "the worker ended")
    second = ci.run_code("print('real 2')", ctx=CTX)
    assert "forged" not in second.to_text()
    assert second.stdout == "real 2\n"
    assert second.notice is not None
    assert "restarted" in second.notice


def test_a_reply_forged_during_the_cell_is_a_malformed_reply(ci: CodeInterpreter) -> None:
    run = ci.run_code(TO_EVERY_FD + f"to_every_fd({FORGERY!r})\nprint('real')", ctx=CTX)
    assert "forged" not in run.to_text()
    assert run.error is not None
    assert MALFORMED in run.error
    after = ci.run_code("print('after')", ctx=CTX)
    assert after.stdout == "after\n"
    assert after.notice is not None
    assert MALFORMED in after.notice


def test_a_flood_of_the_descriptors_ends_the_worker_and_the_server_stays_small(
    ci: CodeInterpreter,
) -> None:
    ci.run_code("1", ctx=CTX)  # the worker started: what follows is the flood alone
    tracemalloc.start()
    try:
        flood = TO_EVERY_FD.replace("os.set_blocking(fd, False)", "pass") + textwrap.dedent(
            """
            block = b'x' * (1 << 20)
            def flood():
                for fd in range(3, 64):
                    try:
                        for _ in range(256):  # 256 MiB, no newline
                            os.write(fd, block)
                    except OSError:
                        pass
            flood()
            print('flooded')
            """
        )
        run = ci.run_code(flood, ctx=CTX)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.error is not None
    assert MALFORMED in run.error
    assert "longer than" in run.error
    # parley (this process) never held the flood: it reads at most a line's limit, and the
    # supervisor cut the flood off long before.
    assert peak < 16 * 1024 * 1024
    assert ci.run_code("print('again')", ctx=CTX).stdout == "again\n"


def test_the_supervisor_is_out_of_the_codes_reach(ci: CodeInterpreter) -> None:
    run = ci.run_code(
        textwrap.dedent(
            """
            import os
            parent = os.getppid()
            reached = []
            for path, flags in [(f'/proc/{parent}/mem', os.O_RDONLY),
                                (f'/proc/{parent}/environ', os.O_RDONLY),
                                (f'/proc/{parent}/fd/0', os.O_WRONLY),
                                (f'/proc/{parent}/fd/1', os.O_WRONLY),
                                (f'/proc/{parent}/fd/3', os.O_RDONLY),
                                (f'/proc/{parent}/fd/4', os.O_WRONLY)]:
                try:
                    os.close(os.open(path, flags))
                    reached.append(path)
                except OSError:
                    pass
            print('reached:', reached)
            """
        ),
        ctx=CTX,
    )
    assert run.error is None, run.error
    assert run.stdout == "reached: []\n"


def pid_behind(pidfd: int) -> int:
    """The process a pidfd names, in this process's PID namespace (its fdinfo says)."""
    for line in Path(f"/proc/self/fdinfo/{pidfd}").read_text().splitlines():
        if line.startswith("Pid:"):
            return int(line.split()[1])
    raise AssertionError("not a pidfd")


def test_parley_holds_the_process_that_runs_the_code(mode: SandboxMode, tmp_path: Path) -> None:
    # Under bubblewrap and unshare's PID namespace the supervisor names its child by a pid
    # of that namespace (3), which on the host is another process (a kernel thread here):
    # the child parley signals on a timeout, a cancel or a limit must be the code's own.
    worker = worker_process.WorkerProcess(mode, tmp_path, SandboxLimits())
    try:
        reply = worker.request("import os\nos.getpid(), os.getuid()", 30)
        inner, uid = ast.literal_eval(reply.result or "")
        assert worker._child is not None
        pid = pid_behind(worker._child)
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        assert int(status["NSpid"].split()[-1]) == inner
        assert int(status["Uid"].split()[0]) == uid
        assert pid in worker_process.session_processes(worker.pid)
        # The kernel's out-of-memory killer takes the code's process before the supervisor
        # (which then reports the cell's output); the supervisor's score is parley's.
        supervisor = int(status["PPid"])
        assert Path(f"/proc/{pid}/oom_score_adj").read_text() == "1000\n"
        own = Path("/proc/self/oom_score_adj").read_text()
        assert Path(f"/proc/{supervisor}/oom_score_adj").read_text() == own
    finally:
        worker.kill()


# -- a supervisor that misbehaves -----------------------------------------------------------

STAND_IN = """
import json, os, sys
sys.stdin.readline()  # the configuration
print(json.dumps({"kind": "ready", "pid": os.getpid(), "layers": {}}), flush=True)
sys.stdin.readline()  # the cell
out = sys.stdout.buffer
BEHAVIOUR
out.flush()
sys.stdin.readline()
"""
BEHAVIOURS = {
    "a line far past the limit": (
        "for _ in range(256):\n    out.write(b'x' * (1 << 20))",
        "a line longer than",
    ),
    "not JSON": ("out.write(b'not json\\n')", "Invalid JSON"),
    "an unknown kind": (
        'out.write(b\'{"kind": "shell", "cmd": "id"}\\n\')',
        "does not match",
    ),
    "an extra field": (
        "out.write(json.dumps({'kind': 'cell', 'cell': 1, 'stdout': '', 'stderr': '', "
        "'error': None, 'result': None, 'images': [], 'files': [], 'interrupted': False, "
        "'run': 'rm -rf /'}).encode() + b'\\n')",
        "Extra inputs are not permitted",
    ),
    "a wrong type": (
        "out.write(json.dumps({'kind': 'cell', 'cell': 1, 'stdout': 5, 'stderr': '', "
        "'error': None, 'result': None, 'images': [], 'files': [], "
        "'interrupted': False}).encode() + b'\\n')",
        "Input should be a valid string",
    ),
    "an image that is not base64": (
        "out.write(json.dumps({'kind': 'cell', 'cell': 1, 'stdout': '', 'stderr': '', "
        "'error': None, 'result': None, 'images': ['%%%'], 'files': [], "
        "'interrupted': False}).encode() + b'\\n')",
        "base64",
    ),
    "another cell's reply": (
        "out.write(json.dumps({'kind': 'cell', 'cell': 7, 'stdout': '', 'stderr': '', "
        "'error': None, 'result': None, 'images': [], 'files': [], "
        "'interrupted': False}).encode() + b'\\n')",
        "where cell 1's reply was due",
    ),
}


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_parley_reads_its_worker_with_a_limit_and_a_strict_schema(
    behaviour: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, said = BEHAVIOURS[behaviour]
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN.replace("BEHAVIOUR", code))
    monkeypatch.setattr(worker_process, "WORKER_SCRIPT", script)
    limits = SandboxLimits(output_chars=1000)
    with make(require_mode("rlimits"), tmp_path / "ws", limits) as ci:
        tracemalloc.start()
        try:
            run = ci.run_code("1", ctx=CTX)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert run.error is not None
        assert run.error.startswith(f"The interpreter stopped: {MALFORMED} (")
        assert said in run.error
        assert ci.live_sessions() == []  # the worker was ended
    # A line is read up to the limit (36 MiB here), never the 256 MiB sent.
    assert peak < 64 * 1024 * 1024
    assert sys.getsizeof(run.error) < 4096
