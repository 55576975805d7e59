"""Issue 18's attacks on the code interpreter, per sandbox mode, with what each got.

For each sandbox mode this machine runs:

- **the protocol flood**: code writes 1 GiB (1 MiB blocks, no newline) to every descriptor it
  holds past stderr, where parley's protocol pipes were (parley read the flood as one line:
  108 MB to 3.1 GB resident, kept). A parley service (`_serve.py`: uvicorn in a process of
  its own, SQLite, no auth) serves an agent whose scripted model calls `code_interpreter`
  once with `1`, then with the flood; the server's resident set (`VmRSS`, sampled every
  20 ms) idle before, at its peak during and 2 s after, and the result the thread recorded.
- **the other attacks**, each on a fresh interpreter in this process, each row the outcome:
  links planted where parley touches the work directory (`.parley`, its `tmp`, a copy
  target, an output file) and whether the host's folder and `.env` changed; a reply forged
  on every descriptor; `prlimit` / `setpriority` / `sched_setaffinity` on another session's
  REPL child (its host pid) and whether it could still allocate; four children past
  `memory_bytes` (the most the session's uid held at once); files written and copied in
  past the disk quota; a cancelled cell that would write a file 3 s later.

Nothing here is a test. Linux only (`/proc`). Leaves no process, cgroup or lock file.

Run: `python benchmarks/sandbox_attacks.py [--gib N] [--modes bwrap,unshare,rlimits]
[--session-limits auto|cgroup|watchdog] [--skip-flood]` (`PYTHONPATH=<another
checkout>/src` measures another version of parley the same way).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

FLOOD = """
import os
block = b'x' * (1 << 20)
for fd in range(3, 64):
    try:
        for _ in range({blocks}):
            os.write(fd, block)
    except OSError:
        pass
print('flooded')
"""


def app(mode: str, database: str, workspace: str, blocks: int) -> Any:
    """The server's app: one agent whose model starts the interpreter, then floods it."""
    from parley.agents import Agent  # noqa: PLC0415  (in the server's process only)
    from parley.models.testing import ScriptedModel  # noqa: PLC0415
    from parley.service import ServiceSettings, create_app  # noqa: PLC0415
    from parley.tools.builtin import CodeInterpreter, SandboxLimits  # noqa: PLC0415

    limits = SandboxLimits(wall_time=300, cpu_time=300)
    ci = CodeInterpreter({"sandbox": mode, "work_dir": workspace, "limits": limits})
    call = ScriptedModel.tool_call
    model = ScriptedModel(
        [
            call("code_interpreter", {"code": "1"}),
            "started",
            call("code_interpreter", {"code": FLOOD.format(blocks=blocks)}),
            "flooded",
        ]
    )
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{database}")
    return create_app(settings, agents=[Agent("coder", model, tools=[ci])])


