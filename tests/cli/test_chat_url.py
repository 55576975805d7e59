"""`parley chat --url`, against a scripted HTTP server that sends the protocol's exact bytes.

The same command against the real service is in `tests/test_client_live.py`.
"""

from __future__ import annotations

import io
import json
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from parley import cli
from parley.providers._server.http import RecordedRequest, Responder, ScriptedHTTPServer

THREAD = "thread-1"
RUN = "run-1"
INFO = {
    "agents": [{"key": "helper", "description": "Helps."}, {"key": "coder", "description": "."}],
    "models": ["gpt-4o-mini", "fake"],
    "default_agent": "helper",
    "default_model": "gpt-4o-mini",
}
CALL = {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}
INTERRUPT = {"interrupt_id": "int-1", "thread_id": THREAD, "run_id": RUN, "calls": [CALL]}


def message(kind: str, content: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "content": content, "run_id": RUN, "thread_id": THREAD, **fields}


def frames(*items: dict[str, Any]) -> list[bytes]:
    return [f"data: {json.dumps(item)}\n\n".encode() for item in items] + [b"data: [DONE]\n\n"]


TOOL_ROUND = frames(
    {"type": "message", "content": message("ai", "", tool_calls=[CALL])},
    {
        "type": "message",
        "content": message(
            "tool", "3", tool_call_id="call_1", custom_data={"parley": {"tool_name": "add"}}
        ),
    },
    {"type": "token", "content": "It is"},
    {"type": "token", "content": " 3."},
    {"type": "message", "content": message("ai", "It is 3.")},
)

Routes = dict[str, Callable[[RecordedRequest], list[bytes]]]


@pytest.fixture
def service() -> Iterator[Callable[[Routes], ScriptedHTTPServer]]:
    servers: list[ScriptedHTTPServer] = []

    def start(routes: Routes) -> ScriptedHTTPServer:
        def handle(request: RecordedRequest, responder: Responder) -> None:
            if request.path == "/info":
                responder.send_json(200, INFO)
                return
            route = routes.get(request.path)
            if route is None:
                responder.send_json(404, {"detail": f"no route {request.path}"})
                return
            responder.start_stream()
            responder.chunk(b"")  # headers first, as the service sends them
            for chunk in route(request):
                responder.chunk(chunk)
            responder.end_stream()

        server = ScriptedHTTPServer(handle)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
        assert not server.errors


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARLEY_API_KEY", raising=False)
    monkeypatch.delenv("AUTH_SECRET", raising=False)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def posted(server: ScriptedHTTPServer) -> list[tuple[str, Any]]:
    return [(r.path, r.json) for r in server.requests if r.method == "POST"]


