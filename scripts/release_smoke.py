"""The README's quick start against an installed wheel (run by scripts/release-check.sh).

Run with the clean virtualenv's interpreter, from outside the checkout, it drives that
virtualenv's `parley` command as a user would: `parley --version`, `parley chat` on the
embedded model, then `parley serve` on a free port of 127.0.0.1, answering `GET /health`,
`GET /info` and `POST /invoke` with the local model; the server is stopped by its process id.
Every wait is bounded. The standard library only: the check must not lean on the dev tools.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

QUESTION = "What is the capital of France?"
START_TIMEOUT = 120.0  # the service loads the local model before it answers
REQUEST_TIMEOUT = 180.0  # one agent run on the 135M model, code interpreter included


def main() -> int:
    """Run each step; the first failure raises with what was seen."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--venv", type=Path, required=True, help="the clean virtualenv")
    parser.add_argument("--version", required=True, help="the version the wheel was built as")
    args = parser.parse_args()
    parley = args.venv / "bin" / "parley"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as work:
        check_version(parley, args.version, env)
        check_chat(parley, env, Path(work))
        check_serve(parley, env, Path(work))
    print("release-check: the installed wheel passed the quick start")
    return 0


def run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    """Run a command to its end (bounded), failing with its output when it fails."""
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def check_version(parley: Path, version: str, env: dict[str, str]) -> None:
    """`parley --version` names the wheel's version: the metadata came through the build."""
    out = run([str(parley), "--version"], env, parley.parent).strip()
    expect(out == f"parley {version}", f"`parley --version` said {out!r}, the wheel is {version}")
    print(f"release-check: {out}")


def check_chat(parley: Path, env: dict[str, str], work: Path) -> None:
    """`parley chat "question"` answers on the embedded model, offline."""
    started = time.monotonic()
    answer = run([str(parley), "chat", QUESTION], env, work)
    expect("Paris" in answer, f"`parley chat` answered {answer!r}")
    print(f"release-check: parley chat answered in {time.monotonic() - started:.1f} s: {answer!r}")


def check_serve(parley: Path, env: dict[str, str], work: Path) -> None:
    """`parley serve` answers `/health`, `/info` and `/invoke`, then stops on SIGTERM."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    command = [str(parley), "serve", "--port", str(port)]
    command += ["--database-url", f"sqlite+aiosqlite:///{work / 'parley.db'}"]
    serve_env = {**env, "PARLEY_WORKSPACE": str(work / "workspace")}
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=out, env=serve_env, cwd=work)
    try:
        wait_until_up(base, server, log)
        info = request(f"{base}/info")
        expect(info.get("default_agent") == "assistant", f"/info: {info}")
        expect(any(a.get("key") == "assistant" for a in info["agents"]), f"/info: {info}")
        started = time.monotonic()
        answer = request(f"{base}/invoke", {"message": QUESTION})
        expect(answer.get("type") == "ai" and answer.get("content"), f"/invoke: {answer}")
        expect(bool(answer.get("thread_id")), f"/invoke named no thread: {answer}")
        took = time.monotonic() - started
        print(f"release-check: /invoke answered in {took:.1f} s: {answer['content']!r}")
    except BaseException:
        print(log.read_text(), file=sys.stderr)
        raise
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    # uvicorn shuts down gracefully, then raises the signal it caught again (-SIGTERM).
    stopped = server.returncode in (0, -signal.SIGTERM)
    done = "Application shutdown complete" in log.read_text()
    expect(stopped and done, f"parley serve exited {server.returncode}:\n{log.read_text()}")


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_up(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    """Wait for `/health` to answer, at most START_TIMEOUT seconds."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        expect(server.poll() is None, f"parley serve exited {server.returncode}")
        try:
            if request(f"{base}/health", timeout=5).get("status") == "ok":
                return
        except (OSError, urllib.error.URLError):
            pass  # not listening yet
        expect(time.monotonic() < deadline, f"no answer on {base}/health in {START_TIMEOUT} s")
        time.sleep(0.5)


def request(url: str, body: Any = None, timeout: float = REQUEST_TIMEOUT) -> Any:
    """GET `url`, or POST `body` as JSON; the JSON answer (an HTTP error raises)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {} if body is None else {"Content-Type": "application/json"}
    req = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as response:
        return json.loads(response.read())


def expect(condition: object, message: str) -> None:
    """Fail the check with `message` unless `condition` holds."""
    if not condition:
        raise SystemExit(f"release-check failed: {message}")


if __name__ == "__main__":
    sys.exit(main())
