"""`EmbeddingModel`: the base every provider's embedding model builds on.

A provider implements one method, `_call_api(batch, parameters)`, which embeds one batch in
one request. The base does the rest once for all (seed 003):

- inputs are checked, then split into batches: `batch_size` inputs each, or, for multimodal
  models, packed greedily within the per-request limits of `batch_limits` (elements, images,
  videos);
- batches are sent concurrently, at most `max_concurrency` at a time; each is retried on its
  own under the model layer's retry policy (`parley.models.retry`), so one rate-limited batch
  does not send the others again; the first batch that fails for good cancels the rest;
- results are merged in input order into one `EmbeddingResponse`, with the tokens counted and
  the time taken;
- an `embedding_cache` answers whole requests it has seen (`source="cache"`); a per-item cache
  (`EmbeddingCache.per_item`) answers the inputs it holds and only the others are sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from parley import tracing
from parley._sync import run_sync
from parley.embeddings.cache import EmbeddingCache
from parley.embeddings.vectors import DataBlock, Embedding, EmbeddingInput
from parley.errors import ModelOutputError, UserError
from parley.messages import ImageBlock, VideoBlock, new_id
from parley.models._provider import adopt_provider_class, check_credential, check_parameters
from parley.models.cards import EmbeddingModelCard, load_cards
from parley.models.credentials import Credential
from parley.models.parameters import ParametersBase
from parley.models.retry import DEFAULT_RETRYABLE, Retryable, RetryPolicy, call_with_retries

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


__all__ = [
    "BatchLimits",
    "DataBlock",
    "Embedding",
    "EmbeddingBatch",
    "EmbeddingInput",
    "EmbeddingModel",
    "EmbeddingParameters",
    "EmbeddingResponse",
    "EmbeddingUsage",
]

InputT = TypeVar("InputT", bound=EmbeddingInput)

logger = logging.getLogger(__name__)

_R = TypeVar("_R")

_CACHE_FAULTS = (OSError, sqlite3.Error)
"""What a cache's disk can raise: a call goes on without the cache (see `_cache_write`)."""


class EmbeddingParameters(ParametersBase):
    """Parameters every embedding API takes; providers subclass it to add their own."""

    dimensions: int | None = Field(
        default=None,
        ge=1,
        description="The size of the output vectors; the model's default if unset.",
    )


class EmbeddingUsage(BaseModel):
    """What a call consumed: tokens (when the provider counts them) and seconds taken."""

    model_config = ConfigDict(extra="forbid")

    tokens: int | None = None
    time: float = 0.0


class EmbeddingResponse(BaseModel):
    """The vectors for a call's inputs, in input order."""

    model_config = ConfigDict(extra="forbid")

    embeddings: list[Embedding]
    usage: EmbeddingUsage | None = None
    source: Literal["api", "cache"] = "api"
    """`cache` when no input needed the provider; `api` when at least one did."""
    id: str = Field(default_factory=new_id)
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())
    type: Literal["embedding"] = "embedding"

    def array(self) -> npt.NDArray[np.float32]:
        """The vectors as one `(inputs, dimensions)` float32 array (needs numpy)."""
        import numpy as np  # noqa: PLC0415  (numpy comes with the embeddings extra)

        return np.asarray(self.embeddings, dtype=np.float32)


@dataclass
class EmbeddingBatch:
    """What a provider's `_call_api` returns for one batch.

    Args:
        embeddings: One vector per input of the batch, in its order (lists of floats, or a
            2-D array); passed on as they are, not checked number by number.
        tokens: The tokens the provider counted, when it says.
    """

    embeddings: Sequence[Sequence[float]] | Any
    tokens: int | None = None


@dataclass(frozen=True)
class BatchLimits:
    """A multimodal model's per-request limits (e.g. 20 elements, 5 images, 1 video).

    Raises:
        UserError: No element allowed, or a negative media limit.
    """

    elements: int
    images: int | None = None
    videos: int | None = None

    def __post_init__(self) -> None:
        if self.elements < 1:
            raise UserError(f"a request must take at least 1 element, not {self.elements}")
        for kind, limit in (("images", self.images), ("videos", self.videos)):
            if limit is not None and limit < 0:
                raise UserError(f"a request's {kind} limit must be 0 or more, not {limit}")


