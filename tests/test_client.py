"""The client against the protocol's exact bytes, served by `httpx.MockTransport`.

End-to-end tests against the real service are in `tests/test_client_live.py`.
"""

from __future__ import annotations

import inspect
import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from parley.agents import MessageCompleted, RunEnded, RunError, RunStarted, TextDelta
from parley.client import (
    AgentClient,
    AsyncAgentClient,
    Interrupt,
    ServiceChatMessage,
)
from parley.errors import (
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ParleyError,
    RunFailedError,
    ServiceConnectionError,
    ServiceError,
    UserError,
)

URL = "http://service.test"
THREAD = "4a1f0c2e-thread"
RUN = "9b7d-run"

INFO = {
    "agents": [
        {"key": "helper", "description": "Helps."},
        {"key": "coder", "description": "Codes."},
    ],
    "models": ["gpt-4o-mini", "fake"],
    "default_agent": "helper",
    "default_model": "gpt-4o-mini",
}
CALL = {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}
AI_CALLING = {
    "type": "ai",
    "content": "",
    "tool_calls": [CALL],
    "run_id": RUN,
    "thread_id": THREAD,
}
TOOL = {
    "type": "tool",
    "content": "3",
    "tool_call_id": "call_1",
    "run_id": RUN,
    "thread_id": THREAD,
    "custom_data": {"parley": {"tool_name": "add"}},
}
AI_ANSWER = {"type": "ai", "content": "It is 3.", "run_id": RUN, "thread_id": THREAD}


def frame(data: Any) -> bytes:
    """One frame as the protocol writes it: a `data: ` line and a blank line."""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}\n\n".encode()


DONE = b"data: [DONE]\n\n"
STREAM_HEADERS = {"content-type": "text/event-stream", "x-thread-id": THREAD, "x-run-id": RUN}


def sse(*chunks: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(200, content=b"".join(chunks), headers=headers or STREAM_HEADERS)


Route = Callable[[httpx.Request], httpx.Response]


class FakeService:
    """Answers by (method, path); records every request."""

    def __init__(self, routes: dict[tuple[str, str], Route | httpx.Response]) -> None:
        self.routes = {("GET", "/info"): httpx.Response(200, json=INFO), **routes}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = self.routes.get((request.method, request.url.path))
        if route is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        return route(request) if callable(route) else route

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def last_json(self) -> Any:
        return json.loads(self.last.content)

    def client(self, **kwargs: Any) -> AgentClient:
        return AgentClient(URL, transport=httpx.MockTransport(self), **kwargs)

    def async_client(self, **kwargs: Any) -> AsyncAgentClient:
        return AsyncAgentClient(URL, transport=httpx.MockTransport(self), **kwargs)


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARLEY_API_KEY", raising=False)
    monkeypatch.delenv("AUTH_SECRET", raising=False)


# -- construction, /info, auth -------------------------------------------------------------


def test_info_picks_the_default_agent_and_is_kept() -> None:
    service = FakeService({})
    with service.client() as client:
        assert client.agent == "helper"
        assert client.metadata is not None
        assert client.metadata.models == ["gpt-4o-mini", "fake"]
    assert [(r.method, r.url.path) for r in service.requests] == [("GET", "/info")]


def test_an_unknown_agent_is_refused_at_once() -> None:
    with pytest.raises(NotFoundError, match=r"agent 'nosuch' not found .*helper, coder"):
        FakeService({}).client(agent="nosuch")


def test_without_info_the_service_picks_the_agent() -> None:
    service = FakeService({("POST", "/invoke"): httpx.Response(200, json=AI_ANSWER)})
    with service.client(get_info=False) as client:
        client.invoke("hi")
    assert [r.url.path for r in service.requests] == ["/invoke"]


def test_positional_arguments_are_the_toolkits() -> None:
    service = FakeService({})
    # AgentClient(base_url, agent, timeout, get_info), as the toolkit's client takes them.
    with AgentClient(URL, "coder", 5.0, False, transport=httpx.MockTransport(service)) as client:
        assert (client.agent, client.timeout, client.metadata) == ("coder", 5.0, None)
    assert service.requests == []


@pytest.mark.parametrize(
    ("env", "api_key", "sent"),
    [
        ({}, None, None),
        ({"AUTH_SECRET": "toolkit"}, None, "Bearer toolkit"),
        ({"AUTH_SECRET": "toolkit", "PARLEY_API_KEY": "pk"}, None, "Bearer pk"),
        ({"PARLEY_API_KEY": "pk"}, "explicit", "Bearer explicit"),
    ],
)
def test_the_api_key_is_a_bearer_token(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], api_key: str | None, sent: str | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    service = FakeService({})
    service.client(api_key=api_key).close()
    assert service.last.headers.get("authorization") == sent


@pytest.mark.parametrize("url", ["localhost:8080", "ftp://host", "http://"])
def test_a_bad_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError, match="URL"):
        AgentClient(url, get_info=False)


