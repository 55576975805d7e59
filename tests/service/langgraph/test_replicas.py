"""LangGraph's run routes on two replicas of one PostgreSQL: any replica serves any run.

Replica A runs the runs (B has `run_concurrency` 0, so it only serves readers); the official
`langgraph-sdk` client on B streams, joins, gets and lists a run A started, and picks up a
stream cut on A from the last id it saw there (what the SDK's reconnect does when a load
balancer sends it to another replica).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.service._live import running

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

ANSWER = "a b c d e f g h"
MODES = ["values", "messages-tuple"]
Part = tuple[str, Any, str | None]


def _agent() -> Agent:
    model = ScriptedModel([ANSWER] * 5, stream=True, chunk_size=1, chunk_delay=0.05)
    return Agent("slow", model)


@dataclass
class Replicas:
    """Replica A (runs the runs) and replica B (only serves), on one database, and a client
    of the official SDK on each."""

    base_a: str
    client_a: Any
    client_b: Any


@pytest.fixture
def replicas(postgres_db_url: str) -> Iterator[Replicas]:
    """Two replicas of one PostgreSQL; B takes no runs (`run_concurrency` 0)."""
    app_a = create_app(ServiceSettings(database_url=postgres_db_url), agents=[_agent()])
    app_b = create_app(
        ServiceSettings(database_url=postgres_db_url, run_concurrency=0), agents=[_agent()]
    )
    with running(app_a) as base_a, running(app_b) as base_b:
        client_a = get_sync_client(url=f"{base_a}/langgraph")
        client_b = get_sync_client(url=f"{base_b}/langgraph")
        try:
            yield Replicas(base_a, client_a, client_b)
        finally:
            client_a.close()
            client_b.close()


def _sse_parts(lines: Iterator[str], count: int) -> list[Part]:
    """The first `count` frames of an SSE body (event, parsed data, id)."""
    parts: list[Part] = []
    event, data, frame_id = "", "", None
    for line in lines:
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif line.startswith("id: "):
            frame_id = line[len("id: ") :]
        elif not line and event:
            parts.append((event, json.loads(data), frame_id))
            event, data, frame_id = "", "", None
            if len(parts) == count:
                break
    return parts


def _sdk_parts(stream: Iterator[Any]) -> list[Part]:
    return [(p.event, p.data, p.id) for p in stream]


def test_a_run_started_on_one_replica_is_read_and_picked_up_on_another(
    replicas: Replicas,
) -> None:
    client_a, client_b = replicas.client_a, replicas.client_b
    tid = client_a.threads.create()["thread_id"]
    body = {
        "assistant_id": "slow",
        "input": {"messages": [{"type": "human", "content": "go"}]},
        "stream_mode": MODES,
        "stream_resumable": True,
        "metadata": {"who": "test"},
    }
    # A's stream, cut after a few frames (the run goes on: on_disconnect is `continue`).
    url = f"{replicas.base_a}/langgraph/threads/{tid}/runs/stream"
    with httpx.stream("POST", url, json=body, timeout=30) as answer:
        run_id = answer.headers["Content-Location"].rsplit("/", 1)[1]
        seen = _sse_parts(answer.iter_lines(), 6)
    assert [name for name, _, _ in seen[:2]] == ["metadata", "values"]
    last = seen[-1][2]
    assert last is not None

    # B picks it up from the last id seen on A: exactly the rest, live then to the end.
    rest = _sdk_parts(client_b.runs.join_stream(tid, run_id, stream_mode=MODES, last_event_id=last))
    whole = _sdk_parts(
        client_b.runs.join_stream(tid, run_id, stream_mode=MODES, last_event_id="-1")
    )
    assert seen + rest == whole
    assert len({frame_id for _, _, frame_id in whole}) == len(whole)  # no id twice
    assert whole[-1][0] == "values"
    assert [m["content"] for m in whole[-1][1]["messages"]] == ["go", ANSWER]
    streamed = "".join(
        data[0]["content"] for name, data, _ in whole if name == "messages" and data[0]["content"]
    )
    assert streamed == ANSWER

    # Join, get and list on B read the store (A's run, with the options it was made with).
    joined = client_b.runs.join(tid, run_id)
    assert [m["content"] for m in joined["messages"]] == ["go", ANSWER]
    run = client_b.runs.get(tid, run_id)
    assert run["status"] == "success"
    assert run["metadata"] == {"who": "test"}
    assert run["multitask_strategy"] == "enqueue"
    assert run["kwargs"]["stream_resumable"] is True
    assert [r["run_id"] for r in client_b.runs.list(tid)] == [run_id]
    assert [r["run_id"] for r in client_b.runs.list(tid, status="success")] == [run_id]
    assert client_b.runs.list(tid, status="error") == []


def test_a_background_run_made_on_one_replica_is_streamed_from_the_start_on_another(
    replicas: Replicas,
) -> None:
    client_a, client_b = replicas.client_a, replicas.client_b
    tid = client_a.threads.create()["thread_id"]
    run = client_a.runs.create(
        tid, "slow", input={"messages": [{"type": "human", "content": "hi"}]}
    )
    parts = _sdk_parts(
        client_b.runs.join_stream(tid, run["run_id"], stream_mode=MODES, last_event_id="-1")
    )
    assert parts[0][0] == "metadata"
    assert parts[0][1] == {"run_id": run["run_id"], "attempt": 1}
    assert parts[1][0] == "values"
    assert [m["content"] for m in parts[1][1]["messages"]] == ["hi"]  # the thread as it began
    assert [m["content"] for m in parts[-1][1]["messages"]] == ["hi", ANSWER]
    assert client_b.runs.get(tid, run["run_id"])["status"] == "success"
