"""Runs: one at a time per thread, cancellable (by request, through the store, by leaving),
failing cleanly, and leaving a consistent store when their process is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.agents import run as agent_run
from parley.agents.approval import CANCELLED, NOT_RUN
from parley.agents.events import RunEnded, RunError, TextDelta
from parley.errors import ModelConnectionError, ModelHTTPError
from parley.messages import Msg
from parley.models.base import ChatRequest
from parley.models.cards import Pricing
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from parley.service.runs import RunHandle
from parley.service.store import Store
from parley.service.store.locks import LocalThreadLocks
from parley.tools import tool
from tests.service._live import running
from tests.service._support import DONE, frames, run_records, wait_for, wait_for_run
from tests.service.conftest import MakeService

PADDING = " and so on" * 20  # 200 characters: a streamed answer that takes a while


def _echo(request: ChatRequest) -> str:
    return f"echo: {request.messages[-1].text}{PADDING}"


def _slow(*steps: Any, delay: float = 0.005, size: int = 1) -> ScriptedModel:
    """A model streaming `size` characters per `delay` seconds."""
    return ScriptedModel(list(steps), chunk_size=size, chunk_delay=delay)


def _long(words: int = 400) -> str:
    return " ".join(f"w{i}" for i in range(words))


class _Gated(ScriptedModel):
    """A model that streams `before` characters, then waits for `gate` (shut until the test
    opens it): a run on it cannot end on its own, so whatever ends it came from outside."""

    def __init__(self, *steps: Any, before: int = 0) -> None:
        super().__init__(list(steps), chunk_size=1)
        self.before = before
        self.sent = 0
        self.gate = asyncio.Event()
        self.at_gate = asyncio.Event()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        async for delta in super()._stream(request):
            if self.sent >= self.before and not self.gate.is_set():
                self.at_gate.set()  # all `before` deltas were taken: the next is asked for
                await self.gate.wait()
            self.sent += 1
            yield delta


# -- one run per thread ------------------------------------------------------------------------


async def test_a_second_message_waits_for_the_first_run(service: MakeService) -> None:
    model = _slow(_echo, _echo, size=4)  # about 0.3 s an answer
    svc = await service(Agent("helper", model), busy_timeout=30)
    first = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "one", "thread_id": "t"})
    )
    await wait_for_run(svc.state)
    second = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "two", "thread_id": "t"})
    )
    one, two = await asyncio.gather(first, second)

    assert one.status_code == two.status_code == 200
    assert one.json()["content"] == f"echo: one{PADDING}"
    assert two.json()["content"] == f"echo: two{PADDING}"
    stored = [(m.role, m.text) for m, _ in await svc.state.store.get_messages("t", "local")]
    assert stored == [
        ("user", "one"),
        ("assistant", f"echo: one{PADDING}"),
        ("user", "two"),
        ("assistant", f"echo: two{PADDING}"),
    ]
    # The second run saw the whole first exchange, and began after the first had ended.
    assert [m.text for m in model.requests[1].messages] == [s[1] for s in stored[:3]]
    runs = await run_records(svc.state.store, "t")
    assert [r.status for r in runs] == ["completed", "completed"]
    assert runs[0].ended_at is not None
    assert runs[1].started_at >= runs[0].ended_at


async def test_messages_sent_at_once_never_interleave(service: MakeService) -> None:
    model = _slow(*[_echo] * 4, size=4)
    svc = await service(Agent("helper", model), busy_timeout=30)
    answers = await asyncio.gather(
        *(svc.client.post("/invoke", json={"message": f"m{i}", "thread_id": "t"}) for i in range(4))
    )
    assert [a.status_code for a in answers] == [200] * 4

    stored = [(m.role, m.text) for m, _ in await svc.state.store.get_messages("t", "local")]
    assert [role for role, _ in stored] == ["user", "assistant"] * 4
    for (_, question), (_, answer) in zip(stored[::2], stored[1::2], strict=True):
        assert answer == f"echo: {question}{PADDING}"
    assert sorted(q for _, q in stored[::2]) == ["m0", "m1", "m2", "m3"]
    locks = svc.state.locks
    assert isinstance(locks, LocalThreadLocks)
    assert len(locks) == 0  # no lock left behind


@pytest.mark.parametrize("path", ["/invoke", "/stream"])
async def test_a_busy_thread_is_409_without_waiting(service: MakeService, path: str) -> None:
    svc = await service(Agent("helper", _Gated(_long(), before=3)), busy_timeout=0)
    first = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "one", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)

    async with asyncio.timeout(30):  # bounds a wait for a run that cannot end
        refused = await svc.client.post(path, json={"message": "two", "thread_id": "t"})
    assert not handle.done.is_set()  # refused without waiting for the run, which cannot end
    assert refused.status_code == 409
    assert "busy" in refused.json()["detail"]
    assert handle.run_id not in refused.headers.get("X-Run-Id", "")

    await svc.client.post(f"/runs/{handle.run_id}/cancel")
    assert (await first).status_code == 200
    # The refused message was never stored, and no run was recorded for it.
    stored = [m.text for m, _ in await svc.state.store.get_messages("t", "local")]
    assert "two" not in stored
    assert len(await run_records(svc.state.store, "t")) == 1


async def test_a_busy_thread_is_409_after_busy_timeout(service: MakeService) -> None:
    """The wait itself: `test_a_second_message_waits_for_the_first_run` (it gets the thread
    when the first run ends within the timeout)."""
    svc = await service(Agent("helper", _Gated(_long(), before=3)), busy_timeout=0.3)
    first = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "one", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)

    async with asyncio.timeout(30):  # bounds a wait for a run that cannot end
        refused = await svc.client.post("/invoke", json={"message": "two", "thread_id": "t"})
    assert refused.status_code == 409
    assert "waited 0.3s" in refused.json()["detail"]
    assert handle.run_id in svc.state.runs.active  # the first run went on meanwhile
    assert not handle.done.is_set()

    await svc.client.post(f"/runs/{handle.run_id}/cancel")
    await first


async def test_runs_on_different_threads_go_at_once(service: MakeService) -> None:
    slow = Agent("slow", _slow(_long()))
    fast = Agent("fast", ScriptedModel(["quick"]))
    svc = await service(slow, fast, busy_timeout=0)
    slow_call = asyncio.create_task(
        svc.client.post("/slow/invoke", json={"message": "take your time", "thread_id": "a"})
    )
    slow_handle = await wait_for_run(svc.state)

    quick = await svc.client.post("/fast/invoke", json={"message": "hurry", "thread_id": "b"})
    assert quick.status_code == 200
    assert quick.json()["content"] == "quick"
    assert slow_handle.run_id in svc.state.runs.active  # still going
    assert not slow_handle.done.is_set()

    await svc.client.post(f"/runs/{slow_handle.run_id}/cancel")
    assert (await slow_call).status_code == 200


async def test_a_run_records_its_usage_and_how_it_ended(service: MakeService) -> None:
    @tool
    def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: What to look up.
        """
        return f"about {query}"

    model = ScriptedModel(
        ["It is about a.", ScriptedModel.tool_call("lookup", {"query": "b"}, "call_2")]
    )
    model.pricing = Pricing(input=1_000_000, output=2_000_000)  # $1 a token in, $2 out
    svc = await service(Agent("helper", model, tools=[lookup], max_iters=1))
    done = await svc.client.post("/invoke", json={"message": "what is a?", "thread_id": "t"})
    run = (await svc.client.get(f"/runs/{done.headers['X-Run-Id']}")).json()
    assert run["status"] == "completed"
    assert run["agent"] == "helper"
    assert run["model"] == "scripted"
    usage = run["usage"]
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert usage["cost"] == pytest.approx(usage["input_tokens"] + 2 * usage["output_tokens"])
    assert datetime.fromisoformat(run["started_at"]) <= datetime.fromisoformat(run["ended_at"])

    # One model call per run: this one calls a tool, which runs, and the run stops there.
    capped = await svc.client.post("/invoke", json={"message": "and b?", "thread_id": "t"})
    assert capped.status_code == 200
    body = capped.json()
    assert [c["id"] for c in body["tool_calls"]] == ["call_2"]
    run = (await svc.client.get(f"/runs/{capped.headers['X-Run-Id']}")).json()
    assert run["status"] == "max_iters"
    stored = [m for m, _ in await svc.state.store.get_messages("t", "local")]
    assert [m.role for m in stored][-3:] == ["user", "assistant", "tool"]  # nothing left open