# -- invoke and the other plain requests ---------------------------------------------------


def test_invoke_sends_only_what_was_given() -> None:
    service = FakeService({("POST", "/helper/invoke"): httpx.Response(200, json=AI_ANSWER)})
    with service.client() as client:
        answer = client.invoke("What is 1 + 2?")
        assert service.last_json() == {"message": "What is 1 + 2?"}
        client.invoke("more", model="fake", thread_id=THREAD, agent_config={"x": 1})
        assert service.last_json() == {
            "message": "more",
            "model": "fake",
            "thread_id": THREAD,
            "agent_config": {"x": 1},
        }
    assert isinstance(answer, ServiceChatMessage)
    assert (answer.content, answer.thread_id, answer.run_id) == ("It is 3.", THREAD, RUN)


BAD_KEYWORDS = [
    ("invoke", ("hi",), {"thread": THREAD}, "'thread'"),
    ("stream", ("hi",), {"speak": True}, "'speak'"),
    ("stream_events", ("hi",), {"tokens": False}, "'tokens'"),
    ("approve_stream", ("int_1",), {"speak": True}, "'speak'"),
    ("approve_events", ("int_1",), {"model": "fake"}, "'model'"),
]


@pytest.mark.parametrize(("method", "args", "options", "named"), BAD_KEYWORDS)
def test_a_keyword_a_method_does_not_take_is_refused_before_sending(
    method: str, args: tuple[str], options: dict[str, Any], named: str
) -> None:
    service = FakeService({})
    with service.client() as client:
        sent = len(service.requests)
        with pytest.raises(
            TypeError, match=rf"{method}\(\) got an unexpected keyword argument {named}; it takes"
        ):
            getattr(client, method)(*args, **options)
        assert len(service.requests) == sent


async def _made(call: Callable[..., Any], args: tuple[str], options: dict[str, Any]) -> None:
    """Call it, and await what a coroutine function gives; a stream is not read."""
    made = call(*args, **options)
    if inspect.isawaitable(made):
        await made


@pytest.mark.parametrize(("method", "args", "options", "named"), BAD_KEYWORDS)
async def test_the_async_client_refuses_them_at_the_call_not_at_the_first_read(
    method: str, args: tuple[str], options: dict[str, Any], named: str
) -> None:
    service = FakeService({})
    async with service.async_client() as client:
        with pytest.raises(
            TypeError, match=rf"{method}\(\) got an unexpected keyword argument {named}"
        ):
            await _made(getattr(client, method), args, options)
        assert [r for r in service.requests if r.method == "POST"] == []


def test_invoke_reads_the_thread_from_the_header_when_the_body_lacks_it() -> None:
    body = {"type": "ai", "content": "ok"}
    response = httpx.Response(200, json=body, headers={"X-Thread-Id": "from-header"})
    service = FakeService({("POST", "/coder/invoke"): response})
    with service.client(agent="coder") as client:
        assert client.invoke("hi").thread_id == "from-header"


def test_agent_keys_are_quoted_in_paths() -> None:
    service = FakeService({("POST", "/a b/invoke"): httpx.Response(200, json=AI_ANSWER)})
    with service.client(agent="a b", get_info=False) as client:
        client.invoke("hi")
    assert service.last.url.raw_path == b"/a%20b/invoke"


