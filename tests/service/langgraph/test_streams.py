"""A takeover's second start in a run's log, as LangGraph's stream shows it: `FrameMaker`
alone, and a run whose worker died taken over and streamed again from its stored log."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import update

from parley.agents import Agent
from parley.agents.events import AgentEvent, MessageCompleted, RunStarted, TextDelta
from parley.messages import Msg
from parley.models.testing import ScriptedModel
from parley.service.langgraph.streams import FrameMaker
from parley.service.runs_protocol import RunInput
from parley.service.store.queue import RunQueue, new_run_id
from parley.service.store.tables import runs
from tests.service._queued import echo, wait_status
from tests.service.conftest import MakeService

pytestmark = pytest.mark.usefixtures("no_ambient_settings")


def _frames(maker: FrameMaker, events: list[AgentEvent]) -> list[tuple[str, Any, str]]:
    return [
        (f.event, f.data, f.id)
        for seq, event in enumerate(events, 1)
        for f in maker.frames(seq, event)
    ]


def test_a_takeover_starts_again_with_its_attempt_and_the_stored_messages() -> None:
    question = Msg.user("go")
    first = Msg.assistant("first answer")
    maker = FrameMaker(
        run_id="r1",
        thread_id="t1",
        assistant_id="a1",
        graph_id="echo",
        modes=frozenset({"values", "messages-tuple"}),
        initial=[question],
    )
    log: list[AgentEvent] = [
        RunStarted(run_id="r1", agent="echo"),
        TextDelta(text="first "),
        MessageCompleted(msg=first),  # stored whole before its worker died
        TextDelta(text="never finis"),  # the dead attempt's unfinished message
        RunStarted(run_id="r1", agent="echo", attempt=2),
        TextDelta(text="again"),
    ]
    frames = _frames(maker, log)
    metadata = [(data, fid) for name, data, fid in frames if name == "metadata"]
    assert metadata == [
        ({"run_id": "r1", "attempt": 1}, "1"),
        ({"run_id": "r1", "attempt": 2}, "5"),
    ]
    after = frames[[fid for _, _, fid in frames].index("5") :]
    assert after[1][0] == "values"  # the thread as the takeover starts it: no partial message
    assert [m["content"] for m in after[1][1]["messages"]] == ["go", "first answer"]
    chunk, meta = after[2][1]
    assert chunk["content"] == "again"
    assert meta["run_attempt"] == 2
    partial = next(d for n, d, fid in frames if fid == "4")[0]
    assert chunk["id"] != partial["id"]  # a new message, not the dead one's continued


async def test_a_run_taken_over_streams_both_starts_from_its_log(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel([echo], stream=True, chunk_size=4)))
    store, log = svc.state.store, svc.state.events
    assert log is not None
    # A worker claims the run, stores its question and two events, and dies mid-answer.
    dead = RunQueue(store, worker_id="dead-worker", lease_seconds=30, max_attempts=9)
    run_id, question = new_run_id(), Msg.user("still there?")
    await dead.create(run_id, "t", "local", "helper", "m", RunInput(message=question), reserve=True)
    assert await dead.claim(run_id, then=lambda _h, _r: [question]) is not None
    writer = await log.writer(run_id)
    writer.put(RunStarted(run_id=run_id, agent="helper"))
    writer.put(TextDelta(text="ech"))
    await writer.close()
    past = datetime(2000, 1, 1, tzinfo=UTC)  # its lease lapses: the live worker takes it
    await store.transact(
        lambda conn: conn.execute(update(runs).where(runs.c.id == run_id).values(lease_until=past))
    )
    assert await wait_status(svc.client, run_id, "completed") == "completed"

    path = f"/langgraph/threads/t/runs/{run_id}"
    query = {"stream_mode": ["values", "messages-tuple"]}
    got = await svc.client.get(f"{path}/stream", params=query, headers={"Last-Event-ID": "-1"})
    frames = _parse(got.text)
    assert [d for n, d, _ in frames if n == "metadata"] == [
        {"run_id": run_id, "attempt": 1},
        {"run_id": run_id, "attempt": 2},
    ]
    again = [n for n, _, _ in frames].index("metadata", 1)
    assert frames[again + 1][0] == "values"  # the takeover's start: no partial message
    assert [m["content"] for m in frames[again + 1][1]["messages"]] == ["still there?"]
    final = [m["content"] for m in frames[-1][1]["messages"]]
    assert final == ["still there?", "echo: still there?"]
    assert len({i for _, _, i in frames}) == len(frames)
    joined = (await svc.client.get(f"{path}/join")).json()
    assert [m["content"] for m in joined["messages"]] == final


def _parse(body: str) -> list[tuple[str, Any, str]]:
    frames = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            frames.append((fields["event"], json.loads(fields["data"]), fields["id"]))
    return frames