@functools.lru_cache(maxsize=64)
def _cards(location: str | Path, parameters: type[EmbeddingParameters]) -> tuple[Any, ...]:
    # Read once per process: building a model looks its card up.
    return tuple(load_cards(location, parameters.model_json_schema(), EmbeddingModelCard))


@contextlib.asynccontextmanager
async def _cache_write(cache: EmbeddingCache) -> AsyncIterator[None]:
    """Keep the call's vectors when the cache cannot keep them.

    The provider has answered (and may have billed) by then: a full disk or a locked file
    costs the next call a cache hit, not this call its answer.
    """
    try:
        yield
    except _CACHE_FAULTS as exc:
        logger.warning("the embedding cache %r could not store vectors: %s", cache, exc)


async def _cache_read(cache: EmbeddingCache, read: Awaitable[_R], missed: _R) -> _R:
    """What `read` finds, or `missed` (a miss, logged) when the cache cannot be read."""
    try:
        return await read
    except _CACHE_FAULTS as exc:
        logger.warning("the embedding cache %r could not be read: %s", cache, exc)
        return missed


def _canonical(item: EmbeddingInput) -> Any:
    """An input as the cache's identifier holds it."""
    return item if isinstance(item, str) else item.model_dump(mode="json", exclude_none=True)


class EmbeddingModel(Generic[InputT]):
    """An embedding model: call it with a list of inputs, get one vector per input.

    Args:
        credential: The provider's credential; None builds the default one (environment).
        model: The model's name at the provider.
        parameters: The provider's `Parameters` (or a dict), e.g. `{"dimensions": 256}`.
        embedding_cache: Reuses vectors computed before (see `parley.embeddings.cache`).
        context_size: The most tokens one input may have; from the model card when not given.
        max_retries: Tries after the first, per batch, on retryable failures.
        retry_delay: Seconds before the first retry (the wait then grows, with jitter; a
            provider's `Retry-After` wins).
        max_concurrency: Batches in flight at once.
        timeout: Seconds to wait for the provider to answer one batch.
    """

    provider: ClassVar[str] = "base"
    parameters_class: ClassVar[type[EmbeddingParameters]] = EmbeddingParameters
    credential_class: ClassVar[type[Credential] | None] = None
    cards_location: ClassVar[str | Path | None] = None
    """A package whose `_models/` folder holds the cards, or a folder."""
    batch_size: ClassVar[int] = 2048
    """The most inputs one request may carry."""
    # The next two may differ between the models one class serves (DashScope's text and
    # multimodal models): a class sets its default, an instance may set its own.
    batch_limits: BatchLimits | None = None
    """Per-request limits by content, for multimodal models (packs batches instead of
    `batch_size`)."""
    accepts_media: bool = False
    """Whether inputs may be blocks (multimodal) rather than only strings."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        adopt_provider_class(cls, EmbeddingParameters)

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: EmbeddingParameters | Mapping[str, Any] | None = None,
        embedding_cache: EmbeddingCache | None = None,
        context_size: int | None = None,
        max_retries: int = 3,
        retry_delay: float = 0.5,
        *,
        max_concurrency: int = 4,
        timeout: float = 60.0,
    ) -> None:
        if not model:
            raise UserError(f"{type(self).__name__} needs a model name")
        _check_settings(
            context_size=context_size,
            max_retries=max_retries,
            retry_delay=retry_delay,
            max_concurrency=max_concurrency,
            timeout=timeout,
        )
        self.credential = self._check_credential(credential)
        self.model = model
        self.parameters = self._check_parameters(parameters)
        self.embedding_cache = embedding_cache
        self.retry = RetryPolicy(max_retries=max_retries, initial_delay=retry_delay)
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self._for_model()
        card = self.card()
        self.context_size = context_size or (card.context_size if card else None)
        self._check_dimensions(self.parameters, card)

    def _for_model(self) -> None:
        """Set what depends on the model's name (a hook; nothing by default).

        One class may serve text-only and multimodal models, each with its own
        `accepts_media` and `batch_limits`.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    @classmethod
    def _get_retryable_exceptions(cls) -> Retryable:
        """The exception classes a failed call is retried on (AgentScope's hook).

        `DEFAULT_RETRYABLE` unless a provider overrides it (see `parley.models.retry`).
        """
        return DEFAULT_RETRYABLE

    # -- configuration ------------------------------------------------------------------------

    def _check_credential(self, credential: Credential | None) -> Credential | None:
        return check_credential(type(self), self.credential_class, credential)

    def _check_parameters(
        self, parameters: EmbeddingParameters | Mapping[str, Any] | None
    ) -> EmbeddingParameters:
        return check_parameters(type(self), self.parameters_class, parameters)

    def _check_dimensions(
        self, parameters: EmbeddingParameters, card: EmbeddingModelCard | None
    ) -> None:
        wanted = parameters.dimensions
        if wanted is None or card is None:
            return
        choices = card.dimension_choices()
        if choices and wanted not in choices:
            raise UserError(
                f"{self.model} gives vectors of {', '.join(map(str, choices))} dimensions, "
                f"not {wanted}"
            )
        low, high = card.dimension_range()
        if (low is not None and wanted < low) or (high is not None and wanted > high):
            bounds = f"{low or 1} to {high}" if high is not None else f"at least {low}"
            raise UserError(f"{self.model} gives vectors of {bounds} dimensions, not {wanted}")

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[EmbeddingModelCard]:
        """The model cards for this class (from `custom_yaml_dir` when given)."""
        location = custom_yaml_dir or cls.cards_location
        if location is None:
            return []
        return [card.model_copy(deep=True) for card in _cards(location, cls.parameters_class)]

    def card(self) -> EmbeddingModelCard | None:
        """This model's card, when there is one."""
        return next((c for c in self.list_models() if c.name == self.model), None)

    @property
    def dimensions(self) -> int | None:
        """The size of the vectors this model gives, when known before a call."""
        if self.parameters.dimensions is not None:
            return self.parameters.dimensions
        card = self.card()
        return card.default_dimensions() if card else None

    # -- calling ------------------------------------------------------------------------------

    async def __call__(self, inputs: Sequence[InputT], **overrides: Any) -> EmbeddingResponse:
        """Embed `inputs`: one vector per input, in input order.

        Args:
            inputs: Texts (and, for multimodal models, blocks).
            **overrides: Parameters for this call only (e.g. `dimensions=256`).

        Raises:
            UserError: Bad inputs or parameters.
            ModelError: The provider failed (after retries) or answered wrongly.
        """
        with tracing.embeddings(self, inputs, overrides) as span:
            response = await self._embed(inputs, overrides)
            span.response(response)
        return response

    async def _embed(
        self, inputs: Sequence[InputT], overrides: dict[str, Any]
    ) -> EmbeddingResponse:
        items = self._check_inputs(inputs)
        parameters = self.parameters.merged(**overrides)
        if overrides:
            self._check_dimensions(parameters, self.card())
        started = time.perf_counter()
        if not items:
            return EmbeddingResponse(embeddings=[], usage=EmbeddingUsage(tokens=0))
        cache = self.embedding_cache
        if cache is None:
            vectors, tokens = await self._embed_all(items, parameters)
            return _response(vectors, tokens, started, "api")
        if cache.per_item:
            return await self._through_item_cache(cache, items, parameters, started)
        identifier = self.cache_identifier(items, parameters)
        cached = await _cache_read(cache, cache.retrieve(identifier), None)
        if cached is not None and len(cached) == len(items):
            return _response(cached, 0, started, "cache")
        vectors, tokens = await self._embed_all(items, parameters)
        async with _cache_write(cache):
            await cache.store(vectors, identifier, overwrite=True)
        return _response(vectors, tokens, started, "api")

    def call_sync(self, inputs: Sequence[InputT], **overrides: Any) -> EmbeddingResponse:
        """The sync twin of calling the model."""
        return run_sync(self(inputs, **overrides))

    async def aclose(self) -> None:
        """Release the provider's connections; a model may be used again afterwards."""

    def cache_identifier(
        self, inputs: Sequence[EmbeddingInput], parameters: EmbeddingParameters
    ) -> dict[str, Any]:
        """What identifies a request in a cache: provider, model, parameters and inputs."""
        return {
            "provider": self.provider,
            "model": self.model,
            "parameters": parameters.to_kwargs(),
            "inputs": [_canonical(item) for item in inputs],
        }

    def _check_inputs(self, inputs: Sequence[InputT]) -> list[InputT]:
        if isinstance(inputs, str | BaseModel):
            raise UserError("inputs must be a list of texts (or blocks), not a single one")
        items = list(inputs)
        for index, item in enumerate(items):
            if isinstance(item, str):
                continue
            if not isinstance(item, DataBlock):
                raise UserError(
                    f"input {index} is a {type(item).__name__}; expected a str"
                    + (
                        " or a text, image, video, audio or file block"
                        if self.accepts_media
                        else ""
                    )
                )
            if not self.accepts_media:
                raise UserError(
                    f"{self.model} embeds text only; input {index} is a {item.type} block"
                )
        return items

    async def _through_item_cache(
        self,
        cache: EmbeddingCache,
        items: list[InputT],
        parameters: EmbeddingParameters,
        started: float,
    ) -> EmbeddingResponse:
        identifiers = [self.cache_identifier([item], parameters) for item in items]
        none_found: list[Embedding | None] = [None] * len(identifiers)
        found = await _cache_read(cache, cache.retrieve_items(identifiers), none_found)
        misses = [i for i, vector in enumerate(found) if vector is None]
        if not misses:
            return _response([v for v in found if v is not None], 0, started, "cache")
        # Equal inputs among the misses are sent once.
        unique: dict[str, int] = {}
        for i in misses:
            unique.setdefault(cache.key(identifiers[i]), i)
        order = list(unique.values())
        vectors, tokens = await self._embed_all([items[i] for i in order], parameters)
        async with _cache_write(cache):
            await cache.store_items(vectors, [identifiers[i] for i in order])
        computed = dict(zip(unique, vectors, strict=True))
        merged = [
            vector if vector is not None else computed[cache.key(identifiers[i])]
            for i, vector in enumerate(found)
        ]
        return _response(merged, tokens, started, "api")

    async def _embed_all(
        self, items: list[InputT], parameters: EmbeddingParameters
    ) -> tuple[list[Embedding], int | None]:
        batches = self.batches(items)
        tracing.note_batches(len(batches))
        gate = asyncio.Semaphore(self.max_concurrency)
        results: list[EmbeddingBatch | None] = [None] * len(batches)

        failed = False

        async def run(position: int, indices: list[int]) -> None:
            nonlocal failed
            batch = [items[i] for i in indices]
            async with gate:
                if failed:  # woken by a batch that failed, before the group cancels this one
                    return
                try:
                    results[position] = await call_with_retries(
                        self.retry,
                        lambda: self._checked_call(batch, parameters),
                        describe=f"{self.provider} embedding batch {position + 1}/{len(batches)}",
                        retry_on=self._get_retryable_exceptions(),
                    )
                except BaseException:
                    failed = True
                    raise

        # A TaskGroup cancels the other batches as soon as one fails for good; the caller
        # gets that batch's error itself, not a group.
        try:
            async with asyncio.TaskGroup() as group:
                for position, indices in enumerate(batches):
                    group.create_task(run(position, indices))
        except ExceptionGroup as group_error:
            raise group_error.exceptions[0] from None
        vectors: list[Embedding | None] = [None] * len(items)
        tokens: int | None = None
        sizes: set[int] = set()
        for indices, result in zip(batches, results, strict=True):
            assert result is not None  # every task ran to completion
            lists = _as_lists(result.embeddings)
            sizes.add(len(lists[0]))  # each batch's vectors are of one size (_checked_call)
            for i, vector in zip(indices, lists, strict=True):
                vectors[i] = vector
            if result.tokens is not None:
                tokens = (tokens or 0) + result.tokens
        if len(sizes) > 1:
            raise self._bad_output(f"returned vectors of different sizes: {sorted(sizes)}")
        return [v for v in vectors if v is not None], tokens

    async def _checked_call(
        self, batch: list[InputT], parameters: EmbeddingParameters
    ) -> EmbeddingBatch:
        result = await self._call_api(batch, parameters)
        count = len(result.embeddings)
        if count != len(batch):
            raise self._bad_output(f"returned {count} vectors for {len(batch)} inputs")
        size = self._vector_size(result.embeddings)
        wanted = parameters.dimensions
        if wanted is not None and size != wanted:
            # A server that ignores `dimensions` (some OpenAI-compatible ones do) would
            # otherwise hand back vectors that do not fit the index they were asked for.
            raise self._bad_output(f"returned vectors of {size} dimensions; {wanted} were asked")
        return result

    def _vector_size(self, embeddings: Any) -> int:
        """The length every vector of a batch has (the lengths only: no number is read).

        Raises:
            ModelOutputError: Vectors of different lengths, empty ones, or no vectors at all.
        """
        shape = getattr(embeddings, "shape", None)
        try:
            sizes = (
                {shape[1]} if shape is not None and len(shape) == 2 else set(map(len, embeddings))
            )
        except TypeError:  # an item that is a number or None, not a vector
            raise self._bad_output("returned items that are not vectors") from None
        if len(sizes) > 1:
            raise self._bad_output(f"returned vectors of different sizes: {sorted(sizes)}")
        size = sizes.pop() if sizes else 0
        if size < 1:
            raise self._bad_output("returned empty vectors")
        return size

    def _bad_output(self, what: str) -> ModelOutputError:
        return ModelOutputError(f"{self.provider} {what}", model=self.model, provider=self.provider)

    async def _call_api(
        self, batch: list[InputT], parameters: EmbeddingParameters
    ) -> EmbeddingBatch:
        """Embed one batch in one request (what a provider implements).

        Raise parley's `ModelError` family (`parley.errors`) on failure: the retry policy
        decides from it whether to try again (or list your own in `_get_retryable_exceptions`).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _call_api")

    def batches(self, items: Sequence[EmbeddingInput]) -> list[list[int]]:
        """The inputs' indices, split into the requests to send.

        `batch_size` inputs per request; for a model with `batch_limits`, packed greedily in
        input order so that no request exceeds its elements, images or videos.

        Raises:
            UserError: One input alone exceeds a per-request limit.
        """
        limits = self.batch_limits
        if limits is None:
            size = self.batch_size
            return [list(range(i, min(i + size, len(items)))) for i in range(0, len(items), size)]
        return _pack(items, limits, self.model)


def _check_settings(
    *,
    context_size: int | None,
    max_retries: int,
    retry_delay: float,
    max_concurrency: int,
    timeout: float,
) -> None:
    """Refuse settings that would fail later, or silently do something else."""
    if context_size is not None and context_size < 1:
        raise UserError(f"context_size must be at least 1 token, got {context_size}")
    if max_retries < 0:
        raise UserError(f"max_retries must be 0 or more, got {max_retries}")
    if retry_delay < 0:
        raise UserError(f"retry_delay must be 0 or more seconds, got {retry_delay}")
    if max_concurrency < 1:
        raise UserError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if timeout <= 0:
        raise UserError(f"timeout must be more than 0 seconds, got {timeout}")


def _media_counts(item: EmbeddingInput) -> tuple[int, int]:
    if isinstance(item, ImageBlock):
        return 1, 0
    if isinstance(item, VideoBlock):
        return 0, 1
    return 0, 0


def _pack(items: Sequence[EmbeddingInput], limits: BatchLimits, model: str) -> list[list[int]]:
    batches: list[list[int]] = []
    current: list[int] = []
    images = videos = 0
    for index, item in enumerate(items):
        item_images, item_videos = _media_counts(item)
        if (limits.images is not None and item_images > limits.images) or (
            limits.videos is not None and item_videos > limits.videos
        ):
            raise UserError(f"input {index} alone exceeds {model}'s per-request media limits")
        fits = (
            len(current) < limits.elements
            and (limits.images is None or images + item_images <= limits.images)
            and (limits.videos is None or videos + item_videos <= limits.videos)
        )
        if not fits:
            batches.append(current)
            current, images, videos = [], 0, 0
        current.append(index)
        images += item_images
        videos += item_videos
    if current:
        batches.append(current)
    return batches


def _as_lists(embeddings: Any) -> list[Embedding]:
    tolist = getattr(embeddings, "tolist", None)
    if callable(tolist):  # a numpy array: one C-level conversion
        converted: list[Embedding] = tolist()
        return converted
    # Lists pass as they are (a provider's parsed JSON): a copy costs half as much as the parse.
    return [
        v if isinstance(v, list) else v.tolist() if hasattr(v, "tolist") else list(v)
        for v in embeddings
    ]


def _response(
    vectors: list[Embedding], tokens: int | None, started: float, source: Literal["api", "cache"]
) -> EmbeddingResponse:
    # Not validated again: the vectors are the provider's numbers (or the cache's), and
    # checking each of a large call's millions took as long as the provider's SDK takes for
    # the whole call (benchmarks/embeddings_openai.py).
    return EmbeddingResponse.model_construct(
        embeddings=vectors,
        usage=EmbeddingUsage(tokens=tokens, time=time.perf_counter() - started),
        source=source,
    )
