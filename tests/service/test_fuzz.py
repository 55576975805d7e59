"""The service's API fuzzed from its own OpenAPI schema (schemathesis), and odd inputs by hand.

The fuzz serves the app on a live uvicorn (real HTTP, `tests.service._live.running`) on a fresh
SQLite file, with auth on and one agent whose scripted model answers every call, whatever it
is asked: no request can fail for want of an answer, so what is checked is the service's own
conduct. The property, for every operation in the schema: no 5xx; every answer as the schema
documents it (status code, content type, headers, body; 405s naming the allowed methods; no
or a wrong token is a 401); no stack trace in a body; a stream read to its end is whole SSE
frames ending with `data: [DONE]`.

Bounded and reproducible: `MAX_EXAMPLES` cases per operation in the fuzzing phase (the
examples and coverage phases add a few dozen, derived from the schema), a fixed seed,
Hypothesis derandomized and without its example database, so a CI run replays the same cases.

Some inputs the fuzz cannot make, or makes too rarely to count on, are tried by hand below on
the in-process app: JSON that Python reads but a database cannot hold (NaN, a lone surrogate,
NUL), bytes that are not UTF-8, huge strings, the wrong content type; and on PostgreSQL too,
NUL in a path and a cursor out of the database's range.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import settings

from parley.agents import Agent
from parley.models.base import ChatRequest
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.service._live import running
from tests.service._support import DONE, frames
from tests.service.conftest import MakeService, Service

ANSWER = "Hello there: a scripted answer."
MAX_EXAMPLES = 100
"""Cases per operation in the fuzzing phase."""
SEED = 20261121
SECRET = "fuzz-secret"
TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "/')
FRAMING_HEADERS = ("content-length", "transfer-encoding")


class AlwaysAnswers(ScriptedModel):
    """A scripted model whose script never runs out: every call answers `ANSWER`, streamed."""

    def __init__(self, chunk_delay: float = 0.0) -> None:
        super().__init__(stream=True, chunk_size=8, chunk_delay=chunk_delay)

    def _next(self, request: ChatRequest) -> ChatResponse:
        self.steps.append(ANSWER)
        self.requests.clear()  # keep no record: the fuzz makes thousands of calls
        return super()._next(request)


def answering_agent() -> Agent:
    return Agent("echo", AlwaysAnswers(), "You answer anything.", description="Answers anything.")


def make_app(database_url: str) -> Any:
    return create_app(
        # Auth on, so that schemathesis's auth checks (no or a wrong token: 401) mean something.
        ServiceSettings(database_url=database_url, busy_timeout=1.0, auth_secret=SECRET),
        agents=[answering_agent()],
    )


CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        # Read every stream to its end (by default schemathesis stops at 20 events).
        "max-stream-events": 100_000,
        "request-timeout": 30,
        "auth": {"openapi": {"HTTPBearer": {"bearer": SECRET}}},
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
        "checks": {
            # Requests the schema allows that the service refuses by design, with a documented
            # 422: a model name that is not one of /info's, a thread id over 128 characters or
            # with control characters. The schema's `model` is any string (the toolkit's).
            "positive_data_acceptance": {"enabled": False},
            # Pydantic's lax mode, as in the toolkit's own server: `"stream_tokens": "true"` is
            # true, `"score": "1"` is 1. Schemathesis calls those invalid data accepted.
            "negative_data_rejection": {"enabled": False},
        },
    }
)
# The schema comes from an app that never starts (building it opens no database); the cases go
# to another one, served live by `base_url`. (`schemathesis.pytest.from_fixture`, the lazy way,
# fails on pytest 9: it sets a node's `_nodeid`, which pytest no longer has.)
schema = schemathesis.openapi.from_dict(
    make_app("sqlite+aiosqlite:///never-opened.db").openapi(), config=CONFIG
)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app served live on a fresh SQLite file while the module's fuzz runs."""
    database = tmp_path_factory.mktemp("fuzz") / "parley.db"
    with running(make_app(f"sqlite+aiosqlite:///{database}")) as url:
        yield url


def no_stack_trace(_ctx: Any, response: schemathesis.Response, _case: schemathesis.Case) -> None:
    """A body never shows a stack trace (a 500 says only "internal server error")."""
    found = [marker for marker in TRACEBACK_MARKERS if marker in response.text]
    assert not found, f"a stack trace in the body ({found}): {response.text[:500]}"


@schema.parametrize()
@settings(deadline=None)  # a first request may open the database; time is not the property
def test_no_server_error_and_every_answer_as_documented(
    base_url: str, case: schemathesis.Case
) -> None:
    # A header that frames the message (a generated `content-length: }g]Z`) is refused by
    # uvicorn with a 400 before the app sees the request: HTTP's, not the API's, to document.
    # The client frames the message itself.
    headers = case.headers if case.headers is not None else {}
    for name in [n for n in headers if n.lower() in FRAMING_HEADERS]:
        del headers[name]
    response = case.call_and_validate(base_url=base_url, additional_checks=[no_stack_trace])
    assert response.status_code < 500
    content_type = response.headers.get("content-type", [""])[0]
    if response.status_code == 200 and content_type.startswith("text/event-stream"):
        if case.path.startswith("/langgraph/"):  # LangGraph's streams end with no [DONE]
            assert response.text.endswith("\r\n\r\n") or not response.text, response.text[-300:]
        else:
            assert frames(response.text)[-1] == DONE, response.text[-300:]


