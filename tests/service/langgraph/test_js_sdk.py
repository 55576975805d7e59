"""LangGraph's server API (`/langgraph`) driven by the official `@langchain/langgraph-sdk`.

`tests/js/client.mjs` runs under node with the SDK pinned in `tests/js/package-lock.json`
(installed with `npm ci` into a cache folder named after the lock file's hash, once), against
the app served on 127.0.0.1, and prints one JSON line per step; this test checks them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from parley.service import ServiceSettings, create_app
from tests._requires import require_program
from tests.service._live import running
from tests.service.langgraph._proxy import cutting_proxy
from tests.service.langgraph.test_python_sdk import ANSWER, _agents, _keys

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

_JS = Path(__file__).resolve().parents[2] / "js"
_NPM_TIMEOUT = 300
_CLIENT_TIMEOUT = 120


def _installed() -> Path:
    """A folder with the pinned SDK installed and the client beside it (`npm ci`, cached)."""
    npm = require_program("npm")
    require_program("node", "nodejs")
    lock = (_JS / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    home = cache / "parley-js" / hashlib.sha256(lock).hexdigest()[:16]
    if not (home / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        home.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(_JS / name, home / name)
        subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=home,
            check=True,
            timeout=_NPM_TIMEOUT,
            capture_output=True,
        )
    shutil.copy(_JS / "client.mjs", home / "client.mjs")
    return home


def _steps(home: Path, base: str, alice: str, bob: str, proxy: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(home / "client.mjs"), base, alice, bob, proxy],
        capture_output=True,
        text=True,
        timeout=_CLIENT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line.pop("step"): line for line in lines}


def test_the_js_sdk_runs_parleys_agents(tmp_path: Path) -> None:
    home = _installed()
    url = f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"
    alice, bob = asyncio.run(_keys(url))
    app = create_app(ServiceSettings(database_url=url, api_keys=True), agents=_agents())
    with running(app) as base, cutting_proxy(int(base.rsplit(":", 1)[1]), cut_after=4) as proxy:
        steps = _steps(home, base, alice, bob, proxy.url)
    assert "done" in steps
    assert steps["assistants"]["graphs"] == ["echo", "slow", "mail"]

    live = steps["stream"]["parts"]
    names = [p["event"] for p in live]
    assert names[:2] == ["metadata", "values"]
    assert names[-2:] == ["updates", "values"]
    assert set(names[2:-2]) == {"messages"}
    run_id = live[0]["data"]["run_id"]
    assert steps["stream"]["created"]["run_id"] == run_id  # read from Content-Location
    assert steps["stream"]["created"]["thread_id"]
    text = "".join(p["data"][0]["content"] for p in live if p["event"] == "messages")
    assert text == ANSWER
    assert [p["id"] for p in live[:3]] == ["1", "1.1", "2"]
    assert steps["joinStream"]["parts"] == live  # Last-Event-ID -1: all of it again

    assert [m["content"] for m in steps["wait"]["values"]["messages"]] == [
        "hi",
        ANSWER,
        "again",
        ANSWER,
    ]
    create = steps["create"]
    assert create["run"]["status"] == "pending"  # a 200 body the SDK parsed, the run as made
    assert create["joined"]["messages"][-1]["content"] == ANSWER
    assert create["after"]["status"] == "success"
    assert steps["history"]["sizes"] == [6, 4, 2]
    assert len(steps["state"]["state"]["values"]["messages"]) == 6

    assert steps["cancel"]["run"]["status"] == "interrupted"

    parked = steps["interrupt"]["parked"]
    assert parked["__interrupt__"][0]["value"]["calls"][0]["name"] == "send_email"
    resumed = steps["interrupt"]["resumed"]
    assert [p["event"] for p in resumed] == ["metadata", "values", "values", "values"]
    assert resumed[-1]["data"]["messages"][-1]["content"] == "Sent."

    cut = steps["reconnect"]
    assert len(cut["whole"]) > 8  # the proxy cut it after 4 frames
    assert cut["parts"] == cut["whole"]
    run_path = f"/langgraph/threads/{cut['thread']}"
    assert [r.split(" ")[:2] for r in proxy.requests[:2]] == [
        ["POST", f"{run_path}/runs/stream"],
        ["GET", f"{run_path}/runs/{cut['parts'][0]['data']['run_id']}/stream"],  # Location
    ]
    assert proxy.headers[1]["last-event-id"] == cut["parts"][3]["id"]  # the last it had

    assert steps["otherUser"] == {"get": 404, "run": 404, "stream": 404, "search": 0}
