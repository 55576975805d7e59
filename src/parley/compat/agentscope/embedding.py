"""AgentScope's embedding models under `agentscope.embedding`'s names, on parley's.

As in AgentScope: `dimensions` is the constructor's third argument and required (a legacy
`parameters.dimensions` stands in for it), sent to the provider (OpenAI's only when
`pass_dimensions`); `embedding_cache=` takes an `EmbeddingCacheBase` such as
`FileEmbeddingCache()` (by default in `./.cache/embeddings`); `await model(inputs)` answers an
`EmbeddingResponse` (`embeddings`, `usage.tokens`, `usage.time`, `source` "api" or "cache").
Vectors travel as floats, as AgentScope asks for them. Each wraps parley's model of the same
provider (`to_parley()`), which batches, retries and caches.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from parley.compat.agentscope.message import DataBlock, TextBlock
from parley.embeddings import EmbeddingCache as EmbeddingCacheBase
from parley.embeddings import EmbeddingModelCard, EmbeddingResponse, EmbeddingUsage
from parley.embeddings import FileEmbeddingCache as _FileCache
from parley.embeddings.base import EmbeddingModel
from parley.errors import UserError
from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel as _DashScope
from parley.providers.gemini.embeddings import GeminiEmbeddingModel as _Gemini
from parley.providers.ollama.embeddings import OllamaEmbeddingModel as _Ollama
from parley.providers.openai.embeddings import OpenAIEmbeddingModel as _OpenAI

__all__ = [
    "DashScopeEmbeddingModel",
    "EmbeddingCacheBase",
    "EmbeddingModelBase",
    "EmbeddingModelCard",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "FileEmbeddingCache",
    "GeminiEmbeddingModel",
    "OllamaEmbeddingModel",
    "OpenAIEmbeddingModel",
]


class FileEmbeddingCache(_FileCache):
    """parley's file cache, in AgentScope's default folder (`./.cache/embeddings`)."""

    def __init__(
        self,
        cache_dir: str | Path = "./.cache/embeddings",
        max_file_number: int | None = None,
        max_cache_size: float | None = None,
    ) -> None:
        super().__init__(cache_dir, max_file_number, max_cache_size)


def _resolve_dimensions(dimensions: int | None, parameters: BaseModel) -> tuple[int, BaseModel]:
    """`dimensions`, else the legacy `parameters.dimensions` (taken out of the parameters)."""
    fields = parameters.model_dump()
    legacy = fields.pop("dimensions", None)
    if legacy is not None:
        parameters = type(parameters)(**fields)
    chosen = dimensions if dimensions is not None else legacy
    if chosen is None:
        raise UserError(
            "dimensions is required: pass the size of the model's vectors, e.g. "
            "dimensions=1024 (or the older parameters=Parameters(dimensions=...))"
        )
    if int(chosen) <= 0:
        raise UserError(f"dimensions must be a positive integer, got {chosen}")
    return int(chosen), parameters


def _as_input(item: Any, *, media: bool = False) -> Any:
    # AgentScope unpacks text blocks to their text; data blocks go to multimodal models.
    if isinstance(item, TextBlock):
        return item.text
    if isinstance(item, DataBlock):
        if not media:
            raise UserError(
                "this embedding model takes text only, not a DataBlock; embed media with a "
                "multimodal model (GeminiEmbeddingModel with gemini-embedding-2)"
            )
        return _parley_block(item)
    return item


def _parley_block(block: DataBlock) -> Any:
    """An AgentScope `DataBlock` as parley's image, audio, video or file block."""
    from parley.compat.agentscope.message import Msg, to_parley  # noqa: PLC0415

    (message,) = to_parley([Msg(name="user", role="user", content=[block])])
    (converted,) = message.content
    return converted


