"""Without auth the service answers this machine only: by its names, from its own pages.

DNS rebinding (a page's own name pointed at 127.0.0.1, so its scripts reach the service with
their `Host`), another site's page posting to 127.0.0.1, and a body no JSON client sends:
each is refused before anything runs, through the in-process transport, over a real socket
with forged headers, and from real Chromium with a rebound name.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from parley.service.local import is_local_name
from tests.service._agents import echo_agent
from tests.service._live import running
from tests.service.conftest import MakeService, Service

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

LOCAL_HOSTS = [
    "localhost",
    "localhost:8080",
    "LocalHost.",
    "app.localhost:3000",
    "127.0.0.1",
    "127.8.9.10:1",
    "[::1]:8080",
    "[::ffff:127.0.0.1]",
    "0.0.0.0:8080",  # the toolkit's client and app default to http://0.0.0.0:8080
    "[::]",
]
FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:8080",
    "localhost.evil.example",
    "127.0.0.1.nip.io:8080",
    "192.168.1.20:8080",
    "user@localhost",
    "localhost:http",
    "localhost:99999",
    "localhost/x",
]


def _agent() -> Agent:
    return Agent("helper", ScriptedModel(["hello"] * 20))


async def _threads(svc: Service) -> list[str]:
    return [t.thread_id for t in await svc.state.store.list_threads("local")]


def _assert_refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    for word in words:
        assert word in detail


# -- Host -----------------------------------------------------------------------------------


@pytest.mark.parametrize("host", LOCAL_HOSTS)
async def test_a_host_naming_this_machine_is_served(service: MakeService, host: str) -> None:
    svc = await service(_agent())
    answer = await svc.client.post(
        "/invoke", json={"message": "hi", "thread_id": "t"}, headers={"Host": host}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"] == "hello"


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
async def test_another_host_is_refused_before_anything_runs(
    service: MakeService, host: str
) -> None:
    svc = await service(_agent())
    body = {"message": "hi", "thread_id": "rebound"}
    _assert_refused(
        await svc.client.post("/invoke", json=body, headers={"Host": host}), 421, "loopback name"
    )
    _assert_refused(await svc.client.get("/threads", headers={"Host": host}), 421)
    _assert_refused(await svc.client.post("/stream", json=body, headers={"Host": host}), 421)
    assert await _threads(svc) == []


async def test_openai_paths_refuse_in_their_own_error_shape(service: MakeService) -> None:
    svc = await service(_agent())
    body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    answer = await svc.client.post(
        "/v1/chat/completions", json=body, headers={"Host": "evil.example"}
    )
    assert answer.status_code == 421
    assert "loopback name" in answer.json()["error"]["message"]
    assert await _threads(svc) == []


async def test_with_auth_any_host_is_served(service: MakeService) -> None:
    svc = await service(_agent(), auth_secret="s3cret")
    answer = await svc.client.post(
        "/invoke",
        json={"message": "hi"},
        headers={"Host": "parley.example.com", "Authorization": "Bearer s3cret"},
    )
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("localhost", True),
        ("a.b.localhost", True),
        ("127.0.0.53", True),
        ("::1", True),
        ("0.0.0.0", True),
        ("localhost.com", False),
        ("mylocalhost", False),
        ("10.0.0.1", False),
        ("fe80::1%eth0", False),
        ("", False),
    ],
)
def test_local_names(name: str, local: bool) -> None:
    assert is_local_name(name) is local


# -- Origin and content type ----------------------------------------------------------------


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "http://127.0.0.1:8080", "https://app.localhost"]
)
async def test_a_page_of_this_machine_is_served(service: MakeService, origin: str) -> None:
    svc = await service(_agent())
    answer = await svc.client.post("/invoke", json={"message": "hi"}, headers={"Origin": origin})
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://evil.example:8080", "null", "file://", "localhost"]
)
async def test_a_page_of_another_origin_is_refused(service: MakeService, origin: str) -> None:
    svc = await service(_agent())
    headers = {"Origin": origin}
    answer = await svc.client.post("/invoke", json={"message": "hi"}, headers=headers)
    _assert_refused(answer, 403, "pages of this machine", "PARLEY_CORS_ORIGINS")
    _assert_refused(await svc.client.get("/threads", headers=headers), 403)
    assert await _threads(svc) == []


async def test_an_origin_listed_for_cors_is_served(service: MakeService) -> None:
    svc = await service(_agent(), cors_origins=["https://chat.example"])
    headers = {"Origin": "https://chat.example"}
    answer = await svc.client.post("/invoke", json={"message": "hi"}, headers=headers)
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "https://chat.example"
    other = await svc.client.post(
        "/invoke", json={"message": "hi"}, headers={"Origin": "https://other.example"}
    )
    assert other.status_code == 403


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain;charset=UTF-8",  # a no-cors fetch of a string
        "application/x-www-form-urlencoded",  # a form
        "multipart/form-data; boundary=x",
        None,  # a no-cors fetch of a Blob: FastAPI would read the body as JSON
    ],
)
async def test_a_body_not_sent_as_json_is_refused(
    service: MakeService, content_type: str | None
) -> None:
    svc = await service(_agent())
    headers = {"Content-Type": content_type} if content_type else {}
    body = b'{"message": "hi", "thread_id": "csrf"}'
    answer = await svc.client.post("/invoke", content=body, headers=headers)
    _assert_refused(answer, 415, "application/json")
    assert await _threads(svc) == []


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
async def test_json_by_any_spelling_is_served(service: MakeService, content_type: str) -> None:
    svc = await service(_agent())
    answer = await svc.client.post(
        "/invoke", content=b'{"message": "hi"}', headers={"Content-Type": content_type}
    )
    assert answer.status_code == 200


async def test_routes_without_a_body_need_no_content_type(service: MakeService) -> None:
    svc = await service(_agent())
    answer = await svc.client.post("/runs/run_nope/cancel")
    assert answer.status_code == 404  # reached the route: no run of that id


# -- over a real socket -------------------------------------------------------------------


@pytest.fixture
def live(sqlite_url: str) -> Iterator[str]:
    app = create_app(ServiceSettings(database_url=sqlite_url), agents=[echo_agent()])
    with running(app) as url:
        yield url


def test_forged_headers_over_a_socket(live: str) -> None:
    port = httpx.URL(live).port
    with httpx.Client(base_url=live, timeout=10) as http:
        body = {"message": "hi", "thread_id": "socket"}
        rebound = http.post("/invoke", json=body, headers={"Host": f"evil.example:{port}"})
        _assert_refused(rebound, 421, "evil.example")
        cross = http.post("/echo/invoke", json=body, headers={"Origin": "https://evil.example"})
        _assert_refused(cross, 403)
        simple = http.post(
            "/invoke", content=b'{"message": "hi"}', headers={"Content-Type": "text/plain"}
        )
        _assert_refused(simple, 415)
        assert http.get("/threads").json()["threads"] == []
        mine = http.post("/invoke", json=body, headers={"Host": f"localhost:{port}"})
        assert mine.json()["content"] == "turn 1: hi"


def test_a_request_without_host_is_refused(live: str) -> None:
    url = httpx.URL(live)
    assert url.host is not None
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(b"GET /threads HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 421 "), answer[:200]


def test_the_toolkit_clients_default_address_works(live: str) -> None:
    """The toolkit's client and app talk to `http://0.0.0.0:8080` by default."""
    port = httpx.URL(live).port
    with httpx.Client(base_url=f"http://0.0.0.0:{port}", timeout=10) as toolkit:
        assert toolkit.get("/info").json()["default_agent"] == "echo"
        answer = toolkit.post("/echo/invoke", json={"message": "hi", "model": None})
        assert answer.json()["content"] == "turn 1: hi"


