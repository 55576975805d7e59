"""The client and `parley chat --url` against the real service, end to end.

The sync client and the command talk to uvicorn on 127.0.0.1 (`tests.service._live`); the
async client to the app in-process through `httpx.ASGITransport`. The agents run on scripted
models, so each test says exactly what the model is asked and answers.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from parley import cli
from parley.agents import Agent, RunEnded, RunStarted, TextDelta, ToolResult
from parley.client import AgentClient, AsyncAgentClient, Interrupt, ServiceChatMessage
from parley.errors import (
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    ModelError,
    NotFoundError,
    RunFailedError,
    ServiceError,
)
from parley.models.testing import ScriptedModel, Step
from parley.service import ServiceSettings, create_app
from tests.sample_tools import add, send_email
from tests.service._live import running

pytestmark = pytest.mark.timeout(120)

CALL_ADD = ScriptedModel.tool_call("add", {"a": 1, "b": 2}, call_id="call_add")
CALL_SEND = ScriptedModel.tool_call("send_email", {"to": "ada@example.org"}, call_id="call_send")


MakeApp = Callable[..., tuple[FastAPI, ScriptedModel]]


@pytest.fixture
def make_app(tmp_path: Path) -> MakeApp:
    """An app serving the agent `scripted` on a scripted streaming model, on its own SQLite."""

    def make(*steps: Step, chunk_delay: float = 0.0, **settings: Any) -> tuple[FastAPI, Any]:
        model = ScriptedModel(steps, stream=True, chunk_delay=chunk_delay)
        agent = Agent("scripted", model, tools=[add, send_email])
        settings.setdefault("database_url", f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}")
        return create_app(ServiceSettings(**settings), agents=[agent]), model

    return make


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARLEY_API_KEY", raising=False)
    monkeypatch.delenv("AUTH_SECRET", raising=False)
    monkeypatch.delenv("PARLEY_AUTH_SECRET", raising=False)


@contextlib.contextmanager
def serving(app: FastAPI, **kwargs: Any) -> Iterator[AgentClient]:
    with running(app) as url, AgentClient(url, timeout=30, **kwargs) as client:
        yield client


def _split(items: list[Any]) -> tuple[str, list[ServiceChatMessage], list[Interrupt]]:
    text = "".join(item for item in items if isinstance(item, str))
    messages = [item for item in items if isinstance(item, ServiceChatMessage)]
    interrupts = [item for item in items if isinstance(item, Interrupt)]
    return text, messages, interrupts


# -- the sync client over a socket ---------------------------------------------------------


def test_info_agents_invoke_stream_and_history(make_app: MakeApp) -> None:
    app, model = make_app("Hello there.", CALL_ADD, "It is 3.")
    with serving(app) as client:
        assert client.agent == "scripted"
        info = client.info()
        assert (info.default_agent, [a.key for a in info.agents]) == ("scripted", ["scripted"])
        assert "fake" in info.models
        [agent] = client.agents()
        assert (agent.key, agent.model, agent.default) == ("scripted", "scripted", True)
        assert set(agent.tools) == {"add", "send_email"}
        assert client.health() == {"status": "ok"}

        answer = client.invoke("Hi")
        assert (answer.type, answer.content) == ("ai", "Hello there.")
        assert answer.thread_id
        assert answer.run_id

        stream = client.stream("What is 1 + 2?", thread_id=answer.thread_id)
        text, messages, interrupts = _split(list(stream))
        assert text == "It is 3."
        assert interrupts == []
        assert [m.type for m in messages] == ["ai", "tool", "ai"]
        assert messages[0].tool_calls[0]["name"] == "add"
        assert (messages[1].tool_call_id, messages[1].content) == ("call_add", "3")
        assert {m.thread_id for m in messages} == {answer.thread_id}
        assert stream.thread_id == answer.thread_id
        assert stream.run_id == messages[-1].run_id != answer.run_id

        history = client.history(answer.thread_id)
        assert [m.type for m in history] == ["human", "ai", "human", "ai", "tool", "ai"]
        assert history[-1].content == "It is 3."
        assert client.history("no-such-thread") == []
    model.assert_consumed()


def test_threads_runs_feedback_and_delete(make_app: MakeApp) -> None:
    app, model = make_app("One.", "Two.")
    with serving(app) as client:
        first = client.invoke("First question")
        second = client.invoke("Second question")
        page = client.threads(limit=1)
        assert [t.thread_id for t in page.threads] == [second.thread_id]
        assert page.next is not None
        rest = client.threads(limit=1, before=page.next)
        assert [t.thread_id for t in rest.threads] == [first.thread_id]

        assert first.thread_id is not None
        assert first.run_id is not None
        detail = client.thread(first.thread_id)
        assert (detail.title, detail.status, detail.agent) == ("First question", "idle", "scripted")
        assert [m.text for m in detail.messages] == ["First question", "One."]
        assert detail.pending == []

        run = client.run(first.run_id)
        assert (run.status, run.thread_id, run.agent) == ("completed", first.thread_id, "scripted")
        assert client.cancel(first.run_id).status == "completed"  # it had ended already
        client.feedback(first.run_id, "stars", 1.0, comment="good")
        with pytest.raises(NotFoundError):
            client.feedback("no-such-run", "stars", 1.0)

        client.delete_thread(first.thread_id)
        with pytest.raises(NotFoundError, match="not found"):
            client.thread(first.thread_id)
        with pytest.raises(NotFoundError):
            client.delete_thread(first.thread_id)
        with pytest.raises(NotFoundError):
            client.run("no-such-run")
    model.assert_consumed()


def test_an_approval_parks_the_run_and_resumes_it(make_app: MakeApp) -> None:
    app, model = make_app(CALL_SEND, "Sent.", CALL_SEND, "Not sent.")
    with serving(app) as client:
        text, messages, interrupts = _split(list(client.stream("Email Ada.")))
        [interrupt] = interrupts
        assert interrupt.calls[0]["name"] == "send_email"
        assert interrupt.calls[0]["id"] == "call_send"
        assert messages[0].tool_calls[0]["id"] == "call_send"
        detail = client.thread(interrupt.thread_id)
        assert detail.status == "awaiting_approval"
        assert [p.interrupt_id for p in detail.pending] == [interrupt.interrupt_id]
        assert client.run(interrupt.run_id).status == "awaiting_approval"

        resumed = list(client.approve_stream(interrupt.interrupt_id, True))
        text, messages, _ = _split(resumed)
        assert text == "Sent."
        assert [m.type for m in messages] == ["tool", "ai"]
        assert messages[0].content == "sent to ada@example.org"
        with pytest.raises(ConflictError):
            client.approve(interrupt.interrupt_id, True)
        with pytest.raises(NotFoundError):
            client.approve("no-such-interrupt", True)

        # Once more, denied per call, through /approvals/{id}/invoke.
        items = list(client.stream("Email Ada again.", thread_id=interrupt.thread_id))
        [again] = _split(items)[2]
        answer = client.approve(again.interrupt_id, {"call_send": False})
        assert (answer.content, answer.thread_id) == ("Not sent.", interrupt.thread_id)
    model.assert_consumed()


def test_stream_events_and_approve_events(make_app: MakeApp) -> None:
    app, model = make_app(CALL_SEND, "Sent.")
    with serving(app) as client:
        stream = client.stream_events("Email Ada.")
        events = list(stream)
        assert isinstance(events[0], RunStarted)
        assert events[0].run_id == stream.run_id
        assert isinstance(events[-1], RunEnded)
        assert events[-1].status == "awaiting_approval"
        approval = next(e for e in events if e.type == "approval_requested")
        assert stream.thread_id is not None

        resumed = list(client.approve_events(approval.interrupt_id, stream_tokens=False))
        assert not any(isinstance(e, TextDelta) for e in resumed)
        assert any(isinstance(e, ToolResult) for e in resumed)
        assert isinstance(resumed[-1], RunEnded)
        assert resumed[-1].status == "completed"
        assert resumed[-1].final is not None
        assert resumed[-1].final.text == "Sent."
    model.assert_consumed()


def test_a_failed_run(make_app: MakeApp) -> None:
    app, model = make_app(ModelError("the model is down"), ModelError("down again"))
    with serving(app) as client:
        stream = client.stream("Hi")
        with pytest.raises(RunFailedError, match="the model is down") as caught:
            list(stream)
        assert caught.value.run_id == stream.run_id is not None
        assert caught.value.thread_id == stream.thread_id is not None
        assert client.run(stream.run_id).status == "error"
        with pytest.raises(ServiceError, match="down again") as failed:
            client.invoke("Hi")
        assert failed.value.status_code == 502
    model.assert_consumed()


def test_refusals_are_parley_errors(make_app: MakeApp) -> None:
    app, _ = make_app()
    with running(app) as url:
        with pytest.raises(NotFoundError, match="'nosuch' not found"):
            AgentClient(url, agent="nosuch")
        with AgentClient(url, agent="nosuch", get_info=False) as client:
            with pytest.raises(NotFoundError, match="nosuch"):
                client.invoke("Hi")
            with pytest.raises(NotFoundError, match="nosuch"):
                next(client.stream("Hi"))
        with AgentClient(url) as client:
            with pytest.raises(InvalidRequestError, match="model: unknown model 'nosuch'"):
                client.invoke("Hi", model="nosuch")
            with pytest.raises(InvalidRequestError, match="thread_id"):
                client.invoke("Hi", thread_id=" padded ")
            with pytest.raises(InvalidRequestError, match="before"):
                client.threads(before="not-a-cursor")
            with pytest.raises(InvalidRequestError, match="limit"):
                client.threads(limit=0)


def test_auth_with_the_shared_secret(make_app: MakeApp, monkeypatch: pytest.MonkeyPatch) -> None:
    app, model = make_app("Hello.", auth_secret="s3cret")
    with running(app) as url:
        with pytest.raises(AuthenticationError, match="missing credentials") as caught:
            AgentClient(url)
        assert caught.value.status_code == 401
        with pytest.raises(AuthenticationError, match="invalid"):
            AgentClient(url, api_key="wrong")
        monkeypatch.setenv("AUTH_SECRET", "s3cret")
        with AgentClient(url) as client:
            assert client.invoke("Hi").content == "Hello."
    model.assert_consumed()


LONG = "word " * 200


def test_cancel_and_a_busy_thread(make_app: MakeApp) -> None:
    app, _model = make_app(LONG, chunk_delay=0.02, busy_timeout=0.2)
    with serving(app) as client:
        stream = client.stream("Talk a while.", stream_tokens=True)
        assert isinstance(next(stream), str)
        assert stream.thread_id is not None
        assert stream.run_id is not None
        with pytest.raises(ConflictError, match="busy"):
            client.invoke("Me too", thread_id=stream.thread_id)
        client.cancel(stream.run_id)
        rest = list(stream)
        assert len("".join(i for i in rest if isinstance(i, str))) < len(LONG)
        assert _eventually(lambda: client.run(stream.run_id or "").status == "interrupted")
        partial = client.history(stream.thread_id)[-1]
        assert partial.custom_data["parley"]["metadata"]["interrupted"] is True


def test_closing_a_stream_stops_the_run(make_app: MakeApp) -> None:
    app, _ = make_app(LONG, chunk_delay=0.02)
    with serving(app) as client:
        with client.stream("Talk a while.") as stream:
            assert isinstance(next(stream), str)
        run_id = stream.run_id
        assert run_id is not None
        assert _eventually(lambda: client.run(run_id).status == "interrupted")


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


# -- the async client, in-process ----------------------------------------------------------


@contextlib.asynccontextmanager
async def in_process(app: FastAPI, **kwargs: Any) -> AsyncIterator[AsyncAgentClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with AsyncAgentClient(
            "http://localhost", transport=transport, timeout=30, **kwargs
        ) as client:
            yield client


async def test_async_client_end_to_end(make_app: MakeApp) -> None:
    app, model = make_app("Hello.", CALL_ADD, "It is 3.", CALL_SEND, "Sent.", ModelError("x"))
    async with in_process(app) as client:
        assert client.agent == "scripted"
        assert (await client.info()).default_agent == "scripted"
        assert [a.key for a in await client.agents()] == ["scripted"]
        answer = await client.invoke("Hi")
        assert answer.thread_id is not None

        stream = client.stream("What is 1 + 2?", thread_id=answer.thread_id)
        text, messages, _ = _split([item async for item in stream])
        assert (text, [m.type for m in messages]) == ("It is 3.", ["ai", "tool", "ai"])

        events = [e async for e in client.stream_events("Email Ada.", thread_id=answer.thread_id)]
        approval = next(e for e in events if e.type == "approval_requested")
        resumed = [item async for item in client.approve_stream(approval.interrupt_id)]
        assert _split(resumed)[0] == "Sent."

        history = await client.history(answer.thread_id)
        assert [m.type for m in history][-3:] == ["ai", "tool", "ai"]
        page = await client.threads()
        assert [t.thread_id for t in page.threads] == [answer.thread_id]
        assert (await client.thread(answer.thread_id)).status == "idle"
        assert answer.run_id is not None
        assert (await client.run(answer.run_id)).status == "completed"
        assert (await client.cancel(answer.run_id)).status == "completed"
        await client.feedback(answer.run_id, "stars", 0.5)

        with pytest.raises(RunFailedError, match="x"):
            [item async for item in client.stream("Fail.", thread_id=answer.thread_id)]
        await client.delete_thread(answer.thread_id)
        with pytest.raises(NotFoundError):
            await client.thread(answer.thread_id)
        with pytest.raises(InvalidRequestError, match="model"):
            await client.invoke("Hi", model="nosuch")
    model.assert_consumed()


async def test_async_client_approve_invoke_and_events(make_app: MakeApp) -> None:
    app, model = make_app(CALL_SEND, "Not sent.", CALL_SEND, "Sent.")
    async with in_process(app) as client:
        items = [item async for item in client.stream("Email Ada.")]
        [interrupt] = _split(items)[2]
        answer = await client.approve(interrupt.interrupt_id, False)
        assert answer.content == "Not sent."
        items = [item async for item in client.stream("Again.", thread_id=interrupt.thread_id)]
        [again] = _split(items)[2]
        events = [e async for e in client.approve_events(again.interrupt_id, True)]
        assert isinstance(events[-1], RunEnded)
        assert events[-1].status == "completed"
    model.assert_consumed()


# -- parley chat --url ---------------------------------------------------------------------


def test_chat_url_asks_and_follows_up(
    make_app: MakeApp, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, model = make_app(CALL_ADD, "It is 3.", "Still 3.", "Bye.")
    with running(app) as url:
        assert cli.main(["chat", "--url", url, "What is 1 + 2?"]) == 0
        out = capsys.readouterr()
        assert out.out == "It is 3.\n"
        assert '[add] {"a": 1, "b": 2}' in out.err
        assert "[add result] 3" in out.err
        thread_id = out.err.strip().splitlines()[-1].removeprefix("thread: ")

        argv = ["chat", "--url", url, "--agent", "scripted", "--thread", thread_id, "Sure?"]
        assert cli.main(argv) == 0
        out = capsys.readouterr()
        assert out.out == "Still 3.\n"
        assert out.err.strip().endswith(f"thread: {thread_id}")

        monkeypatch.setattr("sys.stdin", io.StringIO("Goodbye\n"))
        assert cli.main(["chat", "--url", url, "--thread", thread_id]) == 0
        assert capsys.readouterr().out == "Bye.\n"
        with AgentClient(url) as client:
            questions = [m.content for m in client.history(thread_id) if m.type == "human"]
        assert questions == ["What is 1 + 2?", "Sure?", "Goodbye"]
    model.assert_consumed()


def test_chat_url_denies_an_approval_without_a_terminal(
    make_app: MakeApp, capsys: pytest.CaptureFixture[str]
) -> None:
    app, model = make_app(CALL_SEND, "I did not send it.")
    with running(app) as url:
        assert cli.main(["chat", "--url", url, "Email Ada."]) == 0
        out = capsys.readouterr()
        assert out.out == "I did not send it.\n"
        assert "denied send_email" in out.err
    model.assert_consumed()


def test_chat_url_reports_a_failed_run(
    make_app: MakeApp, capsys: pytest.CaptureFixture[str]
) -> None:
    app, _ = make_app(ModelError("the model is down"))
    with running(app) as url:
        assert cli.main(["chat", "--url", url, "Hi"]) == 2
        err = capsys.readouterr().err
        assert "parley: the model is down" in err
        assert "thread: " in err