# -- what is stored, and when ----------------------------------------------------------------


async def _read_back(url: str, thread_id: str, run_id: str) -> tuple[list[Any], Any]:
    """The thread's messages and the run's record, read through a store of its own."""
    store = await Store.open(url, migrate=False)
    try:
        return await store.get_messages(thread_id, "local"), await store.get_run(run_id, "local")
    finally:
        await store.close()


async def test_when_invoke_answers_the_run_is_stored_whole(
    service: MakeService, sqlite_url: str
) -> None:
    svc = await service(Agent("helper", ScriptedModel(["Paris."])))
    answer = await svc.client.post("/invoke", json={"message": "capital?", "thread_id": "new"})
    assert answer.status_code == 200
    run_id = answer.headers["X-Run-Id"]

    # Read through another connection at once: committed, not held in the service's memory.
    rows, record = await _read_back(sqlite_url, "new", run_id)
    assert [(m.role, m.text, r) for m, r in rows] == [
        ("user", "capital?", run_id),
        ("assistant", "Paris.", run_id),
    ]
    assert record is not None
    assert record.status == "completed"
    assert record.ended_at is not None
    assert record.usage is not None
    assert record.usage["output_tokens"] > 0
    thread = (await svc.client.get("/threads/new")).json()
    assert (thread["title"], thread["status"]) == ("capital?", "idle")


