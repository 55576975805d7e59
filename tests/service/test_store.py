"""The store on SQLite, through its own API: schema, messages kept exactly, owners, approvals,
runs, feedback and API keys.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Table, func, select, text

from parley.agents.approval import PendingApproval
from parley.errors import ConflictError, NotFoundError
from parley.messages import ImageBlock, Msg, TextBlock, ThinkingBlock, ToolCallBlock, Usage
from parley.service.store import Store, hash_key
from parley.service.store.tables import api_keys, approvals, feedback, messages, runs, threads


async def _count(store: Store, table: Table, **where: str) -> int:
    query = select(func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    async with store.engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


# -- schema ------------------------------------------------------------------------------------


async def test_migrations_are_idempotent(sqlite_url: str) -> None:
    first = await Store.open(sqlite_url)
    await first.ensure_thread("t", "alice", "helper")
    await first.add_messages("t", "alice", [Msg.user("kept across opens")], None)
    await first.migrate()  # again, on the same engine: nothing to do
    await first.close()

    second = await Store.open(sqlite_url)
    try:
        await second.migrate()
        async with second.engine.connect() as conn:
            versions = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
            tables = {
                row[0]
                for row in await conn.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'table'")
                )
            }
        assert len(versions) == 1
        assert {"threads", "messages", "runs", "approvals", "feedback", "api_keys"} <= tables
        assert [m.text for m, _ in await second.get_messages("t", "alice")] == ["kept across opens"]
    finally:
        await second.close()


async def test_sqlite_runs_in_wal_mode_with_foreign_keys(store: Store) -> None:
    async with store.engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
        assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
        assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() > 0
    await store.ping()


# -- messages ----------------------------------------------------------------------------------


def _conversation() -> list[Msg]:
    call = ToolCallBlock(
        id="call_1", name="lookup", input={"q": "café", "n": [1, 2.5]}, raw_input='{"q":"café"'
    )
    return [
        Msg.system("Be brief."),
        Msg.user(
            "What is in this picture? 🐈",
            ImageBlock.from_url("https://example.com/cat.png"),
            name="alice",
            metadata={"client": {"tags": ["a", "b"], "n": 3, "none": None}},
        ),
        Msg.assistant(
            ThinkingBlock(thinking="Let me look.", signature="sig=="),
            TextBlock(text="Looking it up."),
            call,
            name="helper",
            usage=Usage(input_tokens=12, output_tokens=7),
            metadata={"interrupted": False},
        ),
        Msg.tool_result("call_1", "not found", name="lookup", is_error=True),
        Msg.tool_result(
            "call_2",
            [TextBlock(text="a chart"), ImageBlock.from_url("https://example.com/chart.png")],
            name="plot",
        ),
        Msg.assistant("A cat.\n\nWith  spaces  kept.", name="helper"),
    ]


async def test_messages_round_trip_exactly(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    convo = _conversation()
    await store.add_messages("t", "alice", convo[:2], None)
    await store.add_messages("t", "alice", convo[2:], "run_1")

    rows = await store.get_messages("t", "alice")
    assert [m for m, _ in rows] == convo
    assert [r for _, r in rows] == [None, None, "run_1", "run_1", "run_1", "run_1"]
    for (msg, _), original in zip(rows, convo, strict=True):
        assert msg.model_dump() == original.model_dump()
        assert msg.created_at == original.created_at
        assert msg.created_at.tzinfo is not None


async def test_title_is_the_first_question(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.add_messages("t", "alice", [Msg.system("rules")], None)
    before = await store.get_thread("t", "alice")
    assert before is not None
    assert before.title == ""

    await store.add_messages(
        "t", "alice", [Msg.user("  first\n\nquestion  "), Msg.assistant("a")], None
    )
    await store.add_messages("t", "alice", [Msg.user("second question")], None)
    after = await store.get_thread("t", "alice")
    assert after is not None
    assert after.title == "first question"
    assert after.updated_at > before.updated_at
    assert after.created_at == before.created_at


async def test_no_messages_is_a_no_op(store: Store) -> None:
    thread = await store.ensure_thread("t", "alice", "helper")
    await store.add_messages("t", "alice", [], "run_1")
    assert await store.get_messages("t", "alice") == []
    again = await store.get_thread("t", "alice")
    assert again is not None
    assert again.updated_at == thread.updated_at


async def test_concurrent_writes_all_land_in_order(store: Store) -> None:
    for t in range(5):
        await store.ensure_thread(f"t{t}", "alice", "helper")

    async def write(t: int) -> None:
        for i in range(20):
            await store.add_messages(f"t{t}", "alice", [Msg.user(f"{t}-{i}")], None)

    await asyncio.gather(*(write(t) for t in range(5)))
    for t in range(5):
        assert [m.text for m, _ in await store.get_messages(f"t{t}", "alice")] == [
            f"{t}-{i}" for i in range(20)
        ]


async def test_clear_messages_keeps_the_thread_and_its_runs(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.start_run("run_1", "t", "alice", "helper", "m")
    await store.add_messages("t", "alice", [Msg.user("hi")], "run_1")
    await store.clear_messages("t", "alice")
    assert await store.get_messages("t", "alice") == []
    assert await store.get_thread("t", "alice") is not None
    assert await store.get_run("run_1", "alice") is not None


# -- threads -----------------------------------------------------------------------------------


async def test_ensure_thread_is_the_users_own(store: Store) -> None:
    made = await store.ensure_thread("t", "alice", "helper")
    assert (made.thread_id, made.user_id, made.agent, made.title) == ("t", "alice", "helper", "")
    assert made.created_at.tzinfo is not None
    assert made.status == "idle"

    again = await store.ensure_thread("t", "alice", "other-agent")
    assert again.agent == "helper"  # the thread keeps its agent
    assert again.created_at == made.created_at


async def test_two_users_with_one_thread_id_have_two_threads(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.add_messages("t", "alice", [Msg.user("alice's")], None)
    assert await store.get_thread("t", "bob") is None  # nothing of alice's shows
    assert await store.get_messages("t", "bob") == []
    assert not await store.delete_thread("t", "bob")

    bobs = await store.ensure_thread("t", "bob", "other")
    assert (bobs.user_id, bobs.agent) == ("bob", "other")
    await store.add_messages("t", "bob", [Msg.user("bob's")], None)
    await store.start_run("run_b", "t", "bob", "other", "m")
    assert [m.text for m, _ in await store.get_messages("t", "alice")] == ["alice's"]
    assert [m.text for m, _ in await store.get_messages("t", "bob")] == ["bob's"]
    assert [t.thread_id for t in await store.list_threads("bob")] == ["t"]
    assert (await store.list_threads("bob"))[0].status == "running"
    assert (await store.list_threads("alice"))[0].status == "idle"  # bob's run is not hers

    assert await store.delete_thread("t", "bob")
    assert [m.text for m, _ in await store.get_messages("t", "alice")] == ["alice's"]
    assert await store.get_run("run_b", "bob") is None


async def test_ensure_thread_at_once_makes_one_thread(store: Store) -> None:
    made = await asyncio.gather(*(store.ensure_thread("t", "alice", "helper") for _ in range(10)))
    assert {m.thread_id for m in made} == {"t"}
    assert await _count(store, threads) == 1


async def test_thread_status_follows_its_runs_and_approvals(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.start_run("run_1", "t", "alice", "helper", "m")
    assert (await store.list_threads("alice"))[0].status == "running"
    await store.end_run("run_1", "awaiting_approval", None, None)
    pending = PendingApproval(agent="helper", message_id="m1", calls=[], awaiting=[], iterations=1)
    await store.add_approval(pending, "t", "alice", "run_1")
    thread = await store.get_thread("t", "alice")
    assert thread is not None
    assert thread.status == "awaiting_approval"
    await store.answer_approval(pending.interrupt_id)
    thread = await store.get_thread("t", "alice")
    assert thread is not None
    assert thread.status == "idle"


async def test_an_approval_parked_again_by_a_takeover_is_kept_once(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.start_run("run_1", "t", "alice", "helper", "m")
    pending = PendingApproval(agent="helper", message_id="m1", calls=[], awaiting=[], iterations=1)
    await store.add_approval(pending, "t", "alice", "run_1")
    await store.add_approval(pending, "t", "alice", "run_1")  # the run's second attempt
    assert [p.interrupt_id for p in await store.pending_approvals("t", "alice")] == [
        pending.interrupt_id
    ]


async def test_list_threads_pages_by_cursor(store: Store) -> None:
    for i in range(5):
        await store.ensure_thread(f"t{i}", "alice", "helper")
        await store.add_messages(f"t{i}", "alice", [Msg.user(f"q{i}")], None)
    await store.ensure_thread("other", "bob", "helper")

    everything = await store.list_threads("alice", limit=10)
    assert [t.thread_id for t in everything] == ["t4", "t3", "t2", "t1", "t0"]
    first = await store.list_threads("alice", limit=2)
    last = first[-1]
    rest = await store.list_threads("alice", limit=10, before=(last.updated_at, last.thread_id))
    assert [t.thread_id for t in first + rest] == ["t4", "t3", "t2", "t1", "t0"]
    later = datetime.now(UTC) + timedelta(days=1)
    assert len(await store.list_threads("alice", before=(later, ""))) == 5


async def test_delete_thread_removes_all_it_holds(store: Store) -> None:
    for t in ("doomed", "kept"):
        await store.ensure_thread(t, "alice", "helper")
        await store.start_run(f"run_{t}", t, "alice", "helper", "m")
        await store.add_messages(t, "alice", [Msg.user("hi")], f"run_{t}")
        await store.add_feedback(f"run_{t}", "alice", "stars", 1.0, {})
        pending = PendingApproval(
            agent="helper", message_id="m", calls=[], awaiting=[], iterations=1
        )
        await store.add_approval(pending, t, "alice", f"run_{t}")

    assert await store.delete_thread("doomed", "alice")
    assert not await store.delete_thread("doomed", "alice")
    for table in (messages, runs, approvals):
        assert await _count(store, table, thread_id="doomed") == 0
        assert await _count(store, table, thread_id="kept") == 1
    assert await _count(store, feedback, run_id="run_doomed") == 0
    assert await _count(store, feedback, run_id="run_kept") == 1
    assert await _count(store, threads) == 1


# -- runs --------------------------------------------------------------------------------------


async def test_a_run_is_recorded_from_start_to_end(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.start_run("run_1", "t", "alice", "helper", "scripted")
    record = await store.get_run("run_1", "alice")
    assert record is not None
    assert (record.status, record.model, record.ended_at, record.cancel_requested) == (
        "running",
        "scripted",
        None,
        False,
    )
    assert await store.get_run("run_1", "bob") is None
    assert await store.get_run("run_nope", "alice") is None

    usage = {"input_tokens": 10, "output_tokens": 3, "details": {"cached": 2}}
    await store.end_run("run_1", "error", usage, "the model failed")
    ended = await store.get_run("run_1", "alice")
    assert ended is not None
    assert (ended.status, ended.usage, ended.error) == ("error", usage, "the model failed")
    assert ended.ended_at is not None
    assert ended.ended_at >= ended.started_at
    assert ended.started_at.tzinfo is not None


async def test_cancel_flags_and_stale_runs(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.start_run("run_live", "t", "alice", "helper", "m")
    await store.start_run("run_done", "t", "alice", "helper", "m")
    await store.end_run("run_done", "completed", None, None)

    await store.request_cancel("run_live")
    await store.request_cancel("run_done")  # ended runs are left as they are
    assert await store.cancel_requested(["run_live", "run_done", "run_nope"]) == {"run_live"}
    assert await store.cancel_requested([]) == set()

    assert await store.interrupt_stale_runs("t", "alice") == 1
    assert await store.interrupt_stale_runs("t", "alice") == 0
    stale = await store.get_run("run_live", "alice")
    done = await store.get_run("run_done", "alice")
    assert stale is not None
    assert done is not None
    assert stale.status == "interrupted"
    assert stale.error
    assert stale.ended_at is not None
    assert done.status == "completed"


# -- approvals ---------------------------------------------------------------------------------


def _pending() -> PendingApproval:
    calls = [
        ToolCallBlock(id="call_a", name="delete_file", input={"path": "a"}),
        ToolCallBlock(id="call_b", name="list_files"),
    ]
    return PendingApproval(
        agent="helper", message_id="msg_1", calls=calls, awaiting=["call_a"], iterations=1
    )


async def test_an_approval_is_answered_once(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    pending = _pending()
    await store.add_approval(pending, "t", "alice", "run_1")

    found = await store.get_approval(pending.interrupt_id, "alice")
    assert found == (pending, "t", "pending")
    assert await store.get_approval(pending.interrupt_id, "bob") is None
    assert await store.get_approval("int_nope", "alice") is None
    assert await store.pending_approvals("t", "alice") == [pending]

    await store.answer_approval(pending.interrupt_id)
    with pytest.raises(ConflictError) as caught:
        await store.answer_approval(pending.interrupt_id)
    assert caught.value.status_code == 409
    assert await store.pending_approvals("t", "alice") == []
    answered = await store.get_approval(pending.interrupt_id, "alice")
    assert answered is not None
    assert answered[2] == "answered"


async def test_answers_at_once_only_one_wins(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    pending = _pending()
    await store.add_approval(pending, "t", "alice", "run_1")
    outcomes = await asyncio.gather(
        *(store.answer_approval(pending.interrupt_id) for _ in range(8)), return_exceptions=True
    )
    assert sum(o is None for o in outcomes) == 1
    assert all(isinstance(o, ConflictError) for o in outcomes if o is not None)


async def test_expired_approvals_cannot_be_answered(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.ensure_thread("other", "alice", "helper")
    pending, elsewhere = _pending(), _pending()
    await store.add_approval(pending, "t", "alice", "run_1")
    await store.add_approval(elsewhere, "other", "alice", "run_2")

    await store.expire_approvals("t", "alice")
    assert await store.pending_approvals("t", "alice") == []
    assert await store.pending_approvals("other", "alice") == [elsewhere]  # only that thread's
    with pytest.raises(ConflictError):
        await store.answer_approval(pending.interrupt_id)
    expired = await store.get_approval(pending.interrupt_id, "alice")
    assert expired is not None
    assert expired[2] == "expired"
    with pytest.raises(ConflictError):
        await store.answer_approval("int_unknown")


# -- feedback ----------------------------------------------------------------------------------


async def test_feedback_needs_a_run_of_the_user(store: Store) -> None:
    await store.ensure_thread("t", "alice", "helper")
    await store.start_run("run_1", "t", "alice", "helper", "m")

    with pytest.raises(NotFoundError) as unknown:
        await store.add_feedback("run_nope", "alice", "stars", 1.0, {})
    assert unknown.value.status_code == 404
    with pytest.raises(NotFoundError):
        await store.add_feedback("run_1", "bob", "stars", 1.0, {})
    assert await store.get_feedback("run_1") == []

    await store.add_feedback("run_1", "alice", "stars", 0.8, {"comment": "ok", "n": [1]})
    await store.add_feedback("run_1", "alice", "thumbs", 0.0, {})
    assert await store.get_feedback("run_1") == [
        {"key": "stars", "score": 0.8, "kwargs": {"comment": "ok", "n": [1]}, "user_id": "alice"},
        {"key": "thumbs", "score": 0.0, "kwargs": {}, "user_id": "alice"},
    ]


# -- API keys ----------------------------------------------------------------------------------


async def test_api_keys_are_made_looked_up_listed_and_revoked(store: Store) -> None:
    key_a1, rec_a1 = await store.create_api_key("alice", "laptop")
    key_a2, rec_a2 = await store.create_api_key("alice")
    key_b, rec_b = await store.create_api_key("bob", "ci")
    assert len({key_a1, key_a2, key_b}) == 3
    assert len(key_a1) > 40
    assert rec_a1.key_id in key_a1  # the id is readable in the key, so it can be revoked
    assert (rec_a1.user_id, rec_a1.name, rec_a1.revoked_at) == ("alice", "laptop", None)

    assert await store.user_for_key(key_a1) == "alice"
    assert await store.user_for_key(key_b) == "bob"
    assert await store.user_for_key("pk_nope") is None
    assert await store.user_for_key("") is None

    listed = await store.list_api_keys()
    assert [r.key_id for r in listed] == [rec_a1.key_id, rec_a2.key_id, rec_b.key_id]
    assert [r.key_id for r in await store.list_api_keys("alice")] == [rec_a1.key_id, rec_a2.key_id]
    assert await store.list_api_keys("carol") == []

    assert await store.revoke_api_key(rec_a1.key_id)
    assert not await store.revoke_api_key(rec_a1.key_id)  # once
    assert not await store.revoke_api_key("nope")
    assert await store.user_for_key(key_a1) is None
    assert await store.user_for_key(key_a2) == "alice"
    revoked = {r.key_id: r.revoked_at for r in await store.list_api_keys("alice")}
    assert revoked[rec_a1.key_id] is not None
    assert revoked[rec_a1.key_id].tzinfo is not None
    assert revoked[rec_a2.key_id] is None


async def test_only_the_keys_hash_is_stored(store: Store) -> None:
    key, _ = await store.create_api_key("alice")
    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(api_keys))).mappings().all()
    (row,) = rows
    assert row["key_hash"] == hash_key(key)
    assert all(key not in str(value) for value in row.values())
    # The secret part: after `pk_<key id>_` (it may hold `_` itself: url-safe base64).
    secret = key.split("_", 2)[2]
    assert len(secret) >= 32
    assert secret not in str(dict(row))
