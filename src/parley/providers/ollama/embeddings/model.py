"""`OllamaEmbeddingModel`: a model an Ollama server runs, through its `/api/embed`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from pydantic import Field
from pydantic_core import to_json

from parley.embeddings.base import EmbeddingBatch, EmbeddingModel, EmbeddingParameters
from parley.errors import ModelOutputError
from parley.models.base import ChatModel
from parley.models.cards import EmbeddingModelCard
from parley.models.credentials import Credential
from parley.providers.ollama._cards import bundled_card
from parley.providers.ollama._errors import (
    PROVIDER,
    error_from_payload,
    error_from_response,
    ollama_errors,
)
from parley.providers.ollama._sdk import OllamaClients
from parley.providers.ollama._wire import parse_object
from parley.providers.ollama.credentials import OllamaCredential

if TYPE_CHECKING:
    pass

__all__ = ["OllamaEmbeddingModel", "OllamaEmbeddingParameters", "read_embeddings"]


class OllamaEmbeddingParameters(EmbeddingParameters):
    """Parameters of Ollama's `/api/embed` (its `api.EmbedRequest`).

    `dimensions` cuts each vector to its first values, unit length again (Ollama does it for
    any model; a Matryoshka model's card names the sizes that keep their meaning).
    """

    truncate: bool | None = Field(
        default=None,
        description="Cut inputs longer than the context to fit (Ollama's default); false "
        "fails the call instead.",
    )
    keep_alive: float | str | None = Field(
        default=None,
        description="How long the model stays loaded after the call: seconds or a duration "
        "such as '5m'; 0 unloads it at once, -1 keeps it loaded.",
    )
    options: dict[str, Any] | None = Field(
        default=None, description="Model options, sent as they are (e.g. `num_ctx`)."
    )


def read_embeddings(body: dict[str, Any], *, model: str, host: str) -> EmbeddingBatch:
    """The vectors and the token count of an `/api/embed` answer (`api.EmbedResponse`).

    Raises:
        ModelOutputError: The answer holds no list of vectors.
        ModelError: The server put an error in the body.
    """
    vectors = body.get("embeddings")
    if not isinstance(vectors, list) or not all(isinstance(v, list) for v in vectors):
        if "error" in body:
            raise error_from_payload(body["error"], model=model, host=host)
        raise ModelOutputError(
            f"ollama sent an answer without a list of `embeddings`: {str(body)[:200]}",
            model=model,
            provider=PROVIDER,
        )
    tokens = body.get("prompt_eval_count")
    return EmbeddingBatch(vectors, tokens if isinstance(tokens, int) else None)


class OllamaEmbeddingModel(OllamaClients, EmbeddingModel[str]):
    """A model behind an Ollama server's `/api/embed`, on the official `ollama` SDK.

    Up to 512 texts a request; vectors come unit length. The card of
    `nomic-embed-text:v1.5` is `nomic-embed-text`'s when there is no card of its own.
    Requests go through the SDK's HTTP client (its host, headers and connections) with
    parley's own JSON body, and the answer is parsed raw, as the chat model does.

    Example:
        >>> model = OllamaEmbeddingModel(OllamaCredential(), "embeddinggemma")
        >>> response = await model(["a text", "another"], dimensions=256)  # doctest: +SKIP
    """

    provider: ClassVar[str] = PROVIDER
    credential_class: ClassVar[type[Credential] | None] = OllamaCredential
    parameters_class: ClassVar[type[EmbeddingParameters]] = OllamaEmbeddingParameters
    cards_location: ClassVar[str | None] = "parley.providers.ollama.embeddings"
    batch_size: ClassVar[int] = 512

    def card(self) -> EmbeddingModelCard | None:
        """This model's card: its own, else its family's (`all-minilm:l6-v2` takes theirs)."""
        found = bundled_card(self.model, type(self).list_models())
        return cast("EmbeddingModelCard | None", found)

    # -- the client ---------------------------------------------------------------------------

    # -- the wire -----------------------------------------------------------------------------

    def request_body(self, batch: list[str], parameters: EmbeddingParameters) -> dict[str, Any]:
        """The JSON body of one batch's request."""
        return {"model": self.model, "input": batch, **parameters.to_kwargs()}

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        host = self.endpoint()
        ChatModel.check_allowed(host)
        content = to_json(self.request_body(batch, parameters))
        with ollama_errors(self.model, host):
            session = self._session()
            url = session.http.base_url.join("api/embed")
            response = await session.http.post(url, content=content)
        if response.status_code >= 400:
            raise error_from_response(response, model=self.model, host=host)
        body = parse_object(response.content, model=self.model)
        return read_embeddings(body, model=self.model, host=host)
