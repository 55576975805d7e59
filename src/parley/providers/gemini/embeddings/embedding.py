"""`GeminiEmbeddingModel`: Google's embedding models, on the Gemini API or Vertex AI.

Requests go through `google-genai`'s request layer as the chat model's do (see
`parley.providers.gemini._sdk`: one SDK client per event loop, the backend's base URL, version
and paths, the API key or Google's credentials, the SDK's error classes); parley builds each
body and reads each answer itself (`_wire`), one request per batch of up to 100 inputs (the
Gemini API's `batchEmbedContents` limit).

`dimensions` is sent as `outputDimensionality` (the model truncates its vector: Matryoshka
representation); `task_type` and `title` as the API names them. gemini-embedding-2 takes its
task as a prefix of the text instead (`"task: search result | query: ..."`, Google's guide),
and images, audio, video and PDFs besides text, one per input.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from parley.embeddings.base import DataBlock, EmbeddingBatch, EmbeddingModel, EmbeddingParameters
from parley.errors import UserError
from parley.models._aiohttp import LoopClients, PooledClients
from parley.models._wire import read_json
from parley.models.base import ChatModel
from parley.models.credentials import Credential
from parley.providers.gemini._errors import gemini_errors
from parley.providers.gemini._sdk import Endpoint, client_pool, post
from parley.providers.gemini.credentials import GeminiCredential
from parley.providers.gemini.embeddings._wire import (
    batch_body,
    is_multimodal_model,
    predict_body,
    read_batch,
    read_predict,
    uses_predict,
)

if TYPE_CHECKING:
    from google.genai._api_client import BaseApiClient


__all__ = ["GeminiEmbeddingModel", "GeminiEmbeddingParameters", "TaskType"]

TaskType = Literal[
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
    "CODE_RETRIEVAL_QUERY",
]
"""What the vectors are for (the Gemini API's `TaskType`)."""


class GeminiEmbeddingParameters(EmbeddingParameters):
    """What Gemini's embedding calls take besides `dimensions` (`outputDimensionality`)."""

    task_type: TaskType | None = Field(
        default=None, description="What the vectors are for: queries, documents, similarity..."
    )
    title: str | None = Field(
        default=None, description="The documents' title (with task_type RETRIEVAL_DOCUMENT)."
    )
    auto_truncate: bool | None = Field(
        default=None,
        description="Vertex AI: cut inputs longer than the model takes (else they fail).",
    )


class GeminiEmbeddingModel(PooledClients["BaseApiClient"], EmbeddingModel[str | DataBlock]):
    """A Gemini embedding model: `gemini-embedding-001` (text), `gemini-embedding-2` (media too).

    Example:
        >>> credential = GeminiCredential(api_key="AIza...")
        >>> model = GeminiEmbeddingModel(credential, "gemini-embedding-001")
        >>> vectors = await model(["a query"], task_type="RETRIEVAL_QUERY")  # doctest: +SKIP

    Args:
        credential: The Gemini API key, or Vertex AI's project (`GeminiCredential`); from
            the environment when None.
        model: The model's name.
        parameters: `GeminiEmbeddingParameters`, or a dict of them.
        embedding_cache: Reuses vectors computed before.
        context_size: The most tokens one input may have; from the card when not given.
        max_retries: Tries after the first, per batch, on retryable failures.
        retry_delay: Seconds before the first retry.
        max_concurrency: Batches in flight at once.
        timeout: Seconds to wait for Google to answer one batch.
    """

    provider: ClassVar[str] = "gemini"
    credential_class: ClassVar[type[Credential] | None] = GeminiCredential
    parameters_class: ClassVar[type[EmbeddingParameters]] = GeminiEmbeddingParameters
    cards_location: ClassVar[str | Path | None] = "parley.providers.gemini.embeddings"
    batch_size: ClassVar[int] = 100
    extra_headers: ClassVar[dict[str, str]] = {}

    _pool: LoopClients[BaseApiClient] | None = None

    def _for_model(self) -> None:
        """`gemini-embedding-2` takes media; the text models only text."""
        self.accepts_media = is_multimodal_model(self.model)

    # -- the client -----------------------------------------------------------------------

    @property
    def gemini_credential(self) -> GeminiCredential:
        """The credential, typed."""
        credential = self.credential
        assert isinstance(credential, GeminiCredential)
        return credential

    def endpoint(self) -> str | None:
        """The base URL requests go to."""
        return self.gemini_credential.endpoint()

    def new_pool(self) -> LoopClients[BaseApiClient]:
        """One SDK API client per event loop (see `client_pool`)."""
        return client_pool(Endpoint(self.gemini_credential, self.timeout, self.extra_headers))

    # -- the request ----------------------------------------------------------------------

    def wire_fields(self, parameters: EmbeddingParameters) -> dict[str, Any]:
        """The parameters that are set, checked against the backend.

        Raises:
            UserError: `auto_truncate` on the Gemini API, which takes it only on Vertex AI.
        """
        fields = parameters.to_kwargs()
        if "auto_truncate" in fields and not self.gemini_credential.vertexai:
            raise UserError("auto_truncate is for Vertex AI only; the Gemini API refuses it")
        return fields

    def request(
        self, api: BaseApiClient, batch: Sequence[str | DataBlock], parameters: EmbeddingParameters
    ) -> tuple[str, dict[str, Any]]:
        """One batch's request: its path (under the backend's version) and its body."""
        from google.genai import _transformers  # noqa: PLC0415  (loaded with the SDK)

        fields = self.wire_fields(parameters)
        # `models/<name>` on the Gemini API, `publishers/google/models/<name>` on Vertex AI.
        model_path = _transformers.t_model(api, self.model)
        vertexai = bool(api.vertexai)
        if uses_predict(self.model, vertexai=vertexai):
            texts = [item for item in batch if isinstance(item, str)]
            assert len(texts) == len(batch)  # a text model: blocks were refused before
            return f"{model_path}:predict", predict_body(texts, fields)
        body = batch_body(batch, fields, model_path=model_path, vertexai=vertexai)
        return f"{model_path}:batchEmbedContents", body

    # -- calling --------------------------------------------------------------------------

    async def _call_api(
        self, batch: list[str | DataBlock], parameters: EmbeddingParameters
    ) -> EmbeddingBatch:
        ChatModel.check_allowed(self.endpoint())
        api = self.client()
        path, body = self.request(api, batch, parameters)
        with gemini_errors(self.model):
            response = await post(api, path, body)
            try:
                data = await response.aread()
            finally:
                await response.aclose()
        answer = read_json(data, model=self.model, provider=self.provider)
        if path.endswith(":predict"):
            return read_predict(answer, len(batch), model=self.model)
        return read_batch(answer, len(batch), model=self.model)