def rss_mb(pid: int) -> float:
    """The process's resident set, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def uid_pss_mb(uid: int) -> float:
    """What the processes of real uid `uid` (a session's) hold, in MB (their `Pss`).

    A page shared by n processes counts 1/n in each, so the sum is their real share.
    """
    total = 0.0
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{name}/status").read_text()
            if f"\nUid:\t{uid}\t" not in status:  # the real uid
                continue
            for line in Path(f"/proc/{name}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) / 1024
        except (OSError, ValueError):
            continue
    return total


class Sampler:
    """The peak of a measure (MB), sampled every 20 ms on a thread."""

    def __init__(self, measure: Callable[[], float]) -> None:
        self.measure = measure
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, self.measure())
            except OSError:
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(mode: str, blocks: int) -> dict[str, Any]:
    """One server in `mode`: memory around the flood, and what the thread recorded."""
    with tempfile.TemporaryDirectory(prefix="parley-attack-") as tmp:
        here = Path(__file__).resolve().parent
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", mode, tmp]
        command.append(str(blocks))
        with (
            open(Path(tmp) / "server.log", "w") as log,
            subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=here
            ) as server,
        ):
            assert server.stdout is not None
            assert server.stdin is not None
            port = int(server.stdout.readline().split()[1])
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
                body = {"message": "go", "thread_id": "t"}
                client.post("/invoke", json=body).raise_for_status()
                time.sleep(1.0)
                before = rss_mb(server.pid)
                with Sampler(lambda: rss_mb(server.pid)) as sampler:
                    client.post("/invoke", json=body).raise_for_status()
                time.sleep(2.0)
                after = rss_mb(server.pid)
                messages = client.get("/threads/t").json()["messages"]
            server.stdin.close()
            server.wait(30)
    result = messages[-2]["content"][0]
    text = str(result.get("output", result))
    return {"before": before, "during": max(sampler.peak, before), "after": after, "text": text}


# -- the attacks on an interpreter of this process ----------------------------------------

MiB = 1024 * 1024
PLANT = """
import os, shutil
if os.path.isdir({path!r}) and not os.path.islink({path!r}):
    shutil.rmtree({path!r})
elif os.path.lexists({path!r}):
    os.unlink({path!r})
os.symlink({target!r}, {path!r})
"""
FORGE = """
import json, os
forged = json.dumps({"kind": "cell", "cell": 2, "error": None, "result": "'forged'",
                     "images": [], "stdout": "", "stderr": "", "files": [],
                     "interrupted": False}).encode() + b"\\n"
for fd in range(3, 64):
    try:
        os.write(fd, forged)
    except OSError:
        pass
print('real output')
"""
OTHER_SESSION = """
import json, os, resource
B, done = {pid}, {{}}
for name, call in [
    ("prlimit", lambda: resource.prlimit(B, resource.RLIMIT_AS, (32 << 20, 32 << 20))),
    ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, B, 19)),
    ("sched_setaffinity", lambda: os.sched_setaffinity(B, {{0}})),
]:
    try:
        call()
        done[name] = "DONE"
    except OSError as exc:
        done[name] = type(exc).__name__
print(json.dumps(done))
"""
CHILDREN = """
import subprocess, sys
print('starting 4 children of 600 MiB', flush=True)
hold = "x = bytearray(600 << 20); x[::4096] = b'x' * len(x[::4096]); import time; time.sleep(20)"
children = [subprocess.Popen([sys.executable, '-c', hold]) for _ in range(4)]
print('exit codes', [child.wait() for child in children])
"""
FILES = """
for n in range(4):
    open(f'big{n}.bin', 'wb').write(b'x' * (60 << 20))
    print('wrote', n, flush=True)