def test_history_feedback_and_health() -> None:
    service = FakeService(
        {
            ("POST", "/history"): httpx.Response(
                200, json={"messages": [AI_CALLING, TOOL, AI_ANSWER], "thread_id": THREAD}
            ),
            ("POST", "/feedback"): httpx.Response(200, json={"status": "success"}),
            ("GET", "/health"): httpx.Response(200, json={"status": "ok"}),
        }
    )
    with service.client(get_info=False) as client:
        history = client.history(THREAD)
        assert service.last_json() == {"thread_id": THREAD}
        assert [m.type for m in history] == ["ai", "tool", "ai"]
        assert history[0].tool_calls == [CALL]
        client.feedback(RUN, "stars", 0.8, comment="good")
        assert service.last_json() == {
            "run_id": RUN,
            "key": "stars",
            "score": 0.8,
            "kwargs": {"comment": "good"},
        }
        assert client.health() == {"status": "ok"}


THREAD_INFO = {
    "thread_id": THREAD,
    "title": "What is 1 + 2?",
    "agent": "helper",
    "created_at": "2025-01-02T03:04:05Z",
    "updated_at": "2025-01-02T03:04:06Z",
    "status": "idle",
}
RUN_INFO = {
    "run_id": RUN,
    "thread_id": THREAD,
    "agent": "helper",
    "model": "scripted",
    "status": "completed",
    "error": None,
    "usage": {"input_tokens": 10, "output_tokens": 3},
    "started_at": "2025-01-02T03:04:05Z",
    "ended_at": "2025-01-02T03:04:06Z",
}


def test_threads_runs_and_agents() -> None:
    detail = {
        **THREAD_INFO,
        "messages": [{"role": "user", "content": "What is 1 + 2?"}],
        "pending": [],
    }
    service = FakeService(
        {
            ("GET", "/threads"): httpx.Response(
                200, json={"threads": [THREAD_INFO], "next": "cursor-2"}
            ),
            ("GET", f"/threads/{THREAD}"): httpx.Response(200, json=detail),
            ("DELETE", f"/threads/{THREAD}"): httpx.Response(204),
            ("GET", f"/runs/{RUN}"): httpx.Response(200, json=RUN_INFO),
            ("POST", f"/runs/{RUN}/cancel"): httpx.Response(200, json=RUN_INFO),
            ("GET", "/agents"): httpx.Response(
                200,
                json=[
                    {
                        "key": "helper",
                        "description": "Helps.",
                        "model": "m",
                        "tools": ["add"],
                        "default": True,
                    }
                ],
            ),
        }
    )
    with service.client(get_info=False) as client:
        page = client.threads(limit=5, before="cursor-1")
        assert dict(service.last.url.params) == {"limit": "5", "before": "cursor-1"}
        assert (page.next, page.threads[0].status) == ("cursor-2", "idle")
        thread = client.thread(THREAD)
        assert thread.messages[0].text == "What is 1 + 2?"
        assert client.delete_thread(THREAD) is None
        assert client.run(RUN).usage["output_tokens"] == 3
        assert client.cancel(RUN).status == "completed"
        assert service.last.method == "POST"
        assert client.agents()[0].tools == ["add"]


def test_approve_sends_the_verdict() -> None:
    service = FakeService(
        {("POST", "/approvals/int-1/invoke"): httpx.Response(200, json=AI_ANSWER)}
    )
    with service.client(get_info=False) as client:
        assert client.approve("int-1").content == "It is 3."
        assert service.last_json() == {"approved": True}
        client.approve("int-1", {"call_1": False, "call_2": True})
        assert service.last_json() == {"approved": {"call_1": False, "call_2": True}}


# -- errors --------------------------------------------------------------------------------


VALIDATION_DETAIL = {
    "detail": [
        {
            "loc": ["body", "model"],
            "msg": "Input should be 'gpt-4o-mini' or 'fake'",
            "type": "enum",
        },
        {"loc": ["body", "message"], "msg": "Field required", "type": "missing"},
    ]
}


