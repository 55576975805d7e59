"""Reverse proxies are named, not guessed: `trusted_proxies` says who forwards for whom.

A reverse proxy on this machine connects from 127.0.0.1 whoever its client is. So a request
from 127.0.0.1 is this machine's only when the service knows no proxy forwarded it: a proxy
it trusts names the client in `X-Forwarded-For` (and without that header, the client is no
one known), and, with the setting unset, a forwarding header means a proxy of unknown trust.
Tools that serve this machine only (`local_only`: the code interpreter outside bubblewrap)
are served with auth only once the setting is made. Each case is a real request over a
socket from 127.0.0.1, to uvicorn serving the app as `parley serve` does (its own reading of
`X-Forwarded-For` off), and once under uvicorn's defaults.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.sample_tools import LocalOnly
from tests.service._live import free_port, running
from tests.service._support import wait_for

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

ROOT = Path(__file__).resolve().parents[2]
SECRET = {"Authorization": "Bearer s3cret"}
UNSET = "unset"


@pytest.fixture
def serve(sqlite_url: str) -> Callable[..., Any]:
    """Serve an agent holding a `local_only` tool with some settings; yield its URL."""

    def start(proxies: Any, *, auth: bool = True, **options: Any) -> Any:
        settings: dict[str, Any] = {"database_url": sqlite_url}
        if auth:
            settings["auth_secret"] = "s3cret"
        if proxies != UNSET:
            settings["trusted_proxies"] = proxies
        agent = Agent("risky", ScriptedModel(["local answer"] * 20), tools=[LocalOnly()])
        app = create_app(ServiceSettings(**settings), agents=[agent])
        return running(app, **{"proxy_headers": False, **options})

    return start


def _run(url: str, forwarded_for: str | None, *, auth: bool = True) -> httpx.Response:
    headers = dict(SECRET) if auth else {}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    return httpx.post(f"{url}/invoke", json={"message": "run it"}, headers=headers, timeout=30)


# (trusted_proxies, X-Forwarded-For or None, status, what the refusal says)
WITH_AUTH = [
    # Unset: nothing from this machine is known to be this machine's (a proxy may be in front).
    (UNSET, None, 403, "PARLEY_TRUSTED_PROXIES is not set"),
    (UNSET, "127.0.0.1", 403, "did not say for whom"),
    # No proxy in front: a request from 127.0.0.1 is this machine's; a header changes nothing.
    ([], None, 200, ""),
    ([], "203.0.113.9", 200, ""),
    # A proxy on 127.0.0.1: its requests are its clients'.
    (["127.0.0.1"], None, 403, "did not say for whom"),
    (["127.0.0.1"], "203.0.113.9", 403, "another machine"),
    (["127.0.0.1"], "127.0.0.1", 200, ""),
    # What the client wrote before the proxy's own entry is the client's to forge.
    (["127.0.0.1"], "127.0.0.1, 203.0.113.9", 403, "another machine"),
    (["127.0.0.0/8", "10.0.0.0/8"], "203.0.113.9, 10.1.1.1", 403, "another machine"),
    (["127.0.0.0/8", "10.0.0.0/8"], "::1, 10.1.1.1", 200, ""),
]


@pytest.mark.parametrize(("proxies", "forwarded_for", "status", "why"), WITH_AUTH)
def test_with_auth_local_only_tools_follow_the_trusted_proxies(
    serve: Any, proxies: Any, forwarded_for: str | None, status: int, why: str
) -> None:
    with serve(proxies) as url:
        response = _run(url, forwarded_for)
    assert response.status_code == status, response.text
    if status == 403:
        detail = response.json()["detail"]
        assert "weak_sandbox" in detail
        assert why in detail
    else:
        assert response.json()["content"] == "local answer"


WITHOUT_AUTH = [
    (UNSET, None, 200, ""),  # `parley serve` on this machine, as before
    (UNSET, "203.0.113.9", 403, "did not say for whom"),  # a proxy that names its client
    (["127.0.0.1"], None, 403, "did not say for whom"),
    (["127.0.0.1"], "203.0.113.9", 403, "answers this machine only"),
    (["127.0.0.1"], "127.0.0.1", 200, ""),
]


@pytest.mark.parametrize(("proxies", "forwarded_for", "status", "why"), WITHOUT_AUTH)
def test_without_auth_only_this_machine_is_served_through_a_proxy_too(
    serve: Any, proxies: Any, forwarded_for: str | None, status: int, why: str
) -> None:
    with serve(proxies, auth=False) as url:
        response = _run(url, forwarded_for, auth=False)
        threads = httpx.get(f"{url}/threads", headers=_headers(forwarded_for), timeout=30)
    assert response.status_code == status, response.text
    assert threads.status_code == status  # the whole service, not only its runs
    if status == 403:
        assert why in response.json()["detail"]


def _headers(forwarded_for: str | None) -> dict[str, str]:
    return {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}


@pytest.mark.parametrize(
    ("forwarded_for", "status"), [(None, 403), ("203.0.113.9", 403), ("127.0.0.1", 200)]
)
def test_under_uvicorns_own_proxy_headers_the_answers_are_the_same(
    serve: Any, forwarded_for: str | None, status: int
) -> None:
    # uvicorn's default reads X-Forwarded-For from 127.0.0.1 before the app sees the request.
    with serve(["127.0.0.1"], proxy_headers=True) as url:
        assert _run(url, forwarded_for).status_code == status


async def test_the_start_up_log_says_how_local_is_told(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="parley.service")
    agent = Agent("risky", ScriptedModel([]), tools=[LocalOnly()])
    for proxies, said in (
        (None, "refused to every request (403) until PARLEY_TRUSTED_PROXIES"),
        (["127.0.0.1"], "requests from other machines that would run them are refused"),
    ):
        caplog.clear()
        settings = ServiceSettings(
            database_url=sqlite_url, auth_secret="s3cret", trusted_proxies=proxies
        )
        app = create_app(settings, agents=[agent])
        async with app.router.lifespan_context(app):
            # The agent's tools are told of as it is built, in the warm-up at start-up.
            await wait_for(
                lambda said=said: any(said in r.getMessage() for r in caplog.records),
                f"the start-up log to say {said!r}",
            )
        messages = [r.getMessage() for r in caplog.records]
        if proxies:
            assert any(
                "requests from 127.0.0.1 are taken as a reverse proxy's" in m for m in messages
            )


def test_trusted_proxies_must_be_addresses() -> None:
    with pytest.raises(ValueError, match="not an IP address or network"):
        ServiceSettings(trusted_proxies=["proxy.example"])
    settings = ServiceSettings(trusted_proxies=["127.0.0.1", "10.0.0.0/8", "::1"])
    assert len(settings.proxy_networks) == 3


def test_parley_serve_reads_the_proxy_headers_itself(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    command = [
        *(sys.executable, "-m", "parley", "serve", "--port", str(port)),
        *("--agent", "tests.service._agents:echo_agent", "--trusted-proxies", ""),
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stderr=out, stdout=out, cwd=tmp_path, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"not serving in time:\n{log.read_text()}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        # No proxy in front (`--trusted-proxies ''`): the connection's address decides. Had
        # uvicorn read X-Forwarded-For (its default trusts 127.0.0.1), this client would be
        # 203.0.113.9, another machine, and refused.
        forged = httpx.get(f"{url}/threads", headers={"X-Forwarded-For": "203.0.113.9"})
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert forged.status_code == 200, forged.text
