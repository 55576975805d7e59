"""The code interpreter's protocol flood: the server's memory before, during and after.

The attack of issue 18: code run by the code interpreter writes 1 GiB (1 MiB blocks, no
newline) to every descriptor it holds past stderr, where parley's protocol pipes were
(parley read the flood as one line: 108 MB to 3.1 GB resident, kept). For each sandbox mode
this machine runs, a parley service (`_serve.py`: uvicorn in a process of its own, SQLite,
no auth) serves an agent whose scripted model calls `code_interpreter` once with `1` (to
start the worker), then with the flood. The server's resident set (`VmRSS`, sampled every
20 ms) is read idle after the first call ("before"), at its peak during the flood's request
("during") and 2 s after it returned ("after"), with the first line of the tool result
the thread recorded. Nothing here is a test. Linux only (`/proc`).

Run: `python benchmarks/sandbox_attacks.py [--gib N] [--modes bwrap,unshare,rlimits]`
(`PYTHONPATH=<another checkout>/src` measures another version of parley the same way).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
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


class Sampler:
    """The peak resident set of a process, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
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
                with Sampler(server.pid) as sampler:
                    client.post("/invoke", json=body).raise_for_status()
                time.sleep(2.0)
                after = rss_mb(server.pid)
                messages = client.get("/threads/t").json()["messages"]
            server.stdin.close()
            server.wait(30)
    result = messages[-2]["content"][0]
    text = str(result.get("output", result))
    return {"before": before, "during": max(sampler.peak, before), "after": after, "text": text}


def _first_line(text: str) -> str:
    """The result's first line that is not a section title (`error:`) or a fence."""
    lines = [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith("`") and not line.endswith(":")
    ]
    return (lines[0] if lines else text)[:110]


def main() -> None:
    """Measure each mode; print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="GiB written per descriptor")
    parser.add_argument("--modes", default="bwrap,unshare,rlimits")
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

    print(f"parley from {Path(parley.__file__).parent}")
    print(f"flood: {args.gib:g} GiB per descriptor, fds 3-63, no newline\n")
    print(f"{'mode':8} {'before MB':>10} {'during MB':>10} {'after MB':>9}  tool result")
    blocks = int(args.gib * 1024)
    for mode in args.modes.split(","):
        if mode not in available_sandbox_modes():
            print(f"{mode:8} (not available on this machine)")
            continue
        row = measure(mode, blocks)
        print(
            f"{mode:8} {row['before']:10.0f} {row['during']:10.0f} {row['after']:9.0f}  "
            f"{_first_line(row['text'])}"
        )


if __name__ == "__main__":
    main()
