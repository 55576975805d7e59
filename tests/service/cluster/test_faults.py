"""Issue 20 item 6: runs and their streams survive faults, on three replicas behind HAProxy.

The cluster (tests/service/cluster/_cluster.py): three `parley serve` on one PostgreSQL,
Debian's HAProxy in front, replica r1 reaching PostgreSQL through a fault proxy. Each test
puts a fault under running work and then checks what the issue demands of it:

- kill -9 a replica in the middle of runs and streams: its runs finish elsewhere (taken
  over when their lease runs out: `attempt` 2), the readers that followed them there pick up
  through HAProxy with `Last-Event-ID`, and what every reader got is the run's log exactly
  (nothing it was given is lost or given twice); each question is answered once in its thread.
- restart PostgreSQL under load: while it is down requests fail clearly (a 503 with a message,
  parley's or HAProxy's), never hang or break off; then everything is answered again, and no
  run is left `running` or `pending`.
- between r1 and PostgreSQL, a proxy that delays, cuts and black-holes connections: r1's runs
  end (there or elsewhere), none is stuck, none answered twice.

The LangGraph SDK test drives the same kill through `langgraph-sdk`'s own reconnection
(`/langgraph`, its `Location` header and `Last-Event-ID`).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests._requires import require_module
from tests.service.cluster._cluster import Cluster, Replica
from tests.service.cluster._load import InvokeLoad, is_clear_failure
from tests.service.cluster._runs import Reader, create_run, join, replay, thread_messages

# A long question: the agent answers `turn 1: <question>`, two characters a chunk, 0.1 s
# apart, so a run lasts ~6 s: time for the fault to land in its middle.
_LONG = "x" * 100
_SETTLE = 60.0  # bounded wait for the cluster to finish what was in flight


def _question(tag: str, n: int) -> str:
    return f"{tag}-{n}-{_LONG}"


def _texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], "".join(p.get("text", "") for p in m.get("content", []))) for m in messages]


def _answered_once(url: str, run: dict[str, Any], question: str) -> None:
    """The thread holds the question once and its answer once (no repeat after a takeover)."""
    texts = _texts(thread_messages(url, run["thread_id"]))
    assert texts.count(("user", question)) == 1, texts
    assert texts.count(("assistant", f"turn 1: {question}")) == 1, texts


def _wait_running(url: str, run_ids: list[str], timeout: float = 30.0) -> None:
    """Wait until every run is `running` (claimed, streaming)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [httpx.get(f"{url}/runs/{r}", timeout=10).json()["status"] for r in run_ids]
        if all(s == "running" for s in states):
            return
        time.sleep(0.1)
    raise TimeoutError(f"runs not all running in {timeout:g}s: {states}")


def _runs_held_by(
    cluster: Cluster, replica: Replica, tag: str, count: int, *, rounds: int = 3
) -> tuple[list[dict[str, Any]], list[str]]:
    """`count` runs made on `replica` and running there, and their questions.

    The replica that makes a run claims it at once when it has room, but another replica's
    worker that polls the queue in between may take it first (any worker may run a queued
    run). Such a run is left to end where it runs, and another is made in its place.
    """
    assert replica.process is not None
    mark = f":{replica.process.pid}:"  # a worker's id is host:pid:suffix
    held: list[tuple[dict[str, Any], str]] = []
    made_so_far = 0
    for _ in range(rounds):
        asked = [_question(tag, made_so_far + n) for n in range(count - len(held))]
        made_so_far += len(asked)
        made = [(create_run(replica.url, question), question) for question in asked]
        ids = [run["run_id"] for run, _ in made]
        _wait_running(cluster.url, ids)
        rows = cluster.postgres.query(
            "SELECT id, worker_id FROM runs WHERE id = ANY($1::text[])", ids
        )
        workers = {row["id"]: row["worker_id"] or "" for row in rows}
        held += [(run, q) for run, q in made if mark in workers[run["run_id"]]]
        if len(held) == count:
            return [run for run, _ in held], [q for _, q in held]
    raise AssertionError(f"{replica.name} kept {len(held)} of its runs in {rounds} rounds")


def _no_run_stuck(cluster: Cluster) -> None:
    """Within a bounded wait, no run is `running` or `pending` (leases lapse, takeovers end)."""
    deadline = time.monotonic() + _SETTLE
    while time.monotonic() < deadline:
        statuses = cluster.postgres.run_statuses()
        if not statuses.get("running") and not statuses.get("pending"):
            return
        time.sleep(0.5)
    raise AssertionError(f"runs stuck after the fault: {cluster.postgres.run_statuses()}")