async def test_a_run_that_ends_is_cleaned_up_inline_not_in_a_task(
    service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its events are read to their own end: nothing is left for a closing task of its own
    # (`close_soon`, for a reader that leaves early), which cost a third of the agent loop.
    closings: list[str] = []
    real = agent_run.close_soon

    def counted(key: str, events: Any) -> None:
        closings.append(key)
        real(key, events)

    monkeypatch.setattr(agent_run, "close_soon", counted)
    svc = await service(Agent("helper", ScriptedModel(["Paris.", "Rome."])))
    for question in ("capital?", "and Italy's?"):
        answer = await svc.client.post("/invoke", json={"message": question, "thread_id": "t"})
        assert answer.status_code == 200
    assert closings == []
    history = (await svc.client.post("/history", json={"thread_id": "t"})).json()["messages"]
    assert [m["content"] for m in history] == ["capital?", "Paris.", "and Italy's?", "Rome."]


async def test_a_reader_of_the_end_only_is_handed_the_end_and_errors_only() -> None:
    # `/invoke` waits for the answer: it is not woken for every token of it.
    run = Agent("helper", ScriptedModel(["Paris."])).stream(Msg.user("capital?"))
    handle = RunHandle(run, "t", "helper", user_id="u")
    handle.put(TextDelta(text="queued before"))
    handle.end_only()
    handle.put(TextDelta(text="after"))
    handle.put(RunError(message="boom", kind="ModelHTTPError"))
    handle.put(RunEnded(status="error"))
    handle.put(None)
    told = [await handle.next_event() for _ in range(3)]
    assert told == [
        RunError(message="boom", kind="ModelHTTPError"),
        RunEnded(status="error"),
        None,
    ]


async def test_the_question_is_stored_with_the_run_before_the_model_answers(
    service: MakeService, sqlite_url: str
) -> None:
    model = _Gated("Paris.")
    svc = await service(Agent("helper", model))
    answer = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "capital?", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)
    await asyncio.wait_for(model.at_gate.wait(), 5)

    rows, record = await _read_back(sqlite_url, "t", handle.run_id)
    assert [(m.role, m.text, r) for m, r in rows] == [("user", "capital?", handle.run_id)]
    assert record is not None
    assert record.status == "running"

    model.gate.set()
    assert (await answer).status_code == 200
    rows, record = await _read_back(sqlite_url, "t", handle.run_id)
    assert [m.role for m, _ in rows] == ["user", "assistant"]
    assert record is not None
    assert record.status == "completed"


