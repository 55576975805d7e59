"""What agent-service-toolkit's current service has that parley follows: model names every
client release knows, `/{agent_id}/history`, and the older clients' `gpt-4o-mini` still taken.
"""

from __future__ import annotations

import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from tests.service.conftest import MakeService


def _agent(name: str, *answers: str) -> Agent:
    return Agent(name, ScriptedModel(list(answers)))


async def test_history_under_an_agent_reads_the_thread(service: MakeService) -> None:
    svc = await service(_agent("chatbot", "hello"), _agent("other"))
    await svc.client.post("/chatbot/invoke", json={"message": "hi", "thread_id": "t1"})
    for agent in ("chatbot", "other"):  # a thread is the caller's, whichever agent answered
        response = await svc.client.post(f"/{agent}/history", json={"thread_id": "t1"})
        assert response.status_code == 200
        assert response.headers["x-thread-id"] == "t1"
        body = response.json()
        assert [(m["type"], m["content"]) for m in body["messages"]] == [
            ("human", "hi"),
            ("ai", "hello"),
        ]
        assert body["thread_id"] == "t1"


async def test_history_under_an_unknown_agent_is_404(service: MakeService) -> None:
    svc = await service(_agent("chatbot"))
    response = await svc.client.post("/nobody/history", json={"thread_id": "t1"})
    assert response.status_code == 404
    assert response.json() == {"detail": "agent 'nobody' not found"}


async def test_history_under_an_agent_shows_no_other_users_thread(service: MakeService) -> None:
    svc = await service(_agent("chatbot", "hello"), api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    await svc.client.post(
        "/invoke",
        json={"message": "secret", "thread_id": "t-alice"},
        headers={"Authorization": f"Bearer {alice}"},
    )
    response = await svc.client.post(
        "/chatbot/history",
        json={"thread_id": "t-alice"},
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert response.status_code == 200
    assert response.json()["messages"] == []
    refused = await svc.client.post("/chatbot/history", json={"thread_id": "t-alice"})
    assert refused.status_code == 401


async def test_info_lists_only_names_every_client_knows(service: MakeService) -> None:
    svc = await service(_agent("chatbot"))
    info = (await svc.client.get("/info")).json()
    assert info["models"] == ["fake", "openai-compatible"]
    assert info["default_model"] == "fake"


@pytest.mark.parametrize("model", [None, "fake", "openai-compatible", "gpt-4o-mini"])
async def test_the_names_clients_send_mean_the_agents_own_model(
    service: MakeService, model: str | None
) -> None:
    """`null` from the current client, a name from `/info`, or older clients' default."""
    svc = await service(_agent("chatbot", "hello"))
    response = await svc.client.post("/invoke", json={"message": "hi", "model": model})
    assert response.status_code == 200
    assert response.json()["content"] == "hello"


async def test_other_names_are_refused(service: MakeService) -> None:
    svc = await service(_agent("chatbot", "hello"))
    response = await svc.client.post("/invoke", json={"message": "hi", "model": "gpt-5-nano"})
    assert response.status_code == 422
    assert "offered: fake, openai-compatible" in response.json()["detail"][0]["msg"]


async def test_aliases_still_name_what_info_lists_and_what_runs(service: MakeService) -> None:
    own = ScriptedModel(["mine"])
    svc = await service(
        Agent("chatbot", own),
        model_aliases={"gpt-5-nano": None, "gpt-4o-mini": "nope:unknown-provider"},
    )
    info = (await svc.client.get("/info")).json()
    assert (info["models"], info["default_model"]) == (["gpt-5-nano", "gpt-4o-mini"], "gpt-5-nano")
    mine = await svc.client.post("/invoke", json={"message": "hi", "model": "gpt-5-nano"})
    assert mine.json()["content"] == "mine"
    # Named in the aliases, older clients' default means what the aliases say.
    mapped = await svc.client.post("/invoke", json={"message": "hi", "model": "gpt-4o-mini"})
    assert mapped.status_code == 422
    assert "nope" in mapped.json()["detail"][0]["msg"]  # the aliased spec was tried
    refused = await svc.client.post("/invoke", json={"message": "hi", "model": "fake"})
    assert refused.status_code == 422
