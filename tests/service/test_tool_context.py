"""Tools on the service: each call knows its user and thread; a deleted thread ends the tools'
state for it; tools for this machine only are refused to others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.messages import ToolCallBlock
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel
from parley.tools import RunContext, Tool, tool
from parley.tools.builtin.sandbox import SandboxMode
from tests.sample_tools import LocalOnly
from tests.service._support import wait_for
from tests.service.conftest import MakeService
from tests.tools._sandbox_modes import make, require_mode


def calling(name: str, call_id: str) -> ChatResponse:
    block = ToolCallBlock(id=call_id, name=name, input={})
    return ChatResponse(content=[block], finish_reason="tool_calls")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class SessionTool(Tool):
    """Remembers per conversation what it saw, and what was ended."""

    name = "session_tool"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[RunContext[Any]] = []
        self.ended: list[tuple[str | None, str]] = []

    async def acall(self, params: dict[str, Any], ctx: RunContext[Any] | None = None) -> str:
        assert ctx is not None
        self.seen.append(ctx)
        return ctx.session_key

    async def end_session(self, user_id: str | None, thread_id: str) -> None:
        self.ended.append((user_id, thread_id))


async def test_each_call_knows_its_user_and_thread_and_delete_ends_the_session(
    service: MakeService,
) -> None:
    session_tool = SessionTool()
    script = [calling("session_tool", "c1"), "one", calling("session_tool", "c2"), "two"]
    agent = Agent("helper", ScriptedModel(script), tools=[session_tool])
    svc = await service(agent, api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")

    first = await svc.client.post(
        "/invoke", json={"message": "hi", "thread_id": "t-alice"}, headers=bearer(alice)
    )
    second = await svc.client.post(
        "/invoke", json={"message": "hi", "thread_id": "t-bob"}, headers=bearer(bob)
    )
    assert first.status_code == second.status_code == 200

    [ctx_a, ctx_b] = session_tool.seen
    assert (ctx_a.user_id, ctx_a.thread_id, ctx_a.agent) == ("alice", "t-alice", "helper")
    assert (ctx_b.user_id, ctx_b.thread_id) == ("bob", "t-bob")
    assert ctx_a.run_id == first.headers["X-Run-Id"]
    assert ctx_a.session_key != ctx_b.session_key

    # Bob cannot end Alice's session: her thread is not his (404), and nothing is ended.
    assert (await svc.client.delete("/threads/t-alice", headers=bearer(bob))).status_code == 404
    assert session_tool.ended == []
    assert (await svc.client.delete("/threads/t-alice", headers=bearer(alice))).status_code == 204
    assert session_tool.ended == [("alice", "t-alice")]


async def test_a_tool_for_this_machine_only_is_refused_to_other_machines(
    service: MakeService,
) -> None:
    @tool
    def harmless() -> str:
        """Harmless."""
        return "fine"

    risky = Agent("risky", ScriptedModel(["local answer"]), tools=[LocalOnly()])
    safe = Agent("safe", ScriptedModel(["remote answer"]), tools=[harmless])
    # Nothing proxies to this service: a request from this machine is this machine's.
    svc = await service(risky, safe, auth_secret="s3cret", trusted_proxies=[])
    transport = httpx.ASGITransport(app=svc.app, client=("10.1.2.3", 50000))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://parley.test", headers=bearer("s3cret")
    ) as remote:
        refused = await remote.post("/risky/invoke", json={"message": "run it"})
        assert refused.status_code == 403
        assert "weak_sandbox" in refused.json()["detail"]
        assert "bubblewrap" in refused.json()["detail"]
        served = await remote.post("/safe/invoke", json={"message": "hi"})
        assert served.status_code == 200
        assert served.json()["content"] == "remote answer"
        assert (await remote.get("/threads")).status_code == 200  # only runs are refused

    local = await svc.client.post(
        "/risky/invoke", json={"message": "run it"}, headers=bearer("s3cret")
    )
    assert local.status_code == 200
    assert local.json()["content"] == "local answer"


@pytest.mark.parametrize("mode", ["bwrap", "rlimits"])
async def test_the_code_interpreter_outside_bubblewrap_serves_this_machine_only(
    service: MakeService, tmp_path: Path, mode: SandboxMode, caplog: pytest.LogCaptureFixture
) -> None:
    require_mode(mode)
    script = [ScriptedModel.tool_call("code_interpreter", {"code": "print(6 * 7)"}), "42"]
    with make(mode, tmp_path / "ws") as interpreter:
        assert interpreter.local_only is (mode != "bwrap")
        agent = Agent("coder", ScriptedModel(script), tools=[interpreter])
        caplog.set_level("WARNING", logger="parley.service")
        svc = await service(agent, auth_secret="s3cret", trusted_proxies=[])
        transport = httpx.ASGITransport(app=svc.app, client=("10.1.2.3", 50000))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://parley.test", headers=bearer("s3cret")
        ) as remote:
            answer = await remote.post("/coder/invoke", json={"message": "6 * 7?"})

        def warnings() -> list[str]:
            return [r.getMessage() for r in caplog.records if "this machine only" in r.message]

        warned = warnings() if mode == "bwrap" else await wait_for(warnings, "the warning")
    if mode == "bwrap":
        assert answer.status_code == 200
        assert answer.json()["content"] == "42"
        assert warned == []
    else:
        assert answer.status_code == 403
        assert "code_interpreter" in answer.json()["detail"]
        assert len(warned) == 1
        assert "'coder'" in warned[0]