async def test_an_answer_the_store_cannot_keep_fails_the_run(
    service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = await service(Agent("helper", ScriptedModel(["Paris.", "Paris, again."])))
    store = svc.state.store
    end_run = store.end_run

    async def failing(*args: Any, last: Any = None, **kwargs: Any) -> None:
        if last is not None:  # the transaction with the answer: the database refuses it
            raise OSError("disk I/O error")
        await end_run(*args, **kwargs)

    monkeypatch.setattr(store, "end_run", failing)
    failed = await svc.client.post("/invoke", json={"message": "capital?", "thread_id": "t"})
    assert failed.status_code == 502
    assert "could not store the run's answer" in failed.json()["detail"]
    run = (await svc.client.get(f"/runs/{failed.headers['X-Run-Id']}")).json()
    assert run["status"] == "error"
    assert "disk I/O error" in run["error"]
    stored = [(m.role, m.text) for m, _ in await store.get_messages("t", "local")]
    assert stored == [("user", "capital?")]  # told as failed, as stored

    monkeypatch.setattr(store, "end_run", end_run)
    again = await svc.client.post("/invoke", json={"message": "again?", "thread_id": "t"})
    assert again.status_code == 200
    assert again.json()["content"] == "Paris, again."


# -- cancelling --------------------------------------------------------------------------------


async def test_cancel_stops_a_run_and_keeps_its_partial_answer(service: MakeService) -> None:
    model = _Gated(_long(), "after", before=12)
    svc = await service(Agent("helper", model))
    invoke = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "talk", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)
    await wait_for(model.at_gate.is_set, "12 characters streamed")

    async with asyncio.timeout(30):  # bounds a wait for a run that cannot end by itself
        cancelled = await svc.client.post(f"/runs/{handle.run_id}/cancel")
    assert cancelled.status_code == 200
    info = cancelled.json()
    assert info["run_id"] == handle.run_id
    assert info["status"] == "interrupted"
    assert info["ended_at"] is not None

    answer = await invoke
    assert answer.status_code == 200
    partial = answer.json()["content"]
    assert partial == _long()[:12]  # what streamed before the cancel, all of it
    assert answer.json()["custom_data"]["parley"]["metadata"]["interrupted"] is True

    stored = [m for m, _ in await svc.state.store.get_messages("t", "local")]
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].text == partial
    assert stored[1].metadata["interrupted"] is True
    run = (await svc.client.get(f"/runs/{handle.run_id}")).json()
    assert run["status"] == "interrupted"
    assert run["error"] is None

    # The thread goes on, with the partial answer in what the model sees.
    model.gate.set()
    again = await svc.client.post("/invoke", json={"message": "go on", "thread_id": "t"})
    assert again.json()["content"] == "after"
    assert [m.text for m in model.requests[1].messages] == ["talk", partial, "go on"]


async def test_cancel_of_an_ended_run_changes_nothing(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel(["done"])))
    answer = await svc.client.post("/invoke", json={"message": "hi"})
    run_id = answer.headers["X-Run-Id"]
    before = (await svc.client.get(f"/runs/{run_id}")).json()
    assert before["status"] == "completed"

    for _ in range(2):
        cancelled = await svc.client.post(f"/runs/{run_id}/cancel")
        assert cancelled.status_code == 200
        assert cancelled.json() == before
    assert (await svc.client.get(f"/runs/{run_id}")).json() == before
    assert (await svc.client.post("/runs/run_unknown/cancel")).status_code == 404
    assert (await svc.client.get("/runs/run_unknown")).status_code == 404