# -- in Chromium, with a rebound name ---------------------------------------------------------

REBOUND = "rebound.test"


@pytest.fixture
def rebinding_page(chromium_browser: Any, chromium_launch_options: dict[str, Any]) -> Iterator[Any]:
    """A page in a Chromium whose resolver maps `rebound.test` to 127.0.0.1 (DNS rebinding).

    Chromium's own Local Network Access checks are off: they would block the page before the
    service could (Firefox and Safari have none), and the service is what is tested here.
    """
    options = dict(chromium_launch_options)
    options["args"] = [
        *options["args"],
        f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",
        "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests",
    ]
    browser = chromium_browser.browser_type.launch(**options)
    with contextlib.ExitStack() as stack:
        stack.callback(browser.close)
        context = browser.new_context()
        context.set_default_timeout(15_000)
        yield context.new_page()


_FETCH = """async ([url, init]) => {
    const response = await fetch(url, init);
    return response.type === "opaque" ? "opaque" : response.status;
}"""


def test_a_rebound_page_cannot_drive_runs_or_read_threads(live: str, rebinding_page: Any) -> None:
    port = httpx.URL(live).port
    page = rebinding_page
    with httpx.Client(base_url=live, timeout=10) as http:
        assert http.post("/invoke", json={"message": "secret", "thread_id": "mine"}).is_success

        # The attacker's page (served here by the browser itself, not by the service): its
        # origin is http://rebound.test:<port>, so its requests to the service are same-origin.
        attack = f"http://{REBOUND}:{port}/attack.html"
        page.route(attack, lambda route: route.fulfill(body="<p>cat</p>", content_type="text/html"))
        page.goto(attack)
        post = {
            "method": "POST",
            "headers": {"Content-Type": "application/json"},
            "body": '{"message": "run this", "thread_id": "evil"}',
        }
        assert page.evaluate(_FETCH, ["/threads", {}]) == 421
        assert page.evaluate(_FETCH, ["/threads/mine", {}]) == 421
        assert page.evaluate(_FETCH, ["/echo/invoke", post]) == 421

        # From that origin to 127.0.0.1: requests a page may send without asking anyone.
        target = f"http://127.0.0.1:{port}/echo/invoke"
        blob = 'new Blob([\'{"message": "run this", "thread_id": "blob"}\'])'
        assert (
            page.evaluate(
                f"fetch('{target}', {{method: 'POST', mode: 'no-cors', body: {blob}}})"
                ".then(r => r.type)"
            )
            == "opaque"
        )
        text = {"method": "POST", "mode": "no-cors", "body": '{"message": "x", "thread_id": "t"}'}
        assert page.evaluate(_FETCH, [target, text]) == "opaque"

        threads = http.get("/threads").json()["threads"]
        assert [t["thread_id"] for t in threads] == ["mine"]

        # The service's own page, under a name of this machine, works.
        page.goto(f"{live}/")
        assert page.evaluate(_FETCH, ["/threads", {}]) == 200
        assert page.evaluate(_FETCH, ["/echo/invoke", post]) == 200
