"""What `create_app` checks, and what a served agent keeps in memory."""

from __future__ import annotations

import httpx
import pytest

from parley.agents import Agent
from parley.errors import ConfigurationError
from parley.models.testing import ScriptedModel
from parley.service import create_app
from tests.sample_tools import send_email
from tests.service._support import frames
from tests.service.conftest import MakeService


def test_an_app_without_agents_is_refused_at_once() -> None:
    with pytest.raises(ConfigurationError, match="no agent to serve"):
        create_app(agents=[])


async def test_a_parked_run_lives_in_the_store_not_in_the_shared_agent(
    service: MakeService,
) -> None:
    call = ScriptedModel.tool_call("send_email", {"to": "a@b.c"})
    model = ScriptedModel([call, call], stream=True)
    agent = Agent("mailer", model, tools=[send_email])
    svc = await service(agent)
    for thread in ("one", "two"):
        response = await svc.client.post("/stream", json={"message": "mail", "thread_id": thread})
        assert [f["type"] for f in frames(response.text)[:-1]][-1] == "interrupt"
    model.assert_consumed()
    # One agent serves every thread: what it parked is the store's to keep.
    assert agent.pending_approvals == []
    assert len(await svc.state.store.pending_approvals("one", "local")) == 1
    assert len(await svc.state.store.pending_approvals("two", "local")) == 1


async def test_a_database_that_cannot_be_reached_is_a_503(
    service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = await service(Agent("helper", ScriptedModel([])))

    async def refused(*_args: object, **_kwargs: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(svc.state.store, "get_thread", refused)
    response = await svc.client.get("/threads/anything")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json() == {"detail": "the database is unavailable; try again shortly"}


@pytest.mark.parametrize(
    ("client", "status"),
    [("127.0.0.1", 200), ("::1", 200), ("::ffff:127.0.0.1", 200), ("10.1.2.3", 403)],
)
async def test_without_auth_only_this_machine_is_served(
    service: MakeService, client: str, status: int
) -> None:
    svc = await service(Agent("helper", ScriptedModel([])))
    transport = httpx.ASGITransport(app=svc.app, client=(client, 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as other:
        response = await other.get("/threads")
    assert response.status_code == status
    if status == 403:
        assert "answers this machine only" in response.json()["detail"]


async def test_with_auth_other_machines_are_served(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel([])), auth_secret="s3cret")
    transport = httpx.ASGITransport(app=svc.app, client=("10.1.2.3", 50000))
    headers = {"Authorization": "Bearer s3cret"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", headers=headers
    ) as other:
        assert (await other.get("/threads")).status_code == 200
