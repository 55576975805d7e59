"""Who is asking: no auth (user `local`, loopback only), API keys, the toolkit's shared secret.

And what one user may do with another's runs: nothing, and learn nothing (404, exactly as
for what does not exist). Threads are per user: `test_thread_ids.py`.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings
from parley.service.store import hash_key
from tests.service.conftest import MakeService, Service

pytestmark = pytest.mark.usefixtures("no_ambient_settings")


def _agent(*answers: str) -> Agent:
    return Agent("helper", ScriptedModel(list(answers)))


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.headers["content-type"].startswith("application/json")
    detail = response.json()["detail"]
    assert isinstance(detail, str)
    assert detail


# -- no auth -----------------------------------------------------------------------------------


async def test_without_auth_every_request_is_the_local_user(service: MakeService) -> None:
    svc = await service(_agent("hello"))
    assert not svc.settings.auth_enabled

    answer = await svc.client.post("/invoke", json={"message": "hi", "thread_id": "t-local"})
    assert answer.status_code == 200

    thread = await svc.state.store.get_thread("t-local", "local")
    assert thread is not None
    assert thread.user_id == "local"
    # A token sent anyway changes nothing: there is nobody else to be.
    listed = await svc.client.get("/threads", headers=_bearer("whatever"))
    assert [t["thread_id"] for t in listed.json()["threads"]] == ["t-local"]


@pytest.mark.parametrize(
    ("host", "auth", "expected"),
    [
        ("0.0.0.0", {}, "127.0.0.1"),
        ("::", {}, "127.0.0.1"),
        ("192.168.1.20", {}, "127.0.0.1"),
        ("127.0.0.1", {}, "127.0.0.1"),
        ("::1", {}, "::1"),
        ("localhost", {}, "localhost"),
        ("0.0.0.0", {"api_keys": True}, "0.0.0.0"),
        ("0.0.0.0", {"auth_secret": "s3cret"}, "0.0.0.0"),
        ("::", {"api_keys": True, "auth_secret": "s3cret"}, "::"),
    ],
)
def test_bind_host_is_loopback_unless_auth_is_on(
    host: str, auth: dict[str, object], expected: str
) -> None:
    settings = ServiceSettings(host=host, **auth)  # type: ignore[arg-type]
    assert settings.bind_host() == expected
    assert settings.host == host  # what was asked is kept; only the bind is narrowed


# -- API keys ----------------------------------------------------------------------------------


@pytest.fixture
async def keyed(service: MakeService) -> Service:
    return await service(_agent(*[f"answer {i}" for i in range(10)]), api_keys=True)


async def test_api_keys_refuse_a_missing_wrong_or_malformed_token(keyed: Service) -> None:
    key, _ = await keyed.state.store.create_api_key("alice")
    body = {"message": "hi"}

    _assert_401(await keyed.client.post("/invoke", json=body))
    _assert_401(await keyed.client.post("/invoke", json=body, headers=_bearer(key + "x")))
    _assert_401(await keyed.client.post("/invoke", json=body, headers=_bearer("pk_nope")))
    basic = {"Authorization": "Basic YWxpY2U6c2VjcmV0"}
    _assert_401(await keyed.client.post("/invoke", json=body, headers=basic))
    _assert_401(await keyed.client.get("/threads"))
    _assert_401(await keyed.client.post("/stream", json=body))
    _assert_401(await keyed.client.get("/runs/run_x"))
    # Nothing ran for the refused requests.
    assert (await keyed.state.store.list_threads("alice")) == []


async def test_a_valid_key_works_and_names_its_user(keyed: Service) -> None:
    key, record = await keyed.state.store.create_api_key("alice", "laptop")
    assert record.user_id == "alice"
    assert key.startswith("pk_")

    answer = await keyed.client.post(
        "/invoke", json={"message": "hi", "thread_id": "t-a"}, headers=_bearer(key)
    )
    assert answer.status_code == 200
    assert answer.json()["content"] == "answer 0"
    thread = await keyed.state.store.get_thread("t-a", "alice")
    assert thread is not None
    assert thread.user_id == "alice"


async def test_a_revoked_key_stops_working(keyed: Service) -> None:
    store = keyed.state.store
    key, record = await store.create_api_key("alice")
    other, _ = await store.create_api_key("alice")
    assert (await keyed.client.get("/threads", headers=_bearer(key))).status_code == 200

    assert await store.revoke_api_key(record.key_id)

    _assert_401(await keyed.client.get("/threads", headers=_bearer(key)))
    # Only that key: the user's other key still works.
    assert (await keyed.client.get("/threads", headers=_bearer(other))).status_code == 200


async def test_keys_are_stored_hashed(keyed: Service, tmp_path: Path) -> None:
    key, _ = await keyed.state.store.create_api_key("alice")
    assert (await keyed.client.get("/threads", headers=_bearer(key))).status_code == 200

    files = sorted(tmp_path.glob("parley.db*"))  # the database and its WAL, if any
    assert files
    stored = b"".join(f.read_bytes() for f in files)
    # pk_<id>_<secret>: the secret (urlsafe base64) may itself hold `_`, so split from the left
    # (split from the right, a key ending `_Q` left `Q`, found by chance in the file's bytes).
    secret_part = key.split("_", 2)[2]
    assert len(secret_part) >= 40
    assert key.encode() not in stored
    assert secret_part.encode() not in stored
    assert hash_key(key).encode() in stored  # the bytes read are where the key went


# -- one user, another's threads ---------------------------------------------------------------


@pytest.fixture
async def two_users(service: MakeService) -> tuple[Service, dict[str, str], dict[str, str]]:
    model = ScriptedModel([f"answer {i}" for i in range(20)])
    svc = await service(Agent("helper", model), api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    return svc, _bearer(alice), _bearer(bob)


async def test_another_users_run_is_not_found(
    two_users: tuple[Service, dict[str, str], dict[str, str]],
) -> None:
    svc, alice, bob = two_users
    client, store = svc.client, svc.state.store
    made = await client.post("/invoke", json={"message": "hi", "thread_id": "t-bob"}, headers=bob)
    run_id = made.headers["X-Run-Id"]

    assert (await client.get(f"/runs/{run_id}", headers=alice)).status_code == 404
    assert (await client.post(f"/runs/{run_id}/cancel", headers=alice)).status_code == 404
    feedback = {"run_id": run_id, "key": "human-feedback-stars", "score": 0.0}
    assert (await client.post("/feedback", json=feedback, headers=alice)).status_code == 404
    assert await store.get_feedback(run_id) == []

    assert (await client.get(f"/runs/{run_id}", headers=bob)).json()["status"] == "completed"
    assert (await client.post("/feedback", json=feedback, headers=bob)).status_code == 200
    assert [f["user_id"] for f in await store.get_feedback(run_id)] == ["bob"]


# -- the toolkit's shared secret ---------------------------------------------------------------


async def test_auth_secret_from_the_environment_is_the_user_default(
    service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTH_SECRET", "toolkit-secret")
    svc = await service(_agent("hello"))
    assert svc.settings.auth_enabled
    assert not svc.settings.api_keys

    _assert_401(await svc.client.post("/invoke", json={"message": "hi"}))
    _assert_401(
        await svc.client.post("/invoke", json={"message": "hi"}, headers=_bearer("toolkit"))
    )
    ok = await svc.client.post(
        "/invoke", json={"message": "hi", "thread_id": "t-s"}, headers=_bearer("toolkit-secret")
    )
    assert ok.status_code == 200
    thread = await svc.state.store.get_thread("t-s", "default")
    assert thread is not None


async def test_with_only_the_secret_api_keys_are_refused(service: MakeService) -> None:
    svc = await service(_agent("hello"), auth_secret="s3cret")
    key, _ = await svc.state.store.create_api_key("alice")
    _assert_401(await svc.client.get("/threads", headers=_bearer(key)))
    assert (await svc.client.get("/threads", headers=_bearer("s3cret"))).status_code == 200


async def test_secret_and_api_keys_at_once(service: MakeService) -> None:
    svc = await service(_agent("one", "two"), auth_secret="s3cret", api_keys=True)
    key, _ = await svc.state.store.create_api_key("alice")
    secret, alice = _bearer("s3cret"), _bearer(key)

    by_secret = await svc.client.post(
        "/invoke", json={"message": "x", "thread_id": "t-sec"}, headers=secret
    )
    by_key = await svc.client.post(
        "/invoke", json={"message": "y", "thread_id": "t-key"}, headers=alice
    )
    assert by_secret.status_code == by_key.status_code == 200
    assert await svc.state.store.get_thread("t-sec", "default") is not None
    assert await svc.state.store.get_thread("t-key", "alice") is not None
    # Each sees only their own.
    seen_by_secret = (await svc.client.get("/threads", headers=secret)).json()["threads"]
    seen_by_key = (await svc.client.get("/threads", headers=alice)).json()["threads"]
    assert [t["thread_id"] for t in seen_by_secret] == ["t-sec"]
    assert [t["thread_id"] for t in seen_by_key] == ["t-key"]
    _assert_401(await svc.client.get("/threads", headers=_bearer("s3cret!")))
    _assert_401(await svc.client.get("/threads"))