async def test_a_cancel_flag_in_the_store_stops_the_run(service: MakeService) -> None:
    """As another process cancels: only the flag in the store, which the run's process polls."""
    model = _Gated(_long(), before=5)
    svc = await service(Agent("helper", model))
    invoke = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "talk", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)
    await wait_for(model.at_gate.is_set, "the model to stream")

    await svc.state.store.request_cancel(handle.run_id)
    # The run cannot end by itself (its model waits at the gate): only the flag stops it.
    await wait_for(handle.done.is_set, "the run to stop", timeout=30)

    answer = await invoke
    assert answer.status_code == 200
    record = await svc.state.store.get_run(handle.run_id, "local")
    assert record is not None
    assert record.status == "interrupted"
    assert record.cancel_requested
    stored = [m for m, _ in await svc.state.store.get_messages("t", "local")]
    assert stored[-1].metadata.get("interrupted") is True
    assert stored[-1].text == answer.json()["content"]


async def test_cancel_stops_a_tool_that_is_running(service: MakeService) -> None:
    started = asyncio.Event()
    stopped = asyncio.Event()

    @tool
    async def wait_a_minute() -> str:
        """Take a long time."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return "done"

    model = ScriptedModel([ScriptedModel.tool_call("wait_a_minute", {}, "call_w"), "ok"])
    svc = await service(Agent("helper", model, tools=[wait_a_minute]))
    invoke = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "go", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)
    async with asyncio.timeout(5):
        await started.wait()

    async with asyncio.timeout(30):  # bounds a wait for a tool that would take an hour
        cancelled = await svc.client.post(f"/runs/{handle.run_id}/cancel")
    assert cancelled.json()["status"] == "interrupted"
    assert stopped.is_set()  # the tool was stopped, not left running
    assert (await invoke).status_code == 200
    stored = [m for m, _ in await svc.state.store.get_messages("t", "local")]
    # The call is answered as it ended: cancelled before it finished (not "not run").
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert [(r.tool_call_id, r.output) for r in stored[2].tool_results] == [("call_w", CANCELLED)]

    # The conversation goes on from there.
    again = await svc.client.post("/invoke", json={"message": "and?", "thread_id": "t"})
    assert again.json()["content"] == "ok"
    tool_msg = model.requests[1].messages[2]
    assert [(r.tool_call_id, r.output) for r in tool_msg.tool_results] == [("call_w", CANCELLED)]


async def test_shutting_down_interrupts_the_runs_and_records_them(sqlite_url: str) -> None:
    model = _slow(_long(), delay=0.01)
    app = create_app(ServiceSettings(database_url=sqlite_url), agents=[Agent("helper", model)])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        async with app.router.lifespan_context(app):
            invoke = asyncio.create_task(
                client.post("/invoke", json={"message": "talk", "thread_id": "t"})
            )
            handle = await wait_for_run(app.state.parley)
            await wait_for(lambda: model.requests, "the model to be called")
            await asyncio.sleep(0.05)  # a few characters streamed
            assert not handle.done.is_set()
        # The service stopped with the run still going: the run stopped first, and said so.
        assert handle.done.is_set()
        answer = await invoke
    assert answer.status_code == 200

    store = await Store.open(sqlite_url)
    try:
        record = await store.get_run(handle.run_id, "local")
        stored = [m for m, _ in await store.get_messages("t", "local")]
    finally:
        await store.close()
    assert record is not None
    assert record.status == "interrupted"
    assert record.ended_at is not None
    assert stored[-1].metadata["interrupted"] is True
    assert stored[-1].text == answer.json()["content"]


# -- a client that goes away -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _live(
    sqlite_url: str, *agents: Agent, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServiceSettings(database_url=sqlite_url, **settings), agents=list(agents))
    with running(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            yield client


async def _first_token(response: httpx.Response, lines: AsyncIterator[str]) -> str:
    assert response.status_code == 200
    async with asyncio.timeout(10):
        async for line in lines:
            if line.startswith("data: {") and '"type":"token"' in line:
                return line
    raise AssertionError("the stream ended before any token")


async def test_headers_name_the_run_before_the_first_frame_and_cancel_ends_the_stream(
    sqlite_url: str,
) -> None:
    model = _slow(_long(), delay=0.01)
    async with _live(sqlite_url, Agent("helper", model)) as client:
        body = {"message": "talk", "thread_id": "t"}
        async with client.stream("POST", "/stream", json=body) as response:
            run_id = response.headers["X-Run-Id"]
            assert response.headers["X-Thread-Id"] == "t"
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.aiter_lines()
            await _first_token(response, lines)

            cancelled = await client.post(f"/runs/{run_id}/cancel")
            assert cancelled.json()["status"] == "interrupted"
            async with asyncio.timeout(10):
                rest = "\n".join([line async for line in lines])
        tail = frames(rest.strip() + "\n\n")
        assert tail[-1] == DONE
        message = next(f for f in tail if f != DONE and f["type"] == "message")
        assert message["content"]["custom_data"]["parley"]["metadata"]["interrupted"] is True
        assert message["content"]["run_id"] == run_id

        detail = (await client.get("/threads/t")).json()
        assert detail["status"] == "idle"
        partial = Msg.model_validate(detail["messages"][-1])
        assert partial.metadata["interrupted"] is True
        assert partial.text == message["content"]["content"]


async def test_a_client_leaving_mid_stream_interrupts_the_run(sqlite_url: str) -> None:
    model = _slow(_long(), "next answer", delay=0.01)
    async with _live(sqlite_url, Agent("helper", model)) as client:
        body = {"message": "talk", "thread_id": "t"}
        async with client.stream("POST", "/stream", json=body) as response:
            run_id = response.headers["X-Run-Id"]
            await _first_token(response, response.aiter_lines())
        # Left: the response is closed with the stream half read.

        async def ended() -> dict[str, Any] | None:
            run: dict[str, Any] = (await client.get(f"/runs/{run_id}")).json()
            return None if run["status"] == "running" else run

        run = await wait_for(ended, "the run to end after the client left", timeout=5)
        assert run["status"] == "interrupted"
        assert run["ended_at"] is not None

        messages = (await client.get("/threads/t")).json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        partial = Msg.model_validate(messages[1])
        assert partial.metadata["interrupted"] is True
        assert partial.text
        assert _long().startswith(partial.text)
        assert len(partial.text) < len(_long())

        # The thread is free for the next message at once.
        nxt = await client.post("/invoke", json={"message": "again", "thread_id": "t"})
        assert nxt.status_code == 200
        assert nxt.json()["content"] == "next answer"


# -- what streams carry -------------------------------------------------------------------


@pytest.mark.parametrize("events", ["toolkit", "parley"])
async def test_text_with_unicode_line_breaks_keeps_each_frame_on_one_line(
    service: MakeService, events: str
) -> None:
    """httpx's `iter_lines` (the toolkit's client, parley's) splits at U+2028, U+2029, NEL."""
    answer = "one\u2028two\u2029three\x85four\nfive\r\nsix\x0bseven \U0001f600"
    svc = await service(Agent("helper", ScriptedModel([answer], chunk_size=7)))
    body = {"message": "hi", "thread_id": "t", "events": events}
    async with svc.client.stream("POST", "/stream", json=body) as response:
        lines = [line async for line in response.aiter_lines()]
    data = [line for line in lines if line]
    assert all(line.startswith("data: ") for line in data), data
    parsed = [json.loads(line[6:]) for line in data[:-1]]
    assert data[-1] == "data: [DONE]"
    if events == "toolkit":
        streamed = "".join(f["content"] for f in parsed if f["type"] == "token")
        final = [f["content"]["content"] for f in parsed if f["type"] == "message"]
    else:
        streamed = "".join(f["text"] for f in parsed if f["type"] == "text_delta")
        final = [f["msg"]["content"][0]["text"] for f in parsed if f["type"] == "message_completed"]
    assert streamed == answer
    assert final == [answer]
    stored = await svc.state.store.get_messages("t", "local")
    assert stored[-1][0].text == answer