@pytest.mark.parametrize(
    ("status", "body", "error", "text"),
    [
        (404, {"detail": "thread not found"}, NotFoundError, "thread not found"),
        (409, {"detail": "the thread is busy"}, ConflictError, "the thread is busy"),
        (401, {"detail": "missing token"}, AuthenticationError, "PARLEY_API_KEY"),
        (403, {"detail": "not yours"}, AuthenticationError, "not yours"),
        (
            422,
            VALIDATION_DETAIL,
            InvalidRequestError,
            "model: Input should be 'gpt-4o-mini' or 'fake'; message: Field required",
        ),
        (500, {"detail": "internal server error"}, ServiceError, "internal server error"),
        (502, b"<html>bad gateway</html>", ServiceError, "bad gateway"),
    ],
)
def test_error_statuses_are_parley_errors(
    status: int, body: Any, error: type[ServiceError], text: str
) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    service = FakeService({("POST", "/helper/invoke"): httpx.Response(status, content=content)})
    with service.client() as client, pytest.raises(error) as caught:
        client.invoke("hi")
    assert caught.type is error
    assert caught.value.status_code == status
    assert text in str(caught.value)
    assert "POST http://service.test/helper/invoke" in str(caught.value)


def test_a_validation_error_is_also_a_user_error_with_the_fields() -> None:
    service = FakeService({("POST", "/helper/invoke"): httpx.Response(422, json=VALIDATION_DETAIL)})
    with service.client() as client, pytest.raises(UserError) as caught:
        client.invoke("hi")
    assert isinstance(caught.value, InvalidRequestError)
    assert [e["loc"] for e in caught.value.errors] == [["body", "model"], ["body", "message"]]


def test_an_answer_that_is_not_json_or_not_the_schema_is_a_service_error() -> None:
    service = FakeService(
        {
            ("POST", "/helper/invoke"): httpx.Response(200, content=b"<html>"),
            ("GET", f"/runs/{RUN}"): httpx.Response(200, json={"run_id": RUN}),
        }
    )
    with service.client() as client:
        with pytest.raises(ServiceError, match="not JSON") as caught:
            client.invoke("hi")
        assert caught.value.status_code == 502
        with pytest.raises(ServiceError, match="unexpected shape"):
            client.run(RUN)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_service_names_its_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ServiceConnectionError, match=f"cannot reach the parley service at {url}"):
        AgentClient(url, timeout=5)


def test_a_timeout_says_how_long_it_waited() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    service = FakeService({("POST", "/helper/invoke"): slow})
    with service.client(timeout=1.5) as client, pytest.raises(ServiceConnectionError) as caught:
        client.invoke("hi")
    assert "did not answer within 1.5 s" in str(caught.value)
    assert not isinstance(caught.value.__cause__, ParleyError)


# -- streams -------------------------------------------------------------------------------


def test_stream_yields_tokens_messages_and_ids_from_the_headers() -> None:
    body = sse(
        frame({"type": "token", "content": "It is"}),
        frame({"type": "message", "content": AI_CALLING}),
        frame({"type": "message", "content": TOOL}),
        frame({"type": "token", "content": " 3."}),
        frame({"type": "message", "content": AI_ANSWER}),
        DONE,
    )
    service = FakeService({("POST", "/helper/stream"): body})
    with service.client() as client:
        stream = client.stream("What is 1 + 2?", thread_id=THREAD)
        assert stream.thread_id is None  # nothing sent yet
        items = list(stream)
    assert service.last_json() == {
        "message": "What is 1 + 2?",
        "thread_id": THREAD,
        "stream_tokens": True,
    }
    assert service.last.headers["accept"] == "text/event-stream"
    assert items[0] == "It is"
    assert items[3] == " 3."
    messages = [item for item in items if isinstance(item, ServiceChatMessage)]
    assert [(m.type, m.thread_id) for m in messages] == [
        ("ai", THREAD),
        ("tool", THREAD),
        ("ai", THREAD),
    ]
    assert messages[0].tool_calls == [CALL]
    assert (stream.thread_id, stream.run_id) == (THREAD, RUN)