import time; time.sleep(10)
"""
LATE = """
import time
print('started', flush=True)
open('started', 'w').close()
time.sleep(3)
open('late.txt', 'w').write('written after the cancel')
"""


def first_line(text: str | None) -> str:
    """What a result says, in one line.

    A traceback's last line, else its first line that is not a section title (`error:`) or
    a fence, to the end of its first sentence.
    """
    lines = [
        line
        for line in (text or "").splitlines()
        if line.strip() and not line.startswith("`") and not line.endswith(":")
    ]
    if not lines:
        return text or ""
    line = lines[-1] if (text or "").startswith("Traceback") else lines[0]
    return line.split(". ")[0][:170]


def fingerprint(*paths: Path) -> str:
    """Owner, mode and contents of the files and folders (a folder's entries too)."""
    found = []
    for path in paths:
        for item in [path, *(sorted(path.iterdir()) if path.is_dir() else [])]:
            info = item.lstat()
            content = b"" if item.is_dir() else item.read_bytes()
            found.append(
                f"{item}:{info.st_uid}:{info.st_mode}:{hashlib.sha256(content).hexdigest()}"
            )
    return "|".join(found)


def repl_pid(work_dir: Path) -> int:
    """The host pid of the REPL child running in `work_dir` (the deepest worker process)."""
    found: dict[int, int] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            if argv[0] == sys.executable.encode() and os.readlink(f"/proc/{name}/cwd") == str(
                work_dir
            ):
                found[int(name)] = int(
                    Path(f"/proc/{name}/stat").read_text().split(")")[-1].split()[1]
                )
        except (OSError, ValueError, IndexError):
            continue
    return next(pid for pid in found if pid not in found.values())


def planted_links(ci: Any, tmp: Path) -> str:
    host, env = tmp / "host-keys", tmp / ".env"
    host.mkdir(mode=0o700)
    (host / "key.pem").write_text("-----BEGIN PRIVATE KEY-----")
    env.write_text("OPENAI_API_KEY=sk-host-secret\n")
    env.chmod(0o600)
    before = fingerprint(host, env)
    ci.run_code("1", session="s")
    for path in (".parley", ".parley/tmp"):  # the worker exits: the next one's start
        ci.run_code(PLANT.format(path=path, target=str(host)) + "os._exit(0)", session="s")
        ci.run_code("1", session="s")
    ci.run_code(PLANT.format(path="data.txt", target=str(env)), session="s")
    copied = ci.run_code(
        "open('data.txt').read()", session="s", files=[str(tmp / "shared" / "data.txt")]
    )
    out = ci.run_code(PLANT.format(path="out.txt", target=str(env)), session="s")
    kept = "unchanged" if fingerprint(host, env) == before else "CHANGED"
    return f"host folder and .env {kept}; copy read {copied.result}; files listed {out.files}"


def forged_reply(ci: Any, tmp: Path) -> str:
    run = ci.run_code(FORGE, session="s")
    return f"result {run.result!r}, stdout {run.stdout!r}; {first_line(run.error)}"


def another_session(ci: Any, tmp: Path) -> str:
    ci.run_code("kept = 'bob'", session="bob")
    pid = repl_pid(ci.work_dir("bob"))
    tried = ci.run_code(OTHER_SESSION.format(pid=pid), session="alice")
    after = ci.run_code("len(bytearray(200 << 20)), kept", session="bob")
    bob = after.result or first_line(after.error)
    return f"{tried.stdout.strip() or first_line(tried.error)}; bob's next cell: {bob}"


def cgroup_peak_mb(ci: Any) -> float:
    """The most memory a session's cgroup held at once (the kernel's count), in MB; 0: none."""
    tree = ci.enforcement.tree
    if tree is None:
        return 0.0
    found = [
        *tree.memory_dir.glob("*/memory.max_usage_in_bytes"),
        *tree.memory_dir.glob("*/memory.peak"),
    ]
    return max((int(path.read_text()) / MiB for path in found), default=0.0)


def children_past_memory(ci: Any, tmp: Path) -> str:
    uid = int(ci.run_code("import os\nos.getuid()", session="s").result)
    with Sampler(lambda: uid_pss_mb(uid) if uid != os.getuid() else 0.0) as held:
        run = ci.run_code(CHILDREN, session="s")
        cgroup = cgroup_peak_mb(ci)
    peak = f"; the session's uid held {held.peak:.0f} MB at most" if held.peak else ""
    peak += f"; its cgroup {cgroup:.0f} MB" if cgroup else ""
    return f"{first_line(run.error) or first_line(run.stdout)}{peak}"


def files_past_quota(ci: Any, tmp: Path) -> str:
    run = ci.run_code(FILES, session="s")
    wrote = run.stdout.count("wrote")
    return f"{wrote} of 4 written; {first_line(run.error)}"


def copied_past_quota(ci: Any, tmp: Path) -> str:
    names = []
    for n in range(4):
        (tmp / "shared" / f"big{n}.bin").write_bytes(b"x" * (60 * MiB))
        names.append(str(tmp / "shared" / f"big{n}.bin"))
    run = ci.run_code(
        "import os\nsorted(f for f in os.listdir() if f.endswith('.bin'))", session="c", files=names
    )
    return f"copied {run.result}; {first_line(run.notice)}"


def cancelled_cell(ci: Any, tmp: Path) -> str:
    folder = ci.work_dir("s")

    async def cancel() -> Any:
        task = asyncio.create_task(ci.execute(LATE, session="s"))
        while not (folder / "started").exists():
            await asyncio.sleep(0.02)
        task.cancel()
        return await task

    run = asyncio.run(cancel())
    time.sleep(4)  # past when the cell would have written late.txt
    late = "WRITTEN" if (folder / "late.txt").exists() else "never written"
    return f"{first_line(run.error)} (stdout {run.stdout!r}); late.txt {late}"


ATTACKS: list[tuple[str, Callable[[Any, Path], str], dict[str, Any]]] = [
    ("links at .parley, .parley/tmp, a copy target, an output file", planted_links, {}),
    ("a reply forged on every descriptor", forged_reply, {}),
    ("prlimit, setpriority, sched_setaffinity on another session", another_session, {}),
    ("4 children of 600 MiB, memory_bytes 1 GiB", children_past_memory, {}),
    ("4 files of 60 MiB written, disk quota 128 MiB", files_past_quota, {"disk_bytes": 128 * MiB}),
    (
        "4 files of 60 MiB copied in, disk quota 128 MiB",
        copied_past_quota,
        {"disk_bytes": 128 * MiB},
    ),
    ("cancel of a cell that writes a file 3 s later", cancelled_cell, {}),
]


def attack(mode: str, backend: str) -> None:
    """Run every attack on a fresh interpreter in `mode`; print a row each."""
    from parley.tools.builtin import CodeInterpreter, SandboxLimits  # noqa: PLC0415

    for name, run, limits in ATTACKS:
        with tempfile.TemporaryDirectory(prefix="parley-attack-") as folder:
            tmp = Path(folder)
            (tmp / "shared").mkdir()
            (tmp / "shared" / "data.txt").write_text("payload")
            cfg = {
                "sandbox": mode,
                "work_dir": str(tmp / "ws"),
                "limits": SandboxLimits(wall_time=60, cpu_time=60, **limits),
                "file_roots": [str(tmp / "shared")],
                "session_limits": backend,
            }
            with CodeInterpreter(cfg) as ci:
                if run is planted_links:
                    print(f"{mode}: {ci.sandbox_description}")
                try:
                    outcome = run(ci, tmp)
                except Exception as exc:  # a broken attack is a row too
                    outcome = f"(the attack failed: {exc!r})"
        print(f"  {name:62} {outcome}", flush=True)


def main() -> None:
    """Measure each mode; print the flood's table, then every other attack's outcome."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="GiB written per descriptor")
    parser.add_argument("--modes", default="bwrap,unshare,rlimits")
    parser.add_argument("--session-limits", default="auto", choices=["auto", "cgroup", "watchdog"])
    parser.add_argument("--skip-flood", action="store_true")
    parser.add_argument("--serve", nargs=3, metavar=("MODE", "DIR", "BLOCKS"), help="internal")
    args = parser.parse_args()
    if args.serve:
        mode, tmp, blocks = args.serve
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _serve import serve  # noqa: PLC0415

        serve(app(mode, f"{tmp}/parley.db", f"{tmp}/ws", int(blocks)), log_level="warning")
        return
    import parley  # noqa: PLC0415
    from parley.tools.builtin import available_sandbox_modes  # noqa: PLC0415

    print(f"parley from {Path(parley.__file__).parent}, as uid {os.getuid()}")
    modes = [mode for mode in args.modes.split(",") if mode in available_sandbox_modes()]
    if not args.skip_flood:
        print(f"\nflood: {args.gib:g} GiB per descriptor, fds 3-63, no newline\n")
        print(f"{'mode':8} {'before MB':>10} {'during MB':>10} {'after MB':>9}  tool result")
        for mode in modes:
            row = measure(mode, int(args.gib * 1024))
            print(
                f"{mode:8} {row['before']:10.0f} {row['during']:10.0f} {row['after']:9.0f}  "
                f"{first_line(row['text'])}",
                flush=True,
            )
    print(f"\nthe other attacks (session limits: {args.session_limits})\n")
    for mode in modes:
        attack(mode, args.session_limits)


if __name__ == "__main__":
    main()