class EmbeddingModelBase:
    """The base of AgentScope-style embedding models.

    A custom model implements `_call_api(inputs)` for one batch of at most `batch_size`
    inputs; `await model(inputs)` splits, calls the batches concurrently, retries the
    exceptions `_get_retryable_exceptions` names and joins the answers in order.
    """

    class Parameters(BaseModel):
        """A provider's tunables other than `dimensions`."""

        model_config = ConfigDict(extra="allow")

    supports_multimodal: bool = False

    def __init__(
        self,
        credential: Any,
        model: str,
        dimensions: int | None,
        parameters: BaseModel | None,
        context_size: int,
        batch_size: int,
        max_retries: int,
        retry_delay: float,
    ) -> None:
        self.credential = credential
        self.model = model
        self.dimensions, self.parameters = _resolve_dimensions(
            dimensions, parameters or self.Parameters()
        )
        self.context_size = context_size
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.retry_delay = retry_delay

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        """The exceptions worth another try; none by default."""
        return ()

    async def __call__(self, inputs: Sequence[Any], **kwargs: Any) -> EmbeddingResponse:
        """The vectors of `inputs`, in order."""
        items = [_as_input(item) for item in inputs]
        if not items:
            return EmbeddingResponse(embeddings=[], usage=EmbeddingUsage(tokens=0, time=0))
        size = max(1, self.batch_size)
        batches = [items[i : i + size] for i in range(0, len(items), size)]
        answers = await asyncio.gather(*(self._retried(batch, kwargs) for batch in batches))
        tokens = [a.usage.tokens for a in answers if a.usage is not None]
        return EmbeddingResponse(
            embeddings=[vector for a in answers for vector in a.embeddings],
            usage=EmbeddingUsage(
                tokens=sum(t for t in tokens if t is not None),
                time=max((a.usage.time for a in answers if a.usage), default=0.0),
            ),
            source="cache" if all(a.source == "cache" for a in answers) else "api",
        )

    async def _retried(self, batch: list[Any], kwargs: dict[str, Any]) -> EmbeddingResponse:
        retryable = self._get_retryable_exceptions()
        for attempt in range(self.max_retries + 1):
            try:
                return await self._call_api(batch, **kwargs)
            except Exception as error:
                if not retryable or not isinstance(error, retryable):
                    raise
                if attempt == self.max_retries:
                    raise
                await asyncio.sleep(self.retry_delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    @abstractmethod
    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> EmbeddingResponse:
        """One batch's vectors."""


class _ParleyEmbeddingModel(EmbeddingModelBase):
    """An AgentScope-style embedding model on one of parley's: the provider classes' base.

    A subclass names parley's class (`parley_class`); the fields it always sends
    (`wire_fields`) and the model names that take media (`media_models`) are its data.
    """

    parley_class: ClassVar[type[EmbeddingModel[Any]]]
    send_dimensions: bool = True
    wire_fields: ClassVar[Mapping[str, Any]] = {}
    media_models: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        credential: Any,
        model: str,
        dimensions: int | None,
        parameters: BaseModel | None = None,
        embedding_cache: EmbeddingCacheBase | None = None,
        context_size: int = 8192,
        max_retries: int = 3,
        retry_delay: float = 1.0,
    ) -> None:
        super().__init__(
            credential,
            model,
            dimensions,
            parameters,
            context_size,
            self.parley_class.batch_size,
            max_retries,
            retry_delay,
        )
        # As AgentScope, the model's name says whether it takes media.
        self.supports_multimodal = model.startswith(self.media_models)
        self.embedding_cache = embedding_cache
        fields: dict[str, Any] = {**self.parameters.model_dump(), **self.wire_fields}
        if self.send_dimensions:
            fields["dimensions"] = self.dimensions
        self._parley = self.parley_class(
            self.parley_credential(credential),
            model,
            fields,
            embedding_cache=embedding_cache,
            context_size=context_size,
            max_retries=max_retries,
            retry_delay=retry_delay,
        )

    def parley_credential(self, credential: Any) -> Any:
        """The credential the wrapped parley model takes."""
        return credential

    def to_parley(self) -> EmbeddingModel[Any]:
        """The parley model this one wraps."""
        return self._parley

    async def __call__(self, inputs: Sequence[Any], **kwargs: Any) -> EmbeddingResponse:
        """The vectors of `inputs`, in order (parley's model batches, retries and caches)."""
        items = [_as_input(item, media=self.supports_multimodal) for item in inputs]
        if not items:
            return EmbeddingResponse(embeddings=[], usage=EmbeddingUsage(tokens=0, time=0))
        return await self._parley(items, **kwargs)

    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> EmbeddingResponse:
        return await self._parley(inputs, **kwargs)

    async def aclose(self) -> None:
        """Close the wrapped model's connections (parley's models hold a pool)."""
        await self._parley.aclose()


class OpenAIEmbeddingModel(_ParleyEmbeddingModel):
    """OpenAI's `/v1/embeddings` (and servers that speak it), as AgentScope's class."""

    parley_class = _OpenAI
    wire_fields: ClassVar[Mapping[str, Any]] = {"encoding_format": "float"}  # as AgentScope

    def __init__(
        self,
        credential: Any,
        model: str,
        dimensions: int | None,
        parameters: BaseModel | None = None,
        pass_dimensions: bool = True,
        embedding_cache: EmbeddingCacheBase | None = None,
        context_size: int = 8191,
        max_retries: int = 3,
        retry_delay: float = 1.0,
    ) -> None:
        self.pass_dimensions = pass_dimensions
        self.send_dimensions = pass_dimensions
        super().__init__(
            credential,
            model,
            dimensions,
            parameters,
            embedding_cache,
            context_size,
            max_retries,
            retry_delay,
        )


class GeminiEmbeddingModel(_ParleyEmbeddingModel):
    """Google's Gemini embedding models, as AgentScope's class.

    `gemini-embedding-001` takes text; `gemini-embedding-2` also `DataBlock`s (images,
    audio, video, PDFs), one vector each. `dimensions` goes as `outputDimensionality`; a
    call's keywords (`task_type="RETRIEVAL_QUERY"`, ...) go with that call, as AgentScope
    merges them into the request's config. The credential is `GeminiCredential`.
    """

    parley_class = _Gemini
    media_models = ("gemini-embedding-2",)


class OllamaEmbeddingModel(_ParleyEmbeddingModel):
    """Ollama's `/api/embed`, as AgentScope's class."""

    parley_class = _Ollama


class DashScopeEmbeddingModel(_ParleyEmbeddingModel):
    """DashScope's native embedding API (text-embedding-v4, ...), as AgentScope's class.

    It takes AgentScope's `DashScopeCredential` (the compatible mode's, whose `base_url` is
    for chat) and, as AgentScope through the `dashscope` SDK, calls the native API: at
    `DASHSCOPE_HTTP_BASE_URL` when set, else DashScope's (Beijing) endpoint. Text only here.
    """

    parley_class = _DashScope

    def parley_credential(self, credential: Any) -> Any:
        """The native API's credential (parley's `DashScopeCredential`), with the same key."""
        from parley.providers.dashscope import DashScopeCredential  # noqa: PLC0415

        key = getattr(credential, "api_key", None)
        return DashScopeCredential(api_key=key) if key is not None else None
