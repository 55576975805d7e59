"""`OpenAIEmbeddingModel`: OpenAI's `/v1/embeddings`, and any server that speaks it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Literal

from pydantic import Field

from parley.embeddings.base import (
    EmbeddingBatch,
    EmbeddingInput,
    EmbeddingModel,
    EmbeddingParameters,
)
from parley.errors import UserError
from parley.models._wire import read_json
from parley.models.base import ChatModel
from parley.models.credentials import Credential
from parley.providers.openai._errors import openai_errors
from parley.providers.openai._sdk import OpenAIClients
from parley.providers.openai.credentials import OpenAICompatibleCredential, OpenAICredential
from parley.providers.openai.embeddings._wire import read_embeddings

__all__ = [
    "OpenAICompatibleEmbeddingModel",
    "OpenAICompatibleEmbeddingParameters",
    "OpenAIEmbeddingModel",
    "OpenAIEmbeddingParameters",
]


class OpenAIEmbeddingParameters(EmbeddingParameters):
    """Parameters of `/v1/embeddings`: `dimensions`, and how the vectors travel."""

    encoding_format: Literal["base64", "float"] | None = Field(
        default=None,
        description="How the vectors travel: base64 (the default: a quarter of the bytes) or "
        "float, for servers that refuse base64. The vectors are the same.",
    )
    user: str | None = Field(
        default=None, description="An id of the end user, for the provider's abuse monitoring."
    )


class OpenAIEmbeddingModel(OpenAIClients, EmbeddingModel[str]):
    """A model behind OpenAI's embeddings API (`/v1/embeddings`), on the official SDK.

    Up to 2048 texts a request. `dimensions` shortens the vectors of the models that allow
    it (text-embedding-3-small to 1536, -large to 3072); a model of one size
    (text-embedding-ada-002) is sent none. Vectors travel as base64 (the SDK's default
    too), decoded with numpy when it is installed.

    Example:
        >>> model = OpenAIEmbeddingModel(OpenAICredential(), "text-embedding-3-small")
        >>> response = await model(["a text", "another"], dimensions=256)  # doctest: +SKIP
    """

    provider: ClassVar[str] = "openai"
    credential_class: ClassVar[type[Credential] | None] = OpenAICredential
    parameters_class: ClassVar[type[EmbeddingParameters]] = OpenAIEmbeddingParameters
    cards_location: ClassVar[str | None] = "parley.providers.openai.embeddings"
    batch_size: ClassVar[int] = 2048

    @functools.cached_property
    def _one_size(self) -> bool:
        """Whether the model's card gives it one vector size only (looked up once)."""
        card = self.card()
        return card is not None and len(card.dimension_choices()) == 1

    # -- the wire -----------------------------------------------------------------------------

    def request_body(self, batch: list[str], parameters: EmbeddingParameters) -> dict[str, Any]:
        """The JSON body of one batch's request."""
        fields = parameters.to_kwargs()
        if self._one_size:
            # A model of one size refuses the field ("does not support specifying dimensions").
            fields.pop("dimensions", None)
        fields.setdefault("encoding_format", "base64")
        return {"model": self.model, "input": batch, **fields}

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        ChatModel.check_allowed(self.endpoint())
        with openai_errors(self.model, self.provider):
            async with self._open(self.request_body(batch, parameters)) as response:
                data = await response.read()
        body = read_json(data, model=self.model, provider=self.provider)
        return read_embeddings(body, model=self.model, provider=self.provider)

    def _open(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        # As the chat models do: parley's body goes whole in `extra_body` (which wins over the
        # SDK's arguments), and the answer comes back raw, parsed by parley. Through the SDK's
        # arguments, the SDK would walk the inputs against its types and build a pydantic
        # object for every vector.
        embeddings = self.client().embeddings.with_streaming_response
        return embeddings.create(model=body.pop("model"), input=[], extra_body=body)


class OpenAICompatibleEmbeddingParameters(OpenAIEmbeddingParameters):
    """The OpenAI parameters, and a pass-through for the fields a server adds."""

    extra_body: dict[str, Any] | None = Field(
        default=None,
        description="Other fields sent as they are, e.g. vLLM's `truncate_prompt_tokens`.",
    )


class OpenAICompatibleEmbeddingModel(OpenAIEmbeddingModel):
    """A model behind any server that speaks OpenAI's `/v1/embeddings`.

    vLLM, LM Studio, llama.cpp's server, Ollama's `/v1`, DashScope's compatible mode... The
    credential's `base_url` says where; a key is sent only if given. A server that
    refuses base64 takes `encoding_format="float"`.

    Args:
        *args: As `OpenAIEmbeddingModel`'s.
        batch_size: The most texts the server takes in one request (DashScope's compatible
            mode: 10); else 2048.
        **kwargs: As `OpenAIEmbeddingModel`'s.

    Example:
        >>> credential = OpenAICompatibleCredential(base_url="http://localhost:8000/v1")
        >>> model = OpenAICompatibleEmbeddingModel(credential, "BAAI/bge-m3", batch_size=256)
    """

    provider: ClassVar[str] = "openai_compatible"
    credential_class: ClassVar[type[Credential] | None] = OpenAICompatibleCredential
    parameters_class: ClassVar[type[EmbeddingParameters]] = OpenAICompatibleEmbeddingParameters
    cards_location: ClassVar[str | None] = None
    key_required: ClassVar[bool] = False

    def __init__(self, *args: Any, batch_size: int | None = None, **kwargs: Any) -> None:
        if batch_size is not None:
            if batch_size < 1:
                raise UserError(f"batch_size must be at least 1, got {batch_size}")
            # This server's own limit, over the class's.
            self.__dict__["batch_size"] = batch_size
        super().__init__(*args, **kwargs)

    def _check_credential(self, credential: Credential | None) -> Credential | None:
        checked = super()._check_credential(credential)
        assert isinstance(checked, OpenAICompatibleCredential)  # the base built or checked it
        checked.require_endpoint(type(self).__name__)
        return checked

    def cache_identifier(
        self, inputs: Sequence[EmbeddingInput], parameters: EmbeddingParameters
    ) -> dict[str, Any]:
        """The base's identifier plus the server's URL.

        Two servers may give one name to different models (a local server's "embedding"),
        so one server's vectors do not answer for another's.
        """
        return {**super().cache_identifier(inputs, parameters), "base_url": self.endpoint()}

    def request_body(self, batch: list[str], parameters: EmbeddingParameters) -> dict[str, Any]:
        """The request fields, `extra_body` spread into them."""
        body = super().request_body(batch, parameters)
        extra = body.pop("extra_body", None) or {}
        return {**body, **extra}
