"""The embedding base: batching, bounded concurrency, per-batch retry, order, caches.

The model under test is a custom provider written as seed 003 says one is (`_call_api` for one
batch); its vectors encode which input they came from, so order and merging are checkable.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from parley.embeddings import (
    BatchLimits,
    DataBlock,
    Embedding,
    EmbeddingBatch,
    EmbeddingCache,
    EmbeddingModel,
    EmbeddingParameters,
    FileEmbeddingCache,
    SQLiteEmbeddingCache,
)
from parley.errors import ModelHTTPError, ModelOutputError, UserError
from parley.messages import ImageBlock, TextBlock, VideoBlock


def _vector(text: str) -> Embedding:
    return [float(len(text)), float(sum(map(ord, text)) % 1000)]


class Recorder(EmbeddingModel[str]):
    """Embeds each text as (length, checksum); records batches and the most in flight."""

    provider = "recorder"
    batch_size = 3

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(model="recorder-1", **kwargs)
        self.batches_sent: list[list[str]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.failures: dict[str, list[BaseException]] = {}

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        self.batches_sent.append(list(batch))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # lets other batches start: overlap is observable
            planned = self.failures.get(batch[0])
            if planned:
                raise planned.pop(0)
            return EmbeddingBatch([_vector(t) for t in batch], tokens=len(batch))
        finally:
            self.in_flight -= 1


class MemoryCache(EmbeddingCache):
    """A whole-request cache in a dict (a custom backend, as the seed invites)."""

    def __init__(self) -> None:
        self.entries: dict[str, list[Embedding]] = {}

    async def store(
        self,
        embeddings: Sequence[Embedding],
        identifier: Mapping[str, Any],
        overwrite: bool = False,
    ) -> None:
        key = self.key(identifier)
        if overwrite or key not in self.entries:
            self.entries[key] = list(embeddings)

    async def retrieve(self, identifier: Mapping[str, Any]) -> list[Embedding] | None:
        return self.entries.get(self.key(identifier))

    async def remove(self, identifier: Mapping[str, Any]) -> None:
        self.entries.pop(self.key(identifier), None)

    async def clear(self) -> None:
        self.entries.clear()


class ItemCache(MemoryCache):
    per_item = True


TEXTS = [f"text number {i}" + "!" * i for i in range(10)]


async def test_batches_of_the_models_size_merged_in_input_order() -> None:
    model = Recorder()
    response = await model(TEXTS)
    assert response.embeddings == [_vector(t) for t in TEXTS]
    assert sorted(len(b) for b in model.batches_sent) == [1, 3, 3, 3]
    assert sorted(t for b in model.batches_sent for t in b) == sorted(TEXTS)
    assert response.source == "api"
    assert response.usage is not None
    assert response.usage.tokens == 10
    assert response.usage.time > 0
    assert response.type == "embedding"


async def test_batches_run_concurrently_within_the_bound() -> None:
    model = Recorder(max_concurrency=2)
    await model(TEXTS)
    assert model.most_in_flight == 2
    unbounded = Recorder(max_concurrency=8)
    await unbounded(TEXTS)
    assert unbounded.most_in_flight == 4  # every batch at once


async def test_a_failing_batch_is_retried_alone() -> None:
    model = Recorder(retry_delay=0.001)
    model.failures[TEXTS[3]] = [ModelHTTPError(429, "slow down", retry_after=0.0)]
    response = await model(TEXTS)
    assert response.embeddings == [_vector(t) for t in TEXTS]
    sent = [b[0] for b in model.batches_sent]
    assert sent.count(TEXTS[3]) == 2  # the failed batch, twice
    assert all(sent.count(first) == 1 for first in (TEXTS[0], TEXTS[6], TEXTS[9]))


async def test_a_batch_that_keeps_failing_fails_the_call() -> None:
    model = Recorder(max_retries=1, retry_delay=0.001)
    model.failures[TEXTS[0]] = [ModelHTTPError(503, "down"), ModelHTTPError(503, "down")]
    with pytest.raises(ModelHTTPError) as caught:
        await model(TEXTS)
    assert caught.value.status_code == 503


async def test_a_bad_request_is_not_retried_and_stops_the_other_batches() -> None:
    model = Recorder(retry_delay=0.001, max_concurrency=1)
    model.failures[TEXTS[0]] = [ModelHTTPError(400, "bad")]
    with pytest.raises(ModelHTTPError):
        await model(TEXTS)
    assert model.batches_sent == [TEXTS[:3]]


async def test_a_provider_returning_the_wrong_count_is_an_error() -> None:
    class Short(Recorder):
        async def _call_api(
            self, batch: list[str], parameters: EmbeddingParameters
        ) -> EmbeddingBatch:
            return EmbeddingBatch([[1.0]] * (len(batch) - 1))

    with pytest.raises(ModelOutputError, match="2 vectors for 3 inputs"):
        await Short(max_retries=0)(TEXTS[:3])


async def test_bad_inputs_are_refused_with_what_is_wrong() -> None:
    model = Recorder()
    with pytest.raises(UserError, match="not a single one"):
        await model("one text")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="text only; input 1 is a image block"):
        await model(["a", ImageBlock.from_url("https://example.com/a.png")])  # type: ignore[list-item]
    with pytest.raises(UserError, match="input 0 is a int"):
        await model([3])  # type: ignore[list-item]
    with pytest.raises(UserError, match="unknown parameter 'dimension'"):
        await model(["a"], dimension=3)
    assert (await model([])).embeddings == []
    assert model.batches_sent == []


async def test_a_whole_request_cache_answers_a_repeated_request() -> None:
    cache = MemoryCache()
    model = Recorder(embedding_cache=cache)
    first = await model(TEXTS)
    sent = len(model.batches_sent)
    second = await model(TEXTS)
    assert second.source == "cache"
    assert second.embeddings == first.embeddings
    assert len(model.batches_sent) == sent
    await model(TEXTS, dimensions=2)  # other parameters: another request
    assert len(model.batches_sent) == 2 * sent


async def test_a_per_item_cache_sends_only_the_misses_once_each() -> None:
    cache = ItemCache()
    model = Recorder(embedding_cache=cache)
    await model(TEXTS[:4])
    model.batches_sent.clear()
    mixed = [TEXTS[1], "new", TEXTS[3], "new", "newer"]
    response = await model(mixed)
    assert response.embeddings == [_vector(t) for t in mixed]
    assert response.source == "api"
    assert sorted(t for b in model.batches_sent for t in b) == ["new", "newer"]
    again = await model(mixed)
    assert again.source == "cache"
    assert again.embeddings == response.embeddings


class Vision(Recorder):
    accepts_media = True
    batch_limits = BatchLimits(elements=4, images=2, videos=1)

    async def _call_api(
        self,
        batch: list[DataBlock | str],
        parameters: EmbeddingParameters,  # type: ignore[override]
    ) -> EmbeddingBatch:
        self.batches_sent.append([b if isinstance(b, str) else b.type for b in batch])  # type: ignore[misc]
        return EmbeddingBatch([[float(i)] for i in range(len(batch))])


async def test_multimodal_inputs_are_packed_within_the_per_request_limits() -> None:
    image = ImageBlock.from_url("https://example.com/a.png")
    video = VideoBlock.from_url("https://example.com/a.mp4")
    inputs: list[Any] = [image, "t", image, image, video, video, TextBlock(text="x"), "y", "z"]
    model = Vision()
    response = await model(inputs)
    assert len(response.embeddings) == len(inputs)
    assert model.batches_sent == [
        ["image", "t", "image"],
        ["image", "video"],
        ["video", "text", "y", "z"],
    ]


def test_dimensions_outside_the_cards_choices_are_refused(tmp_path: Any) -> None:
    (tmp_path / "recorder-1.yaml").write_text(
        "name: recorder-1\nparameter_overrides:\n  dimensions: {enum: [64, 128], default: 128}\n"
    )

    class Carded(Recorder):
        cards_location = tmp_path

    model = Carded()
    assert model.dimensions == 128
    card = model.card()
    assert card is not None
    assert card.output_types == ["application/x-embedding"]
    assert card.type == "embedding_model"
    with pytest.raises(UserError, match="64, 128 dimensions, not 100"):
        Carded(parameters={"dimensions": 100})
    assert Carded(parameters={"dimensions": 64}).dimensions == 64


def test_the_sync_twin() -> None:
    assert Recorder().call_sync(["ab"]).embeddings == [_vector("ab")]


def test_dimensions_outside_the_cards_bounds_are_refused(tmp_path: Any) -> None:
    (tmp_path / "recorder-1.yaml").write_text(
        "name: recorder-1\nparameter_overrides:\n  dimensions: {minimum: 32, maximum: 1024}\n"
    )

    class Bounded(Recorder):
        cards_location = tmp_path

    card = Bounded().card()
    assert card is not None
    assert card.dimension_range() == (32, 1024)
    assert card.dimension_choices() == []
    assert Bounded(parameters={"dimensions": 32}).dimensions == 32
    with pytest.raises(UserError, match="32 to 1024 dimensions, not 2000"):
        Bounded(parameters={"dimensions": 2000})
    (tmp_path / "low").mkdir()
    (tmp_path / "low" / "recorder-1.yaml").write_text(
        "name: recorder-1\nparameter_overrides:\n  dimensions: {minimum: 32}\n"
    )

    class AtLeast(Recorder):
        cards_location = tmp_path / "low"

    with pytest.raises(UserError, match="at least 32 dimensions, not 16"):
        AtLeast(parameters={"dimensions": 16})


async def test_every_response_has_its_own_id_and_time_of_creation() -> None:
    model = Recorder(embedding_cache=MemoryCache())
    before = datetime.now(UTC)
    first, cached, empty = await model(["a"]), await model(["a"]), await model([])
    assert cached.source == "cache"
    ids = {first.id, cached.id, empty.id}
    assert len(ids) == 3
    assert all(ids)
    for response in (first, cached, empty):
        created = datetime.fromisoformat(response.created_at)
        assert created.tzinfo is not None
        assert before <= created <= datetime.now(UTC)
    assert cached.usage is not None
    assert cached.usage.tokens == 0  # nothing was sent


async def test_retry_delay_is_the_first_wait(caplog: pytest.LogCaptureFixture) -> None:
    model = Recorder(retry_delay=0.04)
    model.failures[TEXTS[0]] = [ModelHTTPError(503, "down"), ModelHTTPError(503, "down")]
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        await model(TEXTS[:1])
    waits = [float(w) for w in re.findall(r"retry \d of 3 in ([\d.]+)s", caplog.text)]
    assert len(waits) == 2
    # Full jitter over [delay/2, delay], the ceiling doubling at each try.
    assert 0.02 <= waits[0] <= 0.04
    assert 0.04 <= waits[1] <= 0.08


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_retries": -1}, "max_retries must be 0 or more, got -1"),
        ({"retry_delay": -0.5}, "retry_delay must be 0 or more seconds"),
        ({"timeout": 0}, "timeout must be more than 0 seconds"),
        ({"context_size": 0}, "context_size must be at least 1 token"),
        ({"max_concurrency": 0}, "max_concurrency must be at least 1"),
    ],
)
def test_settings_that_cannot_work_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        Recorder(**settings)


def test_limits_that_cannot_work_are_refused() -> None:
    with pytest.raises(UserError, match="at least 1 element, not 0"):
        BatchLimits(elements=0)
    with pytest.raises(UserError, match="videos limit must be 0 or more, not -1"):
        BatchLimits(elements=3, videos=-1)


class Answering(Recorder):
    """Answers every batch with what `answer` makes of it."""

    def __init__(self, answer: Any, **kwargs: Any) -> None:
        super().__init__(max_retries=0, **kwargs)
        self.answer = answer

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        return EmbeddingBatch(self.answer(batch))


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda b: [[1.0] * (i + 1) for i in range(len(b))], r"different sizes: \[1, 2, 3\]"),
        (lambda b: [[] for _ in b], "empty vectors"),
        (lambda b: [1.0 for _ in b], "items that are not vectors"),
        (
            lambda b: [[1.0] * (3 if b[0] == TEXTS[6] else 2) for _ in b],
            r"different sizes: \[2, 3\]",
        ),
    ],
    ids=["in-a-batch", "empty", "numbers", "across-batches"],
)
async def test_vectors_that_are_not_one_size_are_an_output_error(answer: Any, message: str) -> None:
    with pytest.raises(ModelOutputError, match=message):
        await Answering(answer)(TEXTS)


async def test_vectors_of_another_size_than_asked_are_an_output_error() -> None:
    # As from a server that ignores `dimensions`: not passed on to an index of another size.
    model = Answering(lambda b: [[0.5] * 7 for _ in b])
    with pytest.raises(ModelOutputError, match="7 dimensions; 3 were asked"):
        await model(["a"], dimensions=3)
    assert (await model(["a"], dimensions=7)).embeddings == [[0.5] * 7]


async def test_a_cached_entry_of_another_length_is_computed_again() -> None:
    cache = MemoryCache()
    model = Recorder(embedding_cache=cache)
    identifier = model.cache_identifier(TEXTS[:2], model.parameters)
    await cache.store([[9.0, 9.0]], identifier)  # one vector for two inputs
    response = await model(TEXTS[:2])
    assert response.source == "api"
    assert response.embeddings == [_vector(t) for t in TEXTS[:2]]
    assert await cache.retrieve(identifier) == response.embeddings  # the bad entry replaced


async def test_a_huge_call_keeps_input_order_within_the_bound() -> None:
    class Quick(Recorder):
        batch_size = 7

        async def _call_api(
            self, batch: list[str], parameters: EmbeddingParameters
        ) -> EmbeddingBatch:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await asyncio.sleep(0)
            self.in_flight -= 1
            return EmbeddingBatch([[float(t[1:]), 1.0] for t in batch], tokens=len(batch))

    texts = [f"t{i}" for i in range(30_000)]
    model = Quick(max_concurrency=5)
    response = await model(texts)
    assert [v[0] for v in response.embeddings] == list(range(30_000))
    assert response.usage is not None
    assert response.usage.tokens == 30_000
    assert model.most_in_flight == 5


@pytest.mark.parametrize("per_item", [False, True])
async def test_a_cache_that_cannot_write_keeps_the_answer(
    per_item: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The folder (or the database's) turns into a file after the cache is made: every write
    # fails with the OSError a full or read-only disk would give.
    where = tmp_path / "cache"
    cache = SQLiteEmbeddingCache(where / "items.db") if per_item else FileEmbeddingCache(where)
    where.write_text("in the way")
    model = Recorder(embedding_cache=cache)
    with caplog.at_level(logging.WARNING, logger="parley.embeddings.base"):
        response = await model(TEXTS)
    assert response.embeddings == [_vector(t) for t in TEXTS]
    assert response.source == "api"
    assert "could not store vectors" in caplog.text
    assert where.read_text() == "in the way"  # nothing of the user's replaced