def test_one_question_streams_the_answer_and_shows_tools(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    server = service({"/helper/stream": lambda request: TOOL_ROUND})
    assert cli.main(["chat", "--url", server.base_url, "What", "is", "1 + 2?"]) == 0
    out = capsys.readouterr()
    assert out.out == "It is 3.\n"
    assert '[add] {"a": 1, "b": 2}' in out.err
    assert "[add result] 3" in out.err
    assert out.err.rstrip().endswith(f"thread: {THREAD}")
    assert posted(server) == [
        ("/helper/stream", {"message": "What is 1 + 2?", "stream_tokens": True})
    ]


def test_agent_thread_model_and_key_are_sent(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    server = service({"/coder/stream": lambda request: TOOL_ROUND})
    argv = ["chat", "--url", server.base_url, "--agent", "coder", "--thread", "t-0"]
    argv += ["--model", "fake", "--api-key", "secret", "hi"]
    assert cli.main(argv) == 0
    assert posted(server) == [
        (
            "/coder/stream",
            {"message": "hi", "model": "fake", "thread_id": "t-0", "stream_tokens": True},
        )
    ]
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer secret"}


def test_an_answer_that_was_not_streamed_is_printed_whole(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    route = frames({"type": "message", "content": message("ai", "Whole answer.")})
    server = service({"/helper/stream": lambda request: route})
    assert cli.main(["chat", "--url", server.base_url, "hi"]) == 0
    assert capsys.readouterr().out == "Whole answer.\n"


def test_a_conversation_on_stdin_stays_in_one_thread(
    service: Callable[[Routes], ScriptedHTTPServer],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = service({"/helper/stream": lambda request: TOOL_ROUND})
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\n\nsecond\n"))
    assert cli.main(["chat", "--url", server.base_url]) == 0
    assert capsys.readouterr().out == "It is 3.\nIt is 3.\n"
    bodies = [body for _, body in posted(server)]
    assert [body.get("thread_id") for body in bodies] == [None, THREAD]


def _approval_routes() -> Routes:
    return {
        "/helper/stream": lambda request: frames(
            {"type": "message", "content": message("ai", "", tool_calls=[CALL])},
            {"type": "interrupt", "content": INTERRUPT},
        ),
        "/approvals/int-1/stream": lambda request: frames(
            {"type": "message", "content": message("ai", "Done.")}
        ),
    }


def test_an_approval_is_denied_without_a_terminal(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    server = service(_approval_routes())
    assert cli.main(["chat", "--url", server.base_url, "add 1 and 2"]) == 0
    out = capsys.readouterr()
    assert out.out == "Done.\n"
    assert "denied add" in out.err
    assert posted(server)[-1] == (
        "/approvals/int-1/stream",
        {"approved": False, "stream_tokens": True},
    )


@pytest.mark.parametrize(("answer", "approved"), [("y\n", True), ("n\n", False), ("", False)])
def test_an_approval_is_asked_on_a_terminal(
    service: Callable[[Routes], ScriptedHTTPServer],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    approved: bool,
) -> None:
    server = service(_approval_routes())
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    assert cli.main(["chat", "--url", server.base_url, "add 1 and 2"]) == 0
    assert 'Run add {"a": 1, "b": 2}? [y/N]' in capsys.readouterr().err
    assert posted(server)[-1][1] == {"approved": approved, "stream_tokens": True}


def test_a_failed_run_is_reported_with_its_thread(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    route = frames({"type": "error", "content": "the model is down"})
    server = service({"/helper/stream": lambda request: route})
    assert cli.main(["chat", "--url", server.base_url, "hi"]) == 2
    err = capsys.readouterr().err
    assert "parley: the model is down" in err
    assert "thread: " not in err  # the headers named no thread, nor did the frames


def test_an_unknown_agent_is_a_clear_error(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    server = service({})
    assert cli.main(["chat", "--url", server.base_url, "--agent", "nosuch", "hi"]) == 2
    assert "agent 'nosuch' not found" in capsys.readouterr().err


def test_an_unreachable_service_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert cli.main(["chat", "--url", url, "hi"]) == 2
    assert f"cannot reach the parley service at {url}" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--thread", "t"], ["--agent", "a"], ["--api-key", "k"]])
def test_service_flags_need_a_url(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", *flag, "hi"]) == 2
    assert "go with --url" in capsys.readouterr().err


def test_local_tools_do_not_go_with_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", "--url", "http://127.0.0.1:9", "--tools", "hi"]) == 2
    assert "drop --url" in capsys.readouterr().err


def test_verbose_prints_each_run_s_usage_and_cost(
    service: Callable[[Routes], ScriptedHTTPServer], capsys: pytest.CaptureFixture[str]
) -> None:
    run = {
        "run_id": RUN,
        "thread_id": THREAD,
        "agent": "helper",
        "model": "gpt-4o-mini",
        "status": "completed",
        "usage": {
            "input_tokens": 1200,
            "output_tokens": 80,
            "cached_tokens": 200,
            "elapsed": 1.5,
            "cost": 0.000213,
        },
        "started_at": "2026-11-27T12:00:00+00:00",
        "ended_at": "2026-11-27T12:00:02+00:00",
    }
    server = service(
        {
            "/helper/stream": lambda request: TOOL_ROUND,
            f"/runs/{RUN}": lambda request: [json.dumps(run).encode()],
        }
    )
    assert cli.main(["chat", "--url", server.base_url, "-v", "What is 1 + 2?"]) == 0
    err = capsys.readouterr().err
    assert "usage: 1,200 tokens in (200 cached), 80 out, 1.50 s, cost 0.000213" in err
    assert [r.path for r in server.requests if r.method == "GET"][-1] == f"/runs/{RUN}"