def test_stream_without_tokens_says_so() -> None:
    service = FakeService({("POST", "/helper/stream"): sse(DONE)})
    with service.client() as client:
        assert list(client.stream("hi", stream_tokens=False)) == []
    assert service.last_json()["stream_tokens"] is False


def test_stream_skips_lines_that_are_not_data_and_unknown_frames() -> None:
    body = sse(
        b": a comment\n\n",
        b"event: message\n",
        frame({"type": "token", "content": "a"}),
        frame({"type": "progress", "content": {"percent": 50}}),
        b"data:" + json.dumps({"type": "token", "content": "b"}).encode() + b"\n\n",
        DONE,
        frame({"type": "token", "content": "after the end"}),
    )
    service = FakeService({("POST", "/helper/stream"): body})
    with service.client() as client:
        assert list(client.stream("hi")) == ["a", "b"]


def test_an_interrupt_comes_last() -> None:
    interrupt = {"interrupt_id": "int-1", "thread_id": THREAD, "run_id": RUN, "calls": [CALL]}
    body = sse(
        frame({"type": "message", "content": AI_CALLING}),
        frame({"type": "interrupt", "content": interrupt}),
        DONE,
    )
    service = FakeService({("POST", "/helper/stream"): body})
    with service.client() as client:
        items = list(client.stream("add 1 and 2"))
    assert items[-1] == Interrupt(interrupt_id="int-1", thread_id=THREAD, run_id=RUN, calls=[CALL])


def test_an_error_frame_raises_run_failed_with_the_ids() -> None:
    body = sse(
        frame({"type": "token", "content": "It"}),
        frame({"type": "error", "content": "the model is down"}),
        DONE,
        headers={"content-type": "text/event-stream"},
    )
    service = FakeService({("POST", "/helper/stream"): body})
    seen = []
    with service.client() as client, pytest.raises(RunFailedError, match="the model is down") as e:
        seen.extend(client.stream("hi"))
    assert seen == ["It"]
    assert e.value.run_id is None  # the frames before did not name it, nor did the headers


def test_an_error_status_on_a_stream_raises_on_the_first_read() -> None:
    response = httpx.Response(409, json={"detail": "thread busy"})
    service = FakeService({("POST", "/helper/stream"): response})
    with service.client() as client:
        stream = client.stream("hi")
        with pytest.raises(ConflictError, match="thread busy"):
            next(stream)


@pytest.mark.parametrize(
    ("chunks", "error", "text"),
    [
        ((frame({"type": "token", "content": "a"}),), ServiceConnectionError, "before data: \\["),
        ((b"data: {not json\n\n",), ServiceError, "not a JSON object"),
        ((frame([1, 2]),), ServiceError, "not a JSON object"),
        ((frame({"type": "message", "content": {"type": "robot"}}),), ServiceError, "malformed"),
    ],
)
def test_a_broken_stream_is_a_service_error(
    chunks: tuple[bytes, ...], error: type[ServiceError], text: str
) -> None:
    service = FakeService({("POST", "/helper/stream"): sse(*chunks)})
    with service.client() as client, pytest.raises(error, match=text):
        list(client.stream("hi"))