def test_kill_9_a_replica_mid_run_its_runs_finish_elsewhere_and_readers_reattach(
    healthy_cluster: Cluster,
) -> None:
    cluster = healthy_cluster
    victim = cluster.replica("r2")
    # Made on r2 itself, and running there.
    runs, questions = _runs_held_by(cluster, victim, "kill", 4)
    ids = [r["run_id"] for r in runs]
    # Each run has a reader on r2 and one that came through HAProxy, both from the start.
    readers = [Reader(i, victim.url, cluster.url).start() for i in ids]
    readers += [Reader(i, cluster.url, cluster.url).start() for i in ids]
    deadline = time.monotonic() + 30
    while not all(r.frames for r in readers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(r.frames for r in readers), "a reader got nothing before the kill"

    victim.kill()

    ended = [join(cluster.url, i) for i in ids]
    for reader in readers:
        reader.wait()
    assert [r["status"] for r in ended] == ["completed"] * len(ids), ended
    # Taken over by another replica after the lease ran out: a second attempt.
    assert all(r["attempt"] >= 2 for r in ended), [r["attempt"] for r in ended]
    for reader in readers:
        assert reader.done, (reader.run_id, reader.errors)
        log = replay(cluster.url, reader.run_id)
        # Exactly the run's log: what a reader was given before the kill is neither lost
        # nor repeated after it re-attached.
        assert reader.frames == log, (reader.run_id, reader.errors)
        assert len({f.id for f in reader.frames}) == len(reader.frames)
    assert all(r.connections >= 2 for r in readers[: len(ids)]), "r2's readers re-attached"
    for run, question in zip(runs, questions, strict=True):
        _answered_once(cluster.url, run, question)
    _no_run_stuck(cluster)


def test_kill_9_a_replica_under_the_langgraph_sdk_its_streams_resume(
    healthy_cluster: Cluster,
) -> None:
    require_module("langgraph_sdk", "dev")
    from langgraph_sdk import get_client  # noqa: PLC0415 - after the requirement check

    cluster = healthy_cluster
    victim = cluster.replica("r3")
    readers_per_run = 3  # leastconn spreads them: some are on r3 when it dies

    async def scenario() -> list[tuple[str, list[Any]]]:
        # Runs made on r3 (it claims them); their streams followed through HAProxy, where
        # the SDK re-attaches by itself (the stream's `Location`, `Last-Event-ID`).
        async with (
            get_client(url=f"{victim.url}/langgraph") as on_victim,
            get_client(url=f"{cluster.url}/langgraph") as client,
        ):
            return await runs_through_a_kill(on_victim, client)

    async def runs_through_a_kill(on_victim: Any, client: Any) -> list[tuple[str, list[Any]]]:
        made = []
        for n in range(2):
            thread = await client.threads.create()
            question = _question("sdk", n)
            run = await on_victim.runs.create(
                thread["thread_id"],
                "slow",  # the replicas serve `_agents:slow` under that name
                input={"messages": [{"role": "user", "content": question}]},
                stream_mode=["values", "messages-tuple"],
                stream_resumable=True,
            )
            made.append((thread["thread_id"], run["run_id"], question))
        started = asyncio.Event()
        waiting = [readers_per_run * len(made)]

        async def follow(thread_id: str, run_id: str) -> list[Any]:
            parts = []
            async for part in client.runs.join_stream(thread_id, run_id, last_event_id="-1"):
                parts.append(part)
                if len(parts) == 3:
                    waiting[0] -= 1
                    if not waiting[0]:
                        started.set()
            return parts

        async def kill() -> None:
            await asyncio.wait_for(started.wait(), 30)
            await asyncio.to_thread(victim.kill)

        followers = [follow(t, r) for t, r, _ in made for _ in range(readers_per_run)]
        *streams, _ = await asyncio.gather(*followers, kill())
        out = []
        for index, (thread_id, run_id, question) in enumerate(made):
            joined = await client.runs.join(thread_id, run_id)
            done = await client.runs.get(thread_id, run_id)
            assert done["status"] == "success", done
            log = [p async for p in client.runs.join_stream(thread_id, run_id, last_event_id="-1")]
            mine = streams[index * readers_per_run : (index + 1) * readers_per_run]
            # Each reader got the run's whole stream, exactly once, across the kill.
            assert all(parts == log for parts in mine), question
            out.append((question, joined["messages"]))
        return out

    for question, messages in asyncio.run(scenario()):
        answers = [m["content"] for m in messages if m["type"] == "ai"]
        assert answers == [f"turn 1: {question}"]
    _no_run_stuck(cluster)


def test_a_postgresql_restart_under_load_fails_clearly_then_everything_resumes(
    healthy_cluster: Cluster,
) -> None:
    cluster = healthy_cluster
    load = InvokeLoad(cluster.url, clients=3, timeout=30).start()
    try:
        load.wait_answers(6)
        cluster.postgres.stop()
        for name in ("r1", "r2", "r3"):  # /health answers 503 without its database
            cluster.wait_state(name, "DOWN")
        cluster.postgres.start()
        cluster.wait_all_up()
        load.wait_answers(9)
    finally:
        outcomes = load.stop()
    # Every request either got its answer or a clear 503: none hung (the client's 30 s
    # timeout), broke off, or got a 500 -- those in flight when the database went away too.
    unclear = [o for o in outcomes if not o.answered and not is_clear_failure(o)]
    assert not unclear, unclear
    assert any(not o.answered for o in outcomes), "no request met the outage"
    assert all(o.answered for o in outcomes[-6:]), outcomes[-6:]
    _no_run_stuck(cluster)


def test_background_runs_outlive_a_postgresql_restart(healthy_cluster: Cluster) -> None:
    cluster = healthy_cluster
    questions = [_question("pg", n) for n in range(3)]
    runs = [create_run(cluster.url, q) for q in questions]
    _wait_running(cluster.url, [r["run_id"] for r in runs])
    cluster.postgres.restart()
    ended = [join(cluster.url, r["run_id"]) for r in runs]
    assert [r["status"] for r in ended] == ["completed"] * 3, ended
    for run, question in zip(runs, questions, strict=True):
        _answered_once(cluster.url, run, question)
    _no_run_stuck(cluster)


def _proxy_fault(
    cluster: Cluster, mode: str, *, delay_ms: int = 0, hold: float = 0.0
) -> list[dict[str, Any]]:
    """Runs made on r1, then r1's link to PostgreSQL misbehaves; the runs as they ended.

    With `hold`, the link passes again after `hold` seconds, before the runs are joined;
    without, they are joined (through HAProxy) while it still misbehaves.
    """
    assert cluster.proxy is not None
    runs, questions = _runs_held_by(cluster, cluster.replica("r1"), mode, 3)
    cluster.proxy.set_mode(mode, delay_ms)  # type: ignore[arg-type]
    # Meanwhile requests through HAProxy are answered, or fail clearly.
    with ThreadPoolExecutor(max_workers=3) as pool:
        asked = list(
            pool.map(
                lambda n: httpx.post(
                    f"{cluster.url}/invoke", json={"message": f"{mode} meanwhile {n}"}, timeout=30
                ),
                range(3),
            )
        )
    assert all(a.status_code in (200, 503) for a in asked), [a.text for a in asked]
    if hold:
        time.sleep(hold)
        cluster.proxy.set_mode("pass")
    ended = [join(cluster.url, r["run_id"]) for r in runs]
    cluster.proxy.set_mode("pass")
    assert [r["status"] for r in ended] == ["completed"] * 3, ended
    for run, question in zip(runs, questions, strict=True):
        _answered_once(cluster.url, run, question)
    cluster.wait_state("r1", "UP")
    _no_run_stuck(cluster)
    return ended


def test_a_slow_link_to_postgresql_slows_runs_but_loses_nothing(
    healthy_cluster: Cluster,
) -> None:
    _proxy_fault(healthy_cluster, "delay", delay_ms=200)


def test_cut_connections_to_postgresql_lose_no_run(healthy_cluster: Cluster) -> None:
    _proxy_fault(healthy_cluster, "cut", hold=3.0)


def test_a_black_holed_link_to_postgresql_hands_the_runs_to_other_replicas(
    healthy_cluster: Cluster,
) -> None:
    # r1 cannot reach its database, nor learn that it cannot: HAProxy takes it out (its
    # /health does not answer), its leases lapse and the other replicas take its runs over
    # and end them while r1 is still cut off.
    ended = _proxy_fault(healthy_cluster, "blackhole")
    assert all(r["attempt"] >= 2 for r in ended), ended