# -- a model that fails ------------------------------------------------------------------------


async def test_a_failing_model_is_502_on_invoke_and_the_thread_goes_on(
    service: MakeService,
) -> None:
    model = ScriptedModel(
        [ModelHTTPError(503, {"error": "overloaded"}, "the provider is overloaded"), "recovered"]
    )
    svc = await service(Agent("helper", model))
    failed = await svc.client.post("/invoke", json={"message": "hi", "thread_id": "t"})

    assert failed.status_code == 502
    assert failed.headers["content-type"].startswith("application/json")
    detail = failed.json()["detail"]
    assert isinstance(detail, str)
    assert "the provider is overloaded" in detail
    assert "Traceback" not in failed.text
    # The answer still names the thread and the run, so the client can look them up.
    assert failed.headers["X-Thread-Id"] == "t"
    run_id = failed.headers["X-Run-Id"]

    run = (await svc.client.get(f"/runs/{run_id}")).json()
    assert run["status"] == "error"
    assert "the provider is overloaded" in run["error"]
    assert run["ended_at"] is not None
    assert (await svc.client.get("/threads/t")).json()["status"] == "idle"

    again = await svc.client.post("/invoke", json={"message": "try again", "thread_id": "t"})
    assert again.status_code == 200
    assert again.json()["content"] == "recovered"
    stored = [(m.role, m.text) for m, _ in await svc.state.store.get_messages("t", "local")]
    assert stored == [("user", "hi"), ("user", "try again"), ("assistant", "recovered")]


