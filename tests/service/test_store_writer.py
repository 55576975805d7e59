"""The SQLite store's writer: writes queued together share one transaction (group commit), a
failing write fails alone, and a write that returned is on disk (a killed process keeps it).
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, insert

from parley.service.store import Store, runners
from parley.service.store.tables import threads


@pytest.fixture
def commits() -> Iterator[list[object]]:
    """Every commit of any SQLAlchemy engine while the test runs (the store's are in it)."""
    seen: list[object] = []

    def count(conn: Any) -> None:
        seen.append(conn)

    event.listen(Engine, "commit", count)
    try:
        yield seen
    finally:
        event.remove(Engine, "commit", count)


def _make(thread_id: str) -> Callable[[Connection], str]:
    def work(conn: Connection) -> str:
        now = datetime.now(UTC)
        conn.execute(
            insert(threads).values(
                id=thread_id, user_id="u", agent="a", title="", created_at=now, updated_at=now
            )
        )
        return thread_id

    return work


def _refused(conn: Connection) -> None:
    """A write that fails half-way (what it wrote must be rolled back)."""
    _make("half-done")(conn)
    raise ValueError("this write is refused")


def _stored(path: Path) -> set[str]:
    """The thread ids on disk, read by a connection of the standard library's own."""
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM threads")}


async def _behind_a_gate(store: Store, works: list[Callable[[Connection], Any]]) -> list[Any]:
    """Run `works` queued together: the writer is held by a first write until all are queued."""
    gate = threading.Event()
    held = asyncio.ensure_future(store.transact(lambda conn: gate.wait(10)))
    await asyncio.sleep(0.05)  # the writer took the gate's write and waits in it
    tasks = [asyncio.ensure_future(store.transact(work)) for work in works]
    await asyncio.sleep(0)  # every task queued its write
    gate.set()
    assert await held
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_writes_queued_together_share_one_commit(
    store: Store, sqlite_url: str, commits: list[object]
) -> None:
    before = len(commits)
    made = await _behind_a_gate(store, [_make(f"t{i}") for i in range(40)])

    assert made == [f"t{i}" for i in range(40)]
    # The gate's transaction and one for the forty (one transaction a write: 41).
    assert len(commits) - before == 2
    assert _stored(Path(sqlite_url.split("///", 1)[1])) == {f"t{i}" for i in range(40)}


async def test_a_failing_write_fails_alone_and_leaves_nothing(
    store: Store, sqlite_url: str
) -> None:
    outcomes = await _behind_a_gate(store, [_make("before"), _refused, _make("after")])

    assert outcomes[0] == "before"
    assert isinstance(outcomes[1], ValueError)
    assert outcomes[2] == "after"
    assert _stored(Path(sqlite_url.split("///", 1)[1])) == {"before", "after"}


async def test_every_write_goes_on_the_writers_own_connection(store: Store) -> None:
    # Only the writer writes: on one connection its page cache stays valid between writes,
    # where a pooled one, used by a reader meanwhile, would read the changed pages again.
    def driver_connection(conn: Connection) -> int:
        return id(conn.connection.dbapi_connection)

    writers, readers = set(), set()
    for i in range(6):
        await store.transact(_make(f"t{i}"))
        writers.add(await store.transact(driver_connection))
        readers.add(await store.query(driver_connection))

    def fails(conn: Connection) -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        await store.transact(fails)
    writers.add(await store.transact(driver_connection))  # the same one after a failure
    assert len(writers) == 1
    assert not writers & readers


async def test_migrations_run_alone_beside_queued_writes(store: Store, sqlite_url: str) -> None:
    migrated = asyncio.ensure_future(store.migrate())
    made = await asyncio.gather(*(store.transact(_make(f"t{i}")) for i in range(10)))
    await migrated
    assert made == [f"t{i}" for i in range(10)]
    assert len(_stored(Path(sqlite_url.split("///", 1)[1]))) == 10


_WRITE_THEN_WAIT = textwrap.dedent(
    """
    import asyncio, sys
    from datetime import UTC, datetime
    from sqlalchemy import insert
    from parley.service.store import Store
    from parley.service.store.tables import threads

    def make(thread_id):
        def work(conn):
            now = datetime.now(UTC)
            conn.execute(insert(threads).values(
                id=thread_id, user_id="u", agent="a", title="", created_at=now, updated_at=now))
        return work

    async def main(url):
        store = await Store.open(url)
        await asyncio.gather(*(store.transact(make(f"t{i}")) for i in range(20)))
        print("STORED", flush=True)
        await asyncio.sleep(300)

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_a_write_that_returned_survives_its_process_killed(
    sqlite_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "write_then_wait.py"
    script.write_text(_WRITE_THEN_WAIT)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), sqlite_url, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.strip() == b"STORED"
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()

    assert _stored(Path(sqlite_url.split("///", 1)[1])) == {f"t{i}" for i in range(20)}


# -- brief writes: inline when the writer is idle ------------------------------------------------


def _where(
    threads_seen: list[int], then: Callable[[Connection], Any]
) -> Callable[[Connection], Any]:
    """`then`, noting the thread each attempt at it runs in."""

    def work(conn: Connection) -> Any:
        threads_seen.append(threading.get_ident())
        return then(conn)

    return work


def _driver_connection(conn: Connection) -> int:
    return id(conn.connection.dbapi_connection)


async def test_a_brief_write_on_an_idle_writer_runs_inline_on_the_writers_connection(
    store: Store, sqlite_url: str
) -> None:
    seen: list[int] = []
    assert await store.transact(_where(seen, _make("t0")), brief=True) == "t0"
    assert seen == [threading.get_ident()]  # in the caller's thread: no hop
    assert _stored(Path(sqlite_url.split("///", 1)[1])) == {"t0"}  # committed on return
    inline = await store.transact(_driver_connection, brief=True)
    queued = await store.transact(_driver_connection)
    assert inline == queued  # the writer's one connection, whoever runs it

    def checkpoints(conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())

    # Its commits never checkpoint the WAL (that could stall the event loop on an fsync).
    assert await store.transact(checkpoints, brief=True) == 0


async def test_a_brief_write_waits_its_turn_behind_a_busy_writer(store: Store) -> None:
    gate = threading.Event()
    held = asyncio.ensure_future(store.transact(lambda conn: gate.wait(10)))
    await asyncio.sleep(0.05)  # the writer thread took the gate's write and waits in it
    seen: list[int] = []
    brief = asyncio.ensure_future(store.transact(_where(seen, _make("t0")), brief=True))
    await asyncio.sleep(0.05)
    assert not brief.done()  # it did not pass the write under way
    gate.set()
    assert await held
    assert await brief == "t0"
    assert seen
    assert threading.get_ident() not in seen  # queued to the writer thread


async def test_another_processs_write_lock_sends_a_brief_write_to_the_queue(
    store: Store, sqlite_url: str
) -> None:
    path = Path(sqlite_url.split("///", 1)[1])
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's write lock
        seen: list[int] = []
        loop = asyncio.get_running_loop()
        started = loop.time()
        brief = asyncio.ensure_future(store.transact(_where(seen, _make("t0")), brief=True))
        await asyncio.sleep(0.2)
        # The inline try met the lock and gave up at once (busy timeout 0): the event loop
        # went on (a wait of the store's 10 s busy timeout would have held it all along).
        assert loop.time() - started < 5.0
        assert not brief.done()
        assert seen[0] == threading.get_ident()
        other.execute("COMMIT")
        assert await asyncio.wait_for(brief, 20) == "t0"
        assert seen[-1] != threading.get_ident()  # stored by the writer thread, once
    finally:
        other.close()
    assert _stored(path) == {"t0"}


async def test_the_checkpointer_copies_what_brief_writes_add_to_the_wal(
    store: Store, sqlite_url: str
) -> None:
    wal = Path(sqlite_url.split("///", 1)[1] + "-wal")
    every = runners._CHECKPOINT_EVERY
    for i in range(every):
        await store.transact(_make(f"a{i}"), brief=True)
    first = wal.stat().st_size
    for i in range(every * 6):
        await store.transact(_make(f"b{i}"), brief=True)
    # Checkpointed, the WAL is written again from its start: it does not grow with the
    # writes (six times as many, without checkpoints, would make it about six times longer).
    assert wal.stat().st_size < first * 3
    assert len(_stored(Path(sqlite_url.split("///", 1)[1]))) == every * 7


async def test_writes_go_on_inline_while_a_checkpoint_copies_the_wal_beside_them(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint's copy never holds the writer; only its last pass, of what writes added."""
    path = Path(sqlite_url.split("///", 1)[1])
    gates = [threading.Event(), threading.Event()]
    ran: list[str] = []
    real = runners._Checkpointer.checkpoint

    def held(self: runners._Checkpointer) -> None:  # the real one, its two passes made to last
        ran.append(threading.current_thread().name)
        if len(ran) <= len(gates):
            gates[len(ran) - 1].wait(10)
        real(self)

    async def until(passes: int) -> None:
        for _ in range(500):
            if len(ran) >= passes:
                return
            await asyncio.sleep(0.01)

    monkeypatch.setattr(runners._Checkpointer, "checkpoint", held)
    store = await Store.open(sqlite_url)
    try:
        every = runners._CHECKPOINT_EVERY
        seen: list[int] = []
        for i in range(every):
            await store.transact(_where(seen, _make(f"a{i}")), brief=True)
        await until(1)  # asked for at the last commit: its thread takes it up
        assert ran == ["parley-db-checkpoint"]
        # While its copy lasts, two more checkpoints' worth of writes run inline, on this
        # thread: none waits for it, none is sent to the writer thread.
        for i in range(every * 2):
            await store.transact(_where(seen, _make(f"b{i}")), brief=True)
        assert set(seen) == {threading.get_ident()}
        assert len(seen) == every * 3
        gates[0].set()
        await until(2)
        # Its last pass copies what they added, with this process's writes held: a write now
        # does not run inline, and the writer thread stores it once the pass is done.
        last: list[int] = []
        write = asyncio.ensure_future(store.transact(_where(last, _make("c")), brief=True))
        await asyncio.sleep(0.1)
        assert not write.done()
        assert last == []
        gates[1].set()
        assert await asyncio.wait_for(write, 20) == "c"
        assert len(last) == 1
        assert last[0] != threading.get_ident()
    finally:
        for gate in gates:
            gate.set()
        await store.close()
    # Closed, the store leaves no checkpointer behind, and every write is on disk.
    assert "parley-db-checkpoint" not in {t.name for t in threading.enumerate()}
    assert len(_stored(path)) == every * 3 + 1


async def test_a_brief_write_that_fails_inline_fails_alone_and_leaves_nothing(
    store: Store, sqlite_url: str
) -> None:
    seen: list[int] = []
    with pytest.raises(ValueError, match="refused"):
        await store.transact(_where(seen, _refused), brief=True)
    assert seen == [threading.get_ident()]  # it ran inline, once
    assert await store.transact(_make("after"), brief=True) == "after"
    assert _stored(Path(sqlite_url.split("///", 1)[1])) == {"after"}