class _TrackedBody(httpx.SyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        self.closed = True


def test_closing_a_stream_early_closes_the_connection() -> None:
    body = _TrackedBody([frame({"type": "token", "content": "a"}), frame({"type": "token"}), DONE])
    service = FakeService(
        {("POST", "/helper/stream"): httpx.Response(200, stream=body, headers=STREAM_HEADERS)}
    )
    with service.client() as client, client.stream("hi") as stream:
        assert next(stream) == "a"
    assert body.closed


EVENTS = [
    {"type": "run_started", "run_id": RUN, "agent": "helper", "thread_id": THREAD},
    {"type": "text_delta", "text": "It is 3.", "thread_id": THREAD, "run_id": RUN},
    {"type": "some_future_event", "thread_id": THREAD, "run_id": RUN},
    {
        "type": "message_completed",
        "msg": {"role": "assistant", "content": "It is 3."},
        "thread_id": THREAD,
        "run_id": RUN,
    },
    {"type": "run_error", "message": "late failure", "kind": "ModelError", "thread_id": THREAD},
    {"type": "run_ended", "status": "error", "thread_id": THREAD, "run_id": RUN},
]


def test_stream_events_yields_agent_events_without_the_added_ids() -> None:
    body = sse(*(frame(event) for event in EVENTS), DONE, headers={})
    service = FakeService({("POST", "/helper/stream"): body})
    with service.client() as client:
        stream = client.stream_events("hi")
        events = list(stream)
    assert service.last_json() == {"message": "hi", "stream_tokens": True, "events": "parley"}
    assert [type(event) for event in events] == [
        RunStarted,
        TextDelta,
        MessageCompleted,
        RunError,
        RunEnded,
    ]
    started = events[0]
    assert isinstance(started, RunStarted)
    assert started.run_id == RUN
    assert (stream.thread_id, stream.run_id) == (THREAD, RUN)


def test_approve_streams_post_the_verdict_and_the_mode() -> None:
    service = FakeService(
        {
            ("POST", "/approvals/int-1/stream"): lambda request: sse(
                frame({"type": "message", "content": AI_ANSWER}), DONE
            )
        }
    )
    with service.client(get_info=False) as client:
        items = list(client.approve_stream("int-1", False))
        assert service.last_json() == {"approved": False, "stream_tokens": True}
        assert isinstance(items[0], ServiceChatMessage)
        list(client.approve_events("int-1", {"call_1": True}, stream_tokens=False))
        assert service.last_json() == {
            "approved": {"call_1": True},
            "stream_tokens": False,
            "events": "parley",
        }


# -- the async client ----------------------------------------------------------------------


async def test_async_client_fetches_info_lazily_and_streams() -> None:
    body = sse(
        frame({"type": "token", "content": "It is 3."}),
        frame({"type": "message", "content": AI_ANSWER}),
        DONE,
    )
    service = FakeService({("POST", "/helper/stream"): body})
    client = service.async_client()
    assert service.requests == []
    stream = client.stream("hi")
    items = [item async for item in stream]
    await client.aclose()
    assert [r.url.path for r in service.requests] == ["/info", "/helper/stream"]
    assert items[0] == "It is 3."
    assert (stream.thread_id, stream.run_id) == (THREAD, RUN)


async def test_async_client_context_checks_the_agent() -> None:
    with pytest.raises(NotFoundError, match="nosuch"):
        async with FakeService({}).async_client(agent="nosuch"):
            pass


async def test_async_client_requests_and_errors() -> None:
    service = FakeService(
        {
            ("POST", "/coder/invoke"): httpx.Response(200, json=AI_ANSWER),
            ("GET", f"/runs/{RUN}"): httpx.Response(404, json={"detail": "unknown run"}),
            ("POST", "/coder/stream"): sse(frame({"type": "error", "content": "boom"}), DONE),
            ("GET", "/threads"): httpx.Response(200, json={"threads": [], "next": None}),
        }
    )
    async with service.async_client(agent="coder") as client:
        assert (await client.invoke("hi")).thread_id == THREAD
        with pytest.raises(NotFoundError, match="unknown run"):
            await client.run(RUN)
        async with client.stream("hi") as stream:
            with pytest.raises(RunFailedError, match="boom") as caught:
                await anext(stream)
        assert (caught.value.thread_id, caught.value.run_id) == (THREAD, RUN)
        assert (await client.threads()).threads == []


async def test_async_events_and_unreachable_service() -> None:
    body = sse(*(frame(event) for event in EVENTS[:2]), DONE)
    service = FakeService({("POST", "/stream"): body})
    async with service.async_client(get_info=False) as client:
        events = [event async for event in client.stream_events("hi")]
    assert [event.type for event in events] == ["run_started", "text_delta"]
    url = f"http://127.0.0.1:{_closed_port()}"
    async with AsyncAgentClient(url, get_info=False, timeout=5) as client:
        with pytest.raises(ServiceConnectionError, match=url):
            await client.health()