async def test_a_failing_model_is_an_error_frame_on_stream(service: MakeService) -> None:
    model = ScriptedModel([ModelConnectionError("connection reset by peer"), "recovered"])
    svc = await service(Agent("helper", model))
    response = await svc.client.post("/stream", json={"message": "hi", "thread_id": "t"})

    assert response.status_code == 200
    got = frames(response.text)
    assert got[-1] == DONE
    errors = [f for f in got[:-1] if f["type"] == "error"]
    assert len(errors) == 1
    assert got[-2] == errors[0]  # the error is the last frame before [DONE]
    assert "connection reset by peer" in errors[0]["content"]
    assert not any(f["type"] == "message" and f["content"]["type"] == "ai" for f in got[:-1])

    run = (await svc.client.get(f"/runs/{response.headers['X-Run-Id']}")).json()
    assert run["status"] == "error"
    assert "connection reset by peer" in run["error"]

    parley = await svc.client.post(
        "/stream", json={"message": "again", "thread_id": "t", "events": "parley"}
    )
    events = frames(parley.text)
    assert events[-1] == DONE
    assert [e["type"] for e in events[:-1]][-1] == "run_ended"
    assert events[-2]["status"] == "completed"


async def test_a_failing_model_in_parley_events_is_run_error_then_run_ended(
    service: MakeService,
) -> None:
    model = ScriptedModel([ModelHTTPError(500, "boom", "server exploded")])
    svc = await service(Agent("helper", model))
    response = await svc.client.post("/stream", json={"message": "hi", "events": "parley"})
    events = frames(response.text)
    types = [e["type"] for e in events[:-1]]
    assert types[0] == "run_started"
    assert types[-2:] == ["run_error", "run_ended"]
    assert events[-3]["kind"] == "ModelHTTPError"
    assert "server exploded" in events[-3]["message"]
    assert events[-2]["status"] == "error"
    assert events[-1] == DONE