# -- odd inputs, by hand ------------------------------------------------------------------------


async def answering_service(service: MakeService, **settings: Any) -> Service:
    return await service(answering_agent(), **settings)


async def a_run(client: httpx.AsyncClient) -> str:
    response = await client.post("/invoke", json={"message": "hi"})
    assert response.status_code == 200, response.text
    run_id: str = response.json()["run_id"]
    return run_id


async def test_the_openapi_schema_is_served(service: MakeService) -> None:
    # It answered 500 once: Msg's JSON schema was not one OpenAPI takes.
    app = await answering_service(service)
    response = await app.client.get("/openapi.json")
    assert response.status_code == 200
    assert "/invoke" in response.json()["paths"]


RUN = "{run}"  # replaced with a real run's id
NOT_JSON_TEXT = [
    pytest.param("/feedback", b'{"run_id": "{run}", "key": "k", "score": NaN}', id="NaN score"),
    pytest.param("/feedback", b'{"run_id": "{run}", "key": "k", "score": -Infinity}', id="-Inf"),
    pytest.param("/feedback", b'{"run_id": "{run}", "key": "k", "score": 1e999}', id="1e999"),
    pytest.param(
        "/feedback", b'{"run_id": "{run}", "key": "k", "score": 1, "kwargs": {"x": NaN}}', id="NaN"
    ),
    pytest.param("/invoke", b'{"message": "a\\ud800b"}', id="lone surrogate"),
    pytest.param("/stream", b'{"message": "\\udfff"}', id="lone surrogate, stream"),
    pytest.param("/history", b'{"thread_id": "\\ud800"}', id="lone surrogate, history"),
    pytest.param("/feedback", b'{"run_id": "{run}", "key": "\\ud800", "score": 1}', id="in key"),
    pytest.param("/invoke", b'{"message": "x", "agent_config": {"\\udc00": 1}}', id="dict key"),
    pytest.param("/invoke", b'{"message": "a\\u0000b"}', id="NUL"),
    pytest.param("/invoke", b'{"message": "\xff\xfe"}', id="not UTF-8"),
    pytest.param("/invoke", b'["\xed\xa0\x80"]', id="an encoded surrogate"),
    pytest.param("/invoke", b"[" * 50_000 + b"]" * 50_000, id="nested too deep"),
    pytest.param("/feedback", b'{"run_id": "x", "key": "k", "score": 1' + b"0" * 5000 + b"}"),
    pytest.param("/approvals/x/invoke", b'{"approved": NaN}', id="NaN verdict"),
]


@pytest.mark.parametrize(("path", "body"), NOT_JSON_TEXT)
async def test_json_a_database_cannot_hold_is_a_422(
    service: MakeService, path: str, body: bytes
) -> None:
    # Python's json reads all of these; each was a 500 (a NOT NULL column, an encode error while
    # storing or answering) or a 400, or reached the model as a run that failed (502).
    app = await answering_service(service)
    run_id = await a_run(app.client)
    body = body.replace(RUN.encode(), run_id.encode())
    response = await app.client.post(
        path, content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["type"] == "json_invalid"
    assert (await app.client.get("/health")).json() == {"status": "ok"}


async def test_standard_json_beyond_ascii_is_read(service: MakeService) -> None:
    app = await answering_service(service)
    body = '\ufeff{"message": "caf\\u00e9 \\ud83d\\ude00 \\\\u0000 🙂"}'.encode()  # BOM, a pair
    response = await app.client.post(
        "/invoke", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    history = await app.client.post("/history", json={"thread_id": response.json()["thread_id"]})
    assert history.json()["messages"][0]["content"] == "café 😀 \\u0000 🙂"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b""),
        ("application/json", b"null"),
        ("application/json", b"[1, 2]"),
    ],
)
async def test_a_body_that_is_not_a_json_object_is_a_422(
    service: MakeService, content_type: str | None, body: bytes
) -> None:
    app = await answering_service(service)
    headers = {"content-type": content_type} if content_type else {}
    response = await app.client.post("/invoke", content=body, headers=headers)
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], list)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b'{"message": "hi"}'),
        (None, b'{"message": "hi"}'),
        ("application/x-www-form-urlencoded", b"message=hi"),
        ("multipart/form-data; boundary=x", b'--x\r\nContent-Disposition: form-data; name="m"'),
    ],
)
@pytest.mark.parametrize("auth", [True, False])
async def test_a_body_not_sent_as_json_is_refused(
    service: MakeService, content_type: str | None, body: bytes, auth: bool
) -> None:
    # Without auth a clear 415 (`parley.service.local`: what a page of another site could
    # post); with auth FastAPI's 422 in the validation shape.
    app = await answering_service(service, **({"auth_secret": "s3cret"} if auth else {}))
    headers = {"content-type": content_type} if content_type else {}
    if auth:
        headers["authorization"] = "Bearer s3cret"
    response = await app.client.post("/invoke", content=body, headers=headers)
    assert response.status_code == (422 if auth else 415), response.text
    assert isinstance(response.json()["detail"], list if auth else str)


