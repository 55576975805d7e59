"""`GET /threads/{id}`: each message with the run that wrote it, in Msg's own JSON."""

from __future__ import annotations

from parley.messages import Msg
from tests.service.conftest import MakeService
from tests.service.test_toolkit_api import calc_agent, tool_round


async def test_thread_detail_names_each_messages_run(service: MakeService) -> None:
    svc = await service(calc_agent(*tool_round(), "second"))
    first = (await svc.client.post("/invoke", json={"message": "1+2?", "thread_id": "t"})).json()
    second = (await svc.client.post("/invoke", json={"message": "more", "thread_id": "t"})).json()
    detail = (await svc.client.get("/threads/t")).json()
    assert [m["role"] for m in detail["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert detail["run_ids"] == [first["run_id"]] * 4 + [second["run_id"]] * 2
    # Msg's JSON as Msg writes it: fields left unset are absent, and it parses back.
    for data in detail["messages"]:
        assert None not in data.values()
        assert Msg.model_validate(data).role == data["role"]


async def test_messages_no_run_wrote_have_no_run_id(service: MakeService) -> None:
    svc = await service(calc_agent("ok"))
    await svc.client.post("/invoke", json={"message": "hi", "thread_id": "seeded"})
    await svc.state.store.add_messages("seeded", "local", [Msg.system("a note")], None)
    detail = (await svc.client.get("/threads/seeded")).json()
    assert detail["run_ids"][-1] is None
    assert len(detail["run_ids"]) == len(detail["messages"]) == 3