async def test_a_streams_error_frame_comes_after_the_runs_end_is_recorded(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recording the end is made slow: a frame sent before it is recorded would reach the
    # client while the run still reads "running" (a client stops at the error frame).
    record = Store.end_run

    async def slow_end_run(self: Store, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(1.0)
        return await record(self, *args, **kwargs)

    monkeypatch.setattr(Store, "end_run", slow_end_run)
    model = ScriptedModel([ModelConnectionError("connection reset by peer")])
    async with _live(sqlite_url, Agent("helper", model)) as client:
        body = {"message": "hi", "thread_id": "t"}
        async with client.stream("POST", "/stream", json=body) as response:
            run_id = response.headers["X-Run-Id"]
            async with asyncio.timeout(10):
                async for line in response.aiter_lines():
                    if line.startswith("data: {") and '"type":"error"' in line:
                        break
            run = (await client.get(f"/runs/{run_id}")).json()
        assert run["status"] == "error"
        assert "connection reset by peer" in run["error"]


# -- a process killed mid-run ------------------------------------------------------------------


_KILLED_RUN = textwrap.dedent(
    """
    import asyncio
    import sys

    from parley.agents import Agent
    from parley.messages import Msg
    from parley.models.testing import ScriptedModel
    from parley.service.runs import RunManager
    from parley.service.store import Store, thread_locks
    from parley.tools import tool


    @tool
    async def slow_lookup(query: str) -> str:
        '''Look something up, slowly.

        Args:
            query: What to look up.
        '''
        print("TOOL", flush=True)
        await asyncio.sleep(300)
        return "never"


    async def main(url: str) -> None:
        store = await Store.open(url)
        runs = RunManager(store, thread_locks(url), busy_timeout=5)
        model = ScriptedModel(
            [ScriptedModel.tool_call("slow_lookup", {"query": "x"}, call_id="call_slow")]
        )
        agent = Agent("helper", model, tools=[slow_lookup])
        handle = await runs.start(
            agent, agent_key="helper", user_id="local", thread_id="t-killed",
            message=Msg.user("look it up"),
        )
        print("RUN", handle.run_id, flush=True)
        await asyncio.sleep(300)


    asyncio.run(main(sys.argv[1]))
    """
)


@tool
async def slow_lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return f"found {query}"


async def _start_and_kill(sqlite_url: str, tmp_path: Path) -> str:
    """Run `_KILLED_RUN` until its tool runs, then SIGKILL it; the id of its run."""
    script = tmp_path / "killed_run.py"
    script.write_text(_KILLED_RUN)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        sqlite_url,
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            run_line = (await process.stdout.readline()).decode()
            assert run_line.startswith("RUN "), run_line
            assert (await process.stdout.readline()).decode().strip() == "TOOL"
    finally:
        process.kill()  # SIGKILL: no clean-up of any kind
        await process.wait()
    assert process.returncode == -signal.SIGKILL
    return run_line.split()[1]


async def test_a_process_killed_mid_run_leaves_a_consistent_store(
    service: MakeService, sqlite_url: str, tmp_path: Path
) -> None:
    run_id = await _start_and_kill(sqlite_url, tmp_path)

    store = await Store.open(sqlite_url)
    try:
        rows = await store.get_messages("t-killed", "local")  # every row parses as a Msg
        record = await store.get_run(run_id, "local")
    finally:
        await store.close()
    assert [m.role for m, _ in rows] == ["user", "assistant"]
    assert rows[1][0].tool_calls[0].id == "call_slow"
    assert {r for _, r in rows} == {run_id}
    assert record is not None
    assert record.status == "running"  # nobody could record its end
    assert record.ended_at is None

    model = ScriptedModel(["Sorry, the lookup did not finish."])
    svc = await service(Agent("helper", model, tools=[slow_lookup]))
    # Until the thread's next run, the dead run still shows as running.
    assert (await svc.client.get(f"/runs/{run_id}")).json()["status"] == "running"
    assert (await svc.client.get("/threads/t-killed")).json()["status"] == "running"

    answer = await svc.client.post(
        "/invoke", json={"message": "what happened?", "thread_id": "t-killed"}
    )
    assert answer.status_code == 200
    assert answer.json()["content"] == "Sorry, the lookup did not finish."

    dead = (await svc.client.get(f"/runs/{run_id}")).json()
    assert dead["status"] == "interrupted"
    assert dead["error"]
    assert dead["ended_at"] is not None
    stored = [m for m, _ in await svc.state.store.get_messages("t-killed", "local")]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]
    (result,) = stored[2].tool_results
    assert result.tool_call_id == "call_slow"
    assert result.is_error
    assert result.output == NOT_RUN
    # The model saw the call answered, then the new question.
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool", "user"]
    assert (await svc.client.get("/threads/t-killed")).json()["status"] == "idle"


async def test_a_dead_processs_run_can_be_cancelled(
    service: MakeService, sqlite_url: str, tmp_path: Path
) -> None:
    run_id = await _start_and_kill(sqlite_url, tmp_path)
    svc = await service(Agent("helper", ScriptedModel()))
    assert (await svc.client.delete("/threads/t-killed")).status_code == 409

    cancelled = await svc.client.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "interrupted"
    assert (await svc.client.get("/threads/t-killed")).json()["status"] == "idle"
    assert (await svc.client.delete("/threads/t-killed")).status_code == 204
