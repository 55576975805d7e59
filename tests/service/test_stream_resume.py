"""`GET /runs/{id}/stream` over HTTP: a stream picked up again with `Last-Event-ID`.

Runs are made through the service's store and their events put through its event log, as a
worker does. In-process (httpx's ASGI transport, SQLite) for what a whole response shows;
over real sockets against a served app on PostgreSQL, with the events written by another
`Store` (another replica), for a client that drops mid-stream and reconnects.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from parley.agents.events import AgentEvent, MessageCompleted, RunEnded, RunStarted, TextDelta
from parley.messages import Msg
from parley.messages.blocks import ToolResultBlock
from parley.service import ServiceSettings, create_app
from parley.service.auth import LOCAL_USER
from parley.service.events import StoreEventLog
from parley.service.sse import HEARTBEAT, event_frames, parse_frame_id, with_heartbeats
from parley.service.store import Store
from tests.service._agents import echo_agent
from tests.service._live import running
from tests.service.conftest import MakeService, Service

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

WAIT = 20.0


def _frames(body: str) -> list[tuple[str | None, Any]]:
    """(id, data) of each SSE frame in `body`; comments skipped; `[DONE]` as the string."""
    out: list[tuple[str | None, Any]] = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if "data" in fields:
            data = fields["data"]
            out.append((fields.get("id"), data if data == "[DONE]" else json.loads(data)))
    return out


async def _new_run(store: Store, user: str = LOCAL_USER) -> str:
    run_id = uuid.uuid4().hex
    await store.open_run(run_id, "t-" + run_id[:8], user, "echo", "m", expire_approvals=True)
    return run_id


async def _put(log: StoreEventLog | Any, run_id: str, *events: AgentEvent) -> None:
    writer = await log.writer(run_id)
    for event in events:
        writer.put(event)
    await writer.close()


async def _finished_run(svc: Service, count: int = 3) -> str:
    run_id = await _new_run(svc.state.store)
    texts = [TextDelta(text=f"t{i}") for i in range(count)]
    await _put(svc.state.events, run_id, RunStarted(run_id=run_id, agent="echo"), *texts)
    await _put(svc.state.events, run_id, RunEnded(status="completed"))
    await svc.state.store.end_run(run_id, "completed", None, None)
    return run_id


def _store_log(svc: Service) -> StoreEventLog:
    assert isinstance(svc.state.events, StoreEventLog)
    return svc.state.events


@pytest.fixture
async def svc(service: MakeService) -> Service:
    return await service(echo_agent())


# -- whole responses (in-process, SQLite) ----------------------------------------------------------


async def test_minus_one_replays_every_event_with_its_id(svc: Service) -> None:
    run_id = await _finished_run(svc)
    answer = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["location"] == f"/runs/{run_id}/stream"
    frames = _frames(answer.text)
    assert [i for i, _ in frames] == ["1", "2", "3", "4", "5", None]
    assert frames[0][1]["type"] == "run_started"
    assert [d["text"] for _, d in frames[1:4]] == ["t0", "t1", "t2"]
    assert frames[4][1] == {
        **frames[4][1],
        "type": "run_ended",
        "run_id": run_id,
        "status": "completed",
    }
    assert frames[-1][1] == "[DONE]"


async def test_an_id_gives_the_frames_after_it(svc: Service) -> None:
    run_id = await _finished_run(svc)
    answer = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "3"})
    assert [i for i, _ in _frames(answer.text)] == ["4", "5", None]
    answer = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "5"})
    assert _frames(answer.text) == [(None, "[DONE]")]


async def test_a_finished_run_with_no_header_gives_only_done(svc: Service) -> None:
    run_id = await _finished_run(svc)
    answer = await svc.client.get(f"/runs/{run_id}/stream")
    assert answer.status_code == 200
    assert _frames(answer.text) == [(None, "[DONE]")]


@pytest.mark.parametrize("bad", ["6", "abc", "0", "2.x", "1.0", " ", "-2", "9" * 40, "1e3"])
async def test_an_id_not_of_the_run_is_400(svc: Service, bad: str) -> None:
    run_id = await _finished_run(svc)
    answer = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": bad})
    assert answer.status_code == 400, bad
    assert "Last-Event-ID" in answer.json()["detail"]


async def test_an_expired_log_is_410(svc: Service) -> None:
    run_id = await _finished_run(svc)
    assert await svc.state.events.sweep(0) == 1  # type: ignore[union-attr]
    for headers in ({"Last-Event-ID": "-1"}, {}):
        answer = await svc.client.get(f"/runs/{run_id}/stream", headers=headers)
        assert answer.status_code == 410
        assert "no longer kept" in answer.json()["detail"]


async def test_unknown_and_other_users_runs_are_404(service: MakeService) -> None:
    svc = await service(echo_agent(), api_keys=True)
    ann, _ = await svc.state.store.create_api_key("ann")
    bob, _ = await svc.state.store.create_api_key("bob")
    run_id = await _new_run(svc.state.store, user="ann")
    await _put(svc.state.events, run_id, TextDelta(text="secret"), RunEnded(status="completed"))
    await svc.state.store.end_run(run_id, "completed", None, None)
    for who, path, status in [
        (bob, f"/runs/{run_id}/stream", 404),
        (ann, "/runs/nope/stream", 404),
        (ann, f"/runs/{run_id}/stream", 200),
    ]:
        answer = await svc.client.get(
            path, headers={"Authorization": f"Bearer {who}", "Last-Event-ID": "-1"}
        )
        assert answer.status_code == status
        assert ("secret" in answer.text) == (status == 200)


async def test_no_header_gives_live_events_only(svc: Service) -> None:
    run_id = await _new_run(svc.state.store)
    log = svc.state.events
    writer = await log.writer(run_id)  # type: ignore[union-attr]
    writer.put(TextDelta(text="before"))
    await writer.flush()
    reading = asyncio.create_task(svc.client.get(f"/runs/{run_id}/stream"))
    async with asyncio.timeout(WAIT):  # the reader is following (and has read the log)
        while run_id not in log._waiters:  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
    writer.put(TextDelta(text="after"))
    writer.put(RunEnded(status="completed"))
    await writer.close()
    answer = await asyncio.wait_for(reading, WAIT)
    frames = _frames(answer.text)
    assert [(i, d["type"]) for i, d in frames[:-1]] == [("2", "text_delta"), ("3", "run_ended")]
    assert frames[0][1]["text"] == "after"


async def test_toolkit_frames_of_one_event_resume_between_them(svc: Service) -> None:
    run_id = await _new_run(svc.state.store)
    results = Msg(
        role="tool",
        content=[
            ToolResultBlock(tool_call_id="a", name="f", output="one"),
            ToolResultBlock(tool_call_id="b", name="f", output="two"),
        ],
    )
    await _put(
        svc.state.events,
        run_id,
        RunStarted(run_id=run_id, agent="echo"),  # no toolkit frame
        MessageCompleted(msg=results),  # two toolkit frames: ids 2 and 2.1
        RunEnded(status="completed"),
    )
    await svc.state.store.end_run(run_id, "completed", None, None)
    path = f"/runs/{run_id}/stream?events=toolkit"
    whole = _frames((await svc.client.get(path, headers={"Last-Event-ID": "-1"})).text)
    assert [i for i, _ in whole] == ["2", "2.1", None]
    rest = _frames((await svc.client.get(path, headers={"Last-Event-ID": "2"})).text)
    assert rest == whole[1:]
    assert _frames((await svc.client.get(path, headers={"Last-Event-ID": "2.1"})).text) == [
        (None, "[DONE]")
    ]
    bad = await svc.client.get(path, headers={"Last-Event-ID": "4.1"})
    assert bad.status_code == 400


async def test_the_toolkits_own_stream_is_unchanged(svc: Service) -> None:
    answer = await svc.client.post("/stream", json={"message": "hi"})
    assert answer.status_code == 200
    assert "id:" not in answer.text
    assert ": heartbeat" not in answer.text


# -- pieces ----------------------------------------------------------------------------------------


async def test_heartbeats_fill_the_quiet_and_lose_no_frame() -> None:
    go = asyncio.Event()

    async def frames() -> AsyncIterator[str]:
        yield "data: 1\n\n"
        await go.wait()
        yield "data: 2\n\n"

    got: list[str] = []
    async with asyncio.timeout(WAIT):
        async for text in with_heartbeats(frames(), interval=0.01):
            got.append(text)
            if text == HEARTBEAT:
                go.set()
    assert got[0] == "data: 1\n\n"
    assert got[-1] == "data: 2\n\n"
    assert set(got[1:-1]) == {HEARTBEAT}


async def test_frame_ids_parse() -> None:
    assert parse_frame_id("r", None) is None
    assert parse_frame_id("r", "-1") == (0, 0)
    assert parse_frame_id("r", " 12 ") == (12, 0)
    assert parse_frame_id("r", "12.3") == (12, 3)


async def test_event_frames_skip_what_was_seen() -> None:
    async def numbered() -> AsyncIterator[tuple[int, AgentEvent]]:
        for seq in (4, 5):
            yield seq, TextDelta(text=str(seq))

    texts = [
        t
        async for t in event_frames(
            numbered(), thread_id="t", run_id="r", mode="parley", stream_tokens=True, seen=(4, 0)
        )
    ]
    assert texts[0].startswith("id: 5\ndata: ")
    assert len(texts) == 2


# -- over sockets, another replica writing (PostgreSQL) ------------------------------------------


async def _read_frames(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], stop_after: int | None
) -> list[tuple[str | None, Any]]:
    """Frames of a stream; with `stop_after`, hang up after that many (a dropped client)."""
    got: list[tuple[str | None, Any]] = []
    async with client.stream("GET", url, headers=headers) as answer:
        assert answer.status_code == 200
        block: list[str] = []
        async for line in answer.aiter_lines():
            if line:
                block.append(line)
                continue
            got.extend(_frames("\n".join(block) + "\n\n"))
            block = []
            if stop_after is not None and len(got) >= stop_after:
                break
    return got


async def test_a_dropped_client_reconnects_and_gets_the_rest_once(postgres_db_url: str) -> None:
    writing_store = await Store.open(postgres_db_url)
    writing = await StoreEventLog.open(writing_store, listen=False)
    settings = ServiceSettings(database_url=postgres_db_url)
    try:
        app = create_app(settings, agents=[echo_agent()])
        with running(app) as base:
            async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
                run_id = await _new_run(writing_store)
                writer = await writing.writer(run_id)
                writer.put(RunStarted(run_id=run_id, agent="echo"))
                for i in range(5):
                    writer.put(TextDelta(text=f"a{i}"))
                await writer.flush()
                url = f"/runs/{run_id}/stream"
                first = await _read_frames(client, url, {"Last-Event-ID": "-1"}, stop_after=3)
                last_id = first[-1][0]
                assert last_id == "3"
                # The server's reader went with its client (nothing left following).
                served: StoreEventLog = app.state.parley.events
                async with asyncio.timeout(WAIT):
                    while run_id in served._waiters:
                        await asyncio.sleep(0.02)

                async def write_rest() -> None:
                    for i in range(20):
                        writer.put(TextDelta(text=f"b{i}"))
                        await writer.flush()
                    writer.put(RunEnded(status="completed"))
                    await writer.close()
                    await writing_store.end_run(run_id, "completed", None, None)

                rest, _ = await asyncio.gather(
                    _read_frames(client, url, {"Last-Event-ID": last_id}, stop_after=None),
                    write_rest(),
                )
                ids = [i for i, _ in first + rest if i is not None]
                assert ids == [str(n) for n in range(1, 28)]
                assert rest[-1] == (None, "[DONE]")
    finally:
        await writing.close()
        await writing_store.close()


async def test_the_services_log_stores_events_at_its_flush_interval(
    service: MakeService,
) -> None:
    svc = await service(echo_agent(), event_flush_interval=0.0)
    assert isinstance(svc.state.events, StoreEventLog)
    assert svc.state.events.flush_interval == 0.0
    answered = await svc.client.post("/invoke", json={"message": "hi"})
    run_id = answered.headers["X-Run-Id"]
    replay = await svc.client.get(
        f"/runs/{run_id}/stream", params={"events": "parley"}, headers={"Last-Event-ID": "-1"}
    )
    frames = _frames(replay.text)
    assert [frame_id for frame_id, _ in frames[:-1]] == [str(i) for i in range(1, len(frames))]
    assert frames[-2][1]["type"] == "run_ended"
    assert frames[-1] == (None, "[DONE]")


async def test_the_service_drops_old_logs_by_itself(service: MakeService) -> None:
    svc = await service(echo_agent(), event_retention=0.5)  # swept every second
    run_id = await _finished_run(svc)
    async with asyncio.timeout(WAIT):
        while (await svc.client.get(f"/runs/{run_id}/stream")).status_code != 410:
            await asyncio.sleep(0.1)
    answer = await svc.client.get(f"/runs/{run_id}")
    assert answer.status_code == 200  # the run itself stays


async def test_a_log_dropped_after_the_check_ends_its_stream_with_an_error_frame(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The retention sweep drops the log between the route's check (which passes: 200) and
    # the stream's first read: the stream says so in an `error` frame, then `[DONE]`.
    run_id, log = await _finished_run(svc), _store_log(svc)
    check = log.check

    async def check_then_sweep(run: str, after: int | None) -> int:
        start = await check(run, after)
        assert await log.sweep(-1.0) == 1  # every ended run's log, this one's too
        return start

    monkeypatch.setattr(log, "check", check_then_sweep)
    answer = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"})
    assert answer.status_code == 200
    (frame_id, error), done = _frames(answer.text)
    assert frame_id is None
    assert error["type"] == "error"
    assert "no longer kept" in error["content"]
    assert done == (None, "[DONE]")
    monkeypatch.undo()
    gone = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"})
    assert gone.status_code == 410


async def test_a_store_failure_mid_stream_cuts_it_with_no_done(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database goes away after the first event: the stream ends there with no `[DONE]`,
    # so the client knows it was cut and asks again with `Last-Event-ID`.
    run_id, log = await _finished_run(svc), _store_log(svc)
    follow = log.follow

    async def failing(run: str, after: int | None) -> AsyncIterator[tuple[int, AgentEvent]]:
        async for item in follow(run, after):
            yield item
            raise OSError("the database went away")

    monkeypatch.setattr(log, "follow", failing)
    answer = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"})
    assert answer.status_code == 200
    frames = _frames(answer.text)
    assert [(frame_id, data["type"]) for frame_id, data in frames] == [("1", "run_started")]
    monkeypatch.undo()
    resumed = await svc.client.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "1"})
    ids = [frame_id for frame_id, _ in _frames(resumed.text)]
    assert ids == ["2", "3", "4", "5", None]  # the three deltas, the end, then [DONE]
