"""What a request may cost: bodies and messages have limits, and a client must read its stream.

Over real HTTP (a uvicorn process of the service's own, raw sockets for clients that send too
much or read nothing), with the server's memory read from `/proc`: a body over the limit is a
413 as it arrives (by its `Content-Length`, or as a chunked body passes the limit), and
nothing is stored; clients that never read their streams are dropped (their connections
closed by the server), while their runs go on to their end and are stored. In process, every
route with a body answers the same 413 (OpenAI's shape on `/v1`), and a message too long is
refused before anything is stored.
"""

from __future__ import annotations

import json
import select
import shutil
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from tests._requires import unavailable
from tests.service._agents import LONG_SENTENCE
from tests.service._live import ServerProcess, service_process
from tests.service._support import wait_for
from tests.service.conftest import MakeService

MIB = 1 << 20
LONG_ANSWER_APP = "tests.service._agents:long_answer_app"


def _wait(check: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    """Poll `check` until it returns something truthy (bounded); that value."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.2)
    return value


# -- bodies over the limit, over a socket -------------------------------------------------------


def _head(port: int, path: str, length: int | None) -> bytes:
    sized = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n{sized}\r\n\r\n"
    ).encode()


def _response(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the one response on `sock` (a bounded wait)."""
    sock.settimeout(60)
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        assert piece, f"the connection closed before an answer: {data!r}"
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return int(lines[0].split()[1]), json.loads(body)


def _pieces(size: int, thread_id: str) -> Iterator[bytes]:
    """A `size`-byte /invoke body (one long message), a mebibyte at a time."""
    opening = json.dumps({"thread_id": thread_id, "message": ""})[:-2].encode()
    yield opening
    filler = size - len(opening) - 2
    for start in range(0, filler, MIB):
        yield b"a" * min(MIB, filler - start)
    yield b'"}'


def _send_big_body(port: int, size: int, *, chunked: bool, thread_id: str) -> tuple[int, Any]:
    """POST /invoke with a `size`-byte body, until the server answers; its answer."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_head(port, "/invoke", None if chunked else size))
        for piece in _pieces(size, thread_id):
            if select.select([sock], [], [], 0)[0]:
                break  # it answered before the end of the body
            data = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
            try:
                sock.sendall(data)
            except OSError:  # it stopped taking the body
                break
        else:
            sock.sendall(b"0\r\n\r\n" if chunked else b"")  # all of it went
        return _response(sock)


@pytest.fixture(scope="module")
def small_limits() -> Iterator[ServerProcess]:
    env = {"PARLEY_MAX_BODY_BYTES": str(MIB), "PARLEY_TEST_SENTENCES": "1"}
    with service_process(LONG_ANSWER_APP, env) as server:
        yield server


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_refused_as_it_arrives(
    small_limits: ServerProcess, chunked: bool
) -> None:
    server = small_limits
    thread_id = f"big-{chunked}"
    idle = server.memory("VmRSS")
    status, answer = _send_big_body(server.port, 64 * MIB, chunked=chunked, thread_id=thread_id)
    assert status == 413
    assert "too large" in answer["detail"]
    assert f"at most {MIB} bytes" in answer["detail"]
    assert "PARLEY_MAX_BODY_BYTES" in answer["detail"]
    # Its peak stayed far under the body: never read whole (64 MiB would take 300 MiB).
    assert server.memory("VmHWM") - idle < 16 * MIB
    assert httpx.get(f"{server.url}/threads/{thread_id}").status_code == 404  # nothing stored
    # The connection was not reset: the server still answers, a body under the limit too.
    fine = httpx.post(f"{server.url}/invoke", json={"message": "hi"}, timeout=30)
    assert fine.status_code == 200


# -- bodies and messages over the limit, on every route -----------------------------------------

_ROUTES: list[tuple[str, dict[str, Any]]] = [
    ("/invoke", {"message": "x"}),
    ("/stream", {"message": "x"}),
    ("/helper/invoke", {"message": "x"}),
    ("/history", {"thread_id": "t"}),
    ("/feedback", {"run_id": "r", "key": "k", "score": 1}),
    ("/approvals/i/invoke", {"approved": True}),
    ("/agui/run", {"threadId": "t", "runId": "r", "messages": [], "state": {}, "tools": []}),
    ("/v1/chat/completions", {"model": "helper", "messages": []}),
]


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 1000):
        yield data[start : start + 1000]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(("path", "fields"), _ROUTES, ids=[p for p, _ in _ROUTES])
async def test_every_route_refuses_a_body_over_the_limit(
    service: MakeService, path: str, fields: dict[str, Any], chunked: bool
) -> None:
    svc = await service(Agent("helper", ScriptedModel([])), max_body_bytes=5000)
    body = json.dumps({**fields, "padding": "p" * 6000}).encode()
    content = _chunks(body) if chunked else body
    headers = {"Content-Type": "application/json"}
    response = await svc.client.post(path, content=content, headers=headers)
    assert response.status_code == 413, response.text
    if path.startswith("/v1/"):
        assert "at most 5000 bytes" in response.json()["error"]["message"]
    else:
        assert "at most 5000 bytes" in response.json()["detail"]
    assert (await svc.client.get("/threads")).json()["threads"] == []


async def test_a_message_over_the_limit_is_refused_and_not_stored(service: MakeService) -> None:
    model = ScriptedModel(["fine"] * 4)
    svc = await service(Agent("helper", model), max_message_chars=100)
    client = svc.client
    long, short = "x" * 101, "x" * 100
    refused = [
        await client.post("/invoke", json={"message": long, "thread_id": "t1"}),
        await client.post("/stream", json={"message": long, "thread_id": "t2"}),
        await client.post(
            "/agui/run",
            json={
                "threadId": "t3",
                "runId": "r",
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
                "messages": [
                    {"id": "a", "role": "user", "content": long},
                    {"id": "b", "role": "user", "content": "short"},
                ],
            },
        ),
    ]
    for response in refused:
        assert response.status_code == 422, response.text
        [error] = response.json()["detail"]
        assert "at most 100 characters" in error["msg"]
        assert "holds 101" in error["msg"]
        assert "PARLEY_MAX_MESSAGE_CHARS" in error["msg"]
    v1 = await client.post(
        "/v1/chat/completions",
        json={"model": "helper", "messages": [{"role": "user", "content": long}]},
        headers={"X-Thread-Id": "t4"},
    )
    assert v1.status_code == 400
    assert v1.json()["error"]["param"] == "messages"
    assert "at most 100 characters" in v1.json()["error"]["message"]
    assert (await client.get("/threads")).json()["threads"] == []  # nothing stored

    ok = await client.post("/invoke", json={"message": short, "thread_id": "t1"})
    assert ok.status_code == 200


# -- a stream's queue ------------------------------------------------------------------------------


async def test_a_stream_too_far_behind_its_run_is_dropped_and_the_run_goes_on(
    service: MakeService,
) -> None:
    answer = "word " * 2_000
    # No delay between chunks: the run writes its 1,000 deltas before the stream reads one.
    model = ScriptedModel([answer, answer], stream=True, chunk_size=10)
    svc = await service(Agent("helper", model), stream_buffer_bytes=64 * 1024)
    streamed = await svc.client.post(
        "/stream", json={"message": "hi", "thread_id": "t", "stream_tokens": True}
    )
    assert streamed.status_code == 200
    assert "[DONE]" not in streamed.text  # let go mid-way: no end to take for the whole
    detail = await wait_for(
        lambda: _stored_in(svc, "t"), "the run to end and be stored", timeout=30
    )
    assert detail["messages"][-1]["content"][0]["text"] == answer  # the run went on

    # A reader in the service itself (`/invoke` waiting for the answer) takes every event.
    whole = await svc.client.post("/invoke", json={"message": "again", "thread_id": "u"})
    assert whole.status_code == 200
    assert whole.json()["content"] == answer


async def _stored_in(svc: Any, thread_id: str) -> dict[str, Any] | None:
    response = await svc.client.get(f"/threads/{thread_id}")
    detail: dict[str, Any] = response.json()
    done = detail["status"] == "idle" and detail["messages"][-1]["role"] == "assistant"
    return detail if done else None


# -- clients that do not read -------------------------------------------------------------------


def _stream_request(port: int, path: str, body: dict[str, Any]) -> socket.socket:
    """Send a request for a stream on a socket that will read nothing (a small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    sock.sendall(_head(port, path, len(data)) + data)
    return sock


def _thread_of(server: ServerProcess, kind: str, thread_id: str) -> str | None:
    """The request's thread once its run started, else None (/v1 makes a new one: listed)."""
    if kind == "v1":
        listed = httpx.get(f"{server.url}/threads", timeout=30).json()["threads"]
        return str(listed[0]["thread_id"]) if listed else None
    found = httpx.get(f"{server.url}/threads/{thread_id}", timeout=30).status_code == 200
    return thread_id if found else None


def _stored(server: ServerProcess, thread_id: str) -> dict[str, Any] | None:
    """The thread once its run has ended with its answer stored, else None."""
    response = httpx.get(f"{server.url}/threads/{thread_id}", timeout=30)
    if response.status_code != 200:
        return None
    detail: dict[str, Any] = response.json()
    done = detail["status"] == "idle" and detail["messages"][-1]["role"] == "assistant"
    return detail if done else None


def _require_espeak() -> None:
    if shutil.which("espeak-ng") is None:
        unavailable("espeak-ng is not installed (Debian's espeak-ng, the local voice)")


def test_clients_that_never_read_a_spoken_stream_are_dropped_and_their_runs_stored() -> None:
    _require_espeak()
    # Each answer is about 14 MB of speech as base64; a client may lag 1 MiB behind.
    clients, buffer = 10, MIB
    env = {
        "PARLEY_TTS": "local:espeak-ng",
        "PARLEY_TEST_SENTENCES": "4",
        "PARLEY_STREAM_BUFFER_BYTES": str(buffer),
    }
    with service_process(LONG_ANSWER_APP, env) as server:
        idle, idle_sockets = server.memory("VmRSS"), server.sockets()
        threads = [f"slow-{i}" for i in range(clients)]
        body = {"message": "Tell me about Paris.", "speak": True, "events": "parley"}
        held = [_stream_request(server.port, "/stream", {**body, "thread_id": t}) for t in threads]
        try:
            details = [_wait(lambda t=t: _stored(server, t), f"run on {t}") for t in threads]
            # Every connection the server holds for them is gone (it closed them).
            _wait(lambda: server.sockets() <= idle_sockets, "the clients to be dropped")
            peak = server.memory("VmHWM")
        finally:
            for sock in held:
                sock.close()
    for detail in details:  # each run went on to its end, its answer whole
        answer = detail["messages"][-1]["content"][0]["text"]
        assert answer == LONG_SENTENCE * 4
    # Bounded: what the clients may lag, and the runs' own work; never their 140 MB of audio.
    assert peak - idle < clients * buffer + 64 * MIB


_PATHS = {
    "toolkit": ("/stream", {"message": "Tell me.", "stream_tokens": True}),
    "agui": (
        "/agui/run",
        {
            "runId": "r",
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": [{"id": "u", "role": "user", "content": "Tell me."}],
        },
    ),
    "v1": (
        "/v1/chat/completions",
        {"model": "assistant", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    ),
}


@pytest.mark.parametrize("kind", list(_PATHS))
def test_a_stream_that_waits_past_the_send_timeout_drops_its_client(kind: str) -> None:
    # Small socket buffers, so that a client that reads nothing blocks the server at once;
    # a stream buffer large enough that only the send timeout (1 s) can drop it.
    env = {
        "PARLEY_TEST_SENTENCES": "400",  # 400 kB of text
        "PARLEY_SEND_TIMEOUT": "1",
        "PARLEY_STREAM_BUFFER_BYTES": str(256 * MIB),
    }
    path, body = _PATHS[kind]
    with service_process(LONG_ANSWER_APP, env, send_buffer=8192) as server:
        idle_sockets = server.sockets()
        thread_id = f"timeout-{kind}"
        if kind == "v1":
            request = _stream_request(server.port, path, body)  # a new thread; found below
        else:
            field = "threadId" if kind == "agui" else "thread_id"
            request = _stream_request(server.port, path, {**body, field: thread_id})
        try:
            # Its run first (the server took the request), so that the drop below is not read
            # off a connection the server had not accepted yet (a loaded machine).
            thread_id = _wait(lambda: _thread_of(server, kind, thread_id), "the run to start")
            _wait(lambda: server.sockets() <= idle_sockets, "the client to be dropped")
            detail = _wait(lambda: _stored(server, thread_id), "the run to be stored")
        finally:
            request.close()
    answer = detail["messages"][-1]["content"][0]["text"]
    assert answer == LONG_SENTENCE * 400  # the run was not stopped