async def test_huge_strings(service: MakeService) -> None:
    # A message within the limits (raised here) is stored whole; past them, refused.
    app = await answering_service(service, max_message_chars=5_000_000)
    message = "x" * 5_000_000
    response = await app.client.post("/invoke", json={"message": message})
    assert response.status_code == 200
    thread_id = response.json()["thread_id"]
    history = await app.client.post("/history", json={"thread_id": thread_id})
    assert history.json()["messages"][0]["content"] == message
    response = await app.client.post("/invoke", json={"message": message + "x"})
    assert response.status_code == 422
    assert "at most 5000000 characters" in response.json()["detail"][0]["msg"]

    response = await app.client.post("/invoke", json={"message": "x", "thread_id": "t" * 100_000})
    assert response.status_code == 422
    response = await app.client.post(
        "/feedback", json={"run_id": "r" * 1_000_000, "key": "k", "score": 1}
    )
    assert response.status_code == 404
    run_id = await a_run(app.client)
    response = await app.client.post(
        "/feedback", json={"run_id": run_id, "key": "k" * 1_000_000, "score": 1e308}
    )
    assert response.status_code == 200
    response = await app.client.get("/threads/" + "t" * 8000)
    assert response.status_code == 404


async def test_a_usage_mistake_is_a_422_in_the_validation_shape(service: MakeService) -> None:
    # `fake` maps to a model spec that cannot be built: a ConfigurationError (a UserError).
    app = await answering_service(service, model_aliases={"fake": "nope:model"})
    response = await app.client.post("/invoke", json={"message": "hi", "model": "fake"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert "nope" in error["msg"]
    assert error["type"] == "value_error"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/threads/abc", "DELETE, GET"),  # two routes on one path: both named
        ("GET", "/invoke", "POST"),  # was the page's 405, `Allow: GET, HEAD`
        ("PUT", "/runs/r", "DELETE, GET"),  # DELETE /runs/{id} deletes a run
        ("POST", "/", "GET, HEAD"),  # the page's own
    ],
)
async def test_a_405_names_every_method_of_the_path(
    service: MakeService, method: str, path: str, allow: str
) -> None:
    app = await answering_service(service)
    response = await app.client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json() == {"detail": "Method Not Allowed"}


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/threads/%00", 404),
        ("DELETE", "/threads/a%00b", 404),
        ("GET", "/runs/%00", 404),
        ("POST", "/runs/%00/cancel", 404),
        ("POST", "/approvals/%00/invoke", 404),
        ("POST", "/%00/stream", 404),
        # PostgreSQL refuses NUL in text, and dates past 9999: both were a 500 there.
        ("GET", "/threads?before=" + cursor("2026-11-21T00:00:00+00:00|\x00"), 422),
        ("GET", "/threads?before=" + cursor("9999-12-31T23:59:59.999999-23:59|t"), 422),
        ("GET", "/threads?before=" + cursor("0001-01-01T00:00:00+23:59|t"), 422),
        ("GET", "/threads?before=" + cursor("2026-11-21T00:00:00|t"), 200),
    ],
)
async def test_ids_no_database_can_hold(
    service: MakeService, database_url: str, method: str, path: str, status: int
) -> None:
    app = await answering_service(service, database_url=database_url)
    await a_run(app.client)
    body = {"approved": True} if "approvals" in path else {"message": "x"}
    response = await app.client.request(method, path, json=body if method == "POST" else None)
    assert response.status_code == status, response.text
    if status == 404:
        assert "not found" in response.json()["detail"]
    assert json.loads(response.text)  # JSON, whatever the status


async def test_requests_that_make_one_new_thread_together(
    service: MakeService, database_url: str
) -> None:
    # On PostgreSQL both could find no thread and both insert it: the second was a 500 (found
    # by benchmarks/service.py, 64 clients on one thread). Now they take turns on it.
    app = await answering_service(service, database_url=database_url)
    body = {"message": "hi", "thread_id": "one-new-thread"}
    answers = await asyncio.gather(*(app.client.post("/invoke", json=body) for _ in range(12)))
    assert [a.status_code for a in answers] == [200] * 12, [a.text for a in answers]
    history = await app.client.post("/history", json={"thread_id": "one-new-thread"})
    assert len(history.json()["messages"]) == 24
