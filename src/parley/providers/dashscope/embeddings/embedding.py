"""`DashScopeEmbeddingModel`: DashScope's text and multimodal embedding models, natively.

Requests go through the `dashscope` SDK's 2.0 `AsyncClient` as the chat model's do (see
`parley.providers.dashscope._sdk`: one client per event loop, its transport's auth, workspace
and error statuses, httpx's interface on aiohttp's connections); parley builds each body and
reads each answer itself (`_wire`), one request per batch.

- Text models (`text-embedding-v4`, `-v3`): at most 10 texts a request (Model Studio's
  limit), `text_type` (`query` or `document`), `output_type` (`dense`), `instruct`.
- Multimodal models (`qwen3-vl-embedding`, `tongyi-embedding-vision-*`,
  `multimodal-embedding-v1`): texts, images and videos, one vector each, packed into
  requests within the model's per-request limits (`MULTIMODAL_LIMITS`). Media go as DashScope
  takes them: an `http(s)://` URL as it is, base64 data as a `data:` URI, a local file read
  and inlined (or, with `upload_files=True`, uploaded to DashScope's temporary storage as
  the SDK does, and sent as its `oss://` location; the docs take videos by URL only, which
  an upload gives).

`dimensions` is sent as `parameters.dimension`; each model's card pins the sizes it gives (a
model that gives one size takes no `dimension`: none is sent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from parley.embeddings.base import (
    BatchLimits,
    DataBlock,
    EmbeddingBatch,
    EmbeddingModel,
    EmbeddingParameters,
)
from parley.errors import UserError
from parley.models._wire import read_json
from parley.models.base import ChatModel
from parley.models.credentials import Credential
from parley.providers.dashscope._errors import dashscope_errors
from parley.providers.dashscope._sdk import DashScopeClients
from parley.providers.dashscope._upload import OSS_RESOLVE_HEADER, Uploader
from parley.providers.dashscope.credentials import DashScopeCredential
from parley.providers.dashscope.embeddings._wire import (
    MULTIMODAL_PATH,
    TEXT_PATH,
    check_kind,
    content,
    read_answer,
    uses_oss,
)

if TYPE_CHECKING:
    from parley.embeddings.cache import EmbeddingCache

__all__ = [
    "MULTIMODAL_LIMITS",
    "DashScopeEmbeddingModel",
    "DashScopeEmbeddingParameters",
    "is_multimodal_embedding_model",
]

_MULTIMODAL = re.compile(r"vl-embedding|embedding-vision|^multimodal-embedding")

MULTIMODAL_LIMITS: dict[str, BatchLimits] = {
    "qwen3-vl-embedding": BatchLimits(elements=20, images=5, videos=1),
    "tongyi-embedding-vision": BatchLimits(elements=20, images=64, videos=8),
    "multimodal-embedding-v1": BatchLimits(elements=20, images=1, videos=1),
}
"""Per-request limits of the multimodal models, by name prefix (Model Studio's multimodal
embedding reference). The tongyi-embedding-vision limits are its 2026-03-06 snapshots'
(the older models set none but a token budget). A multimodal model not listed here gets one
input per request: qwen2.5-vl-embedding, for one, fuses a request's contents into a single
vector."""

_ONE_BY_ONE = BatchLimits(elements=1)


def is_multimodal_embedding_model(name: str) -> bool:
    """Whether a model is served by multimodal embedding (Qwen-VL and Tongyi vision models)."""
    return bool(_MULTIMODAL.search(name.lower()))


def _limits(name: str) -> BatchLimits:
    lower = name.lower()
    found = [prefix for prefix in MULTIMODAL_LIMITS if lower.startswith(prefix)]
    return MULTIMODAL_LIMITS[max(found, key=len)] if found else _ONE_BY_ONE


class DashScopeEmbeddingParameters(EmbeddingParameters):
    """What DashScope's embedding endpoints take besides `dimensions` (sent as `dimension`).

    Each field that is set goes into the request's `parameters` under its own name.
    """

    text_type: Literal["query", "document"] | None = Field(
        default=None,
        description="Text models: embed for search queries or for the documents searched "
        "(DashScope's default: document).",
    )
    output_type: Literal["dense"] | None = Field(
        default=None, description="The vectors' form: dense (parley reads no other)."
    )
    instruct: str | None = Field(
        default=None, description="A task description that guides the model (v4, qwen3-vl)."
    )


class DashScopeEmbeddingModel(DashScopeClients, EmbeddingModel[str | DataBlock]):
    """A DashScope embedding model: text (`text-embedding-v4`) or multimodal (`qwen3-vl-embedding`).

    The endpoint follows the model's name: multimodal models (`*-vl-embedding`,
    `tongyi-embedding-vision-*`, `multimodal-embedding-*`) take text, image and video blocks
    as well as strings; text models take strings.

    Example:
        >>> model = DashScopeEmbeddingModel(DashScopeCredential(), "text-embedding-v4")
        >>> response = await model(["a text"], dimensions=256)  # doctest: +SKIP

    Args:
        credential: The key and endpoint (`DashScopeCredential`); from the environment when
            None.
        model: The model's name at DashScope.
        parameters: `DashScopeEmbeddingParameters`, or a dict of them.
        embedding_cache: Reuses vectors computed before.
        context_size: The most tokens one input may have; from the card when not given.
        max_retries: Tries after the first, per batch, on retryable failures.
        retry_delay: Seconds before the first retry.
        max_concurrency: Batches in flight at once.
        timeout: Seconds to wait for DashScope to answer one batch.
        upload_files: Upload local media to DashScope's temporary storage (as the SDK does)
            instead of inlining them.
    """

    provider: ClassVar[str] = "dashscope"
    credential_class: ClassVar[type[Credential] | None] = DashScopeCredential
    parameters_class: ClassVar[type[EmbeddingParameters]] = DashScopeEmbeddingParameters
    cards_location: ClassVar[str | Path | None] = "parley.providers.dashscope.embeddings"
    batch_size: ClassVar[int] = 10

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
        upload_files: bool = False,
    ) -> None:
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
        self.multimodal = is_multimodal_embedding_model(model)
        """Whether calls go to multimodal embedding (from the model's name)."""
        if self.multimodal:
            self.accepts_media = True
            self.batch_limits = _limits(model)
        self.upload_files = upload_files
        card = self.card()
        choices = card.dimension_choices() if card else []
        # A model that gives one size takes no `dimension` (multimodal-embedding-v1,
        # tongyi-embedding-vision-plus): asking for that size is not sent.
        self._only_size = choices[0] if len(choices) == 1 else None

    # -- the client -----------------------------------------------------------------------

    # -- the request ----------------------------------------------------------------------

    def _check_inputs(self, inputs: Sequence[str | DataBlock]) -> list[str | DataBlock]:
        items = super()._check_inputs(inputs)
        if self.multimodal:  # refused before any batch is sent, not by the batch that has it
            for index, item in enumerate(items):
                check_kind(item, index, self.model)
        return items

    def wire_parameters(self, parameters: EmbeddingParameters) -> dict[str, Any]:
        """The request's `parameters`: the fields that are set, `dimensions` as `dimension`.

        Raises:
            UserError: `text_type` for a multimodal model, which does not take it.
        """
        fields = parameters.to_kwargs()
        if (size := fields.pop("dimensions", None)) is not None and size != self._only_size:
            fields["dimension"] = size
        if self.multimodal and "text_type" in fields:
            raise UserError(f"{self.model} takes no text_type (the text models do)")
        return fields

    async def request(
        self, batch: Sequence[str | DataBlock], parameters: EmbeddingParameters
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        """One batch's request: its path, its body and its extra headers.

        Local media are read and inlined, or uploaded first with `upload_files`.
        """
        wire = self.wire_parameters(parameters)
        if not self.multimodal:
            body = {"model": self.model, "input": {"texts": list(batch)}, "parameters": wire}
            return TEXT_PATH, body, {}
        inline = not self.upload_files
        contents = [
            content(item, i, self.model, inline_local=inline) for i, item in enumerate(batch)
        ]
        if self.upload_files:
            # The uploader walks chat messages: the contents are one message's parts.
            await self._uploader().upload([{"content": contents}])
        body = {"model": self.model, "input": {"contents": contents}, "parameters": wire}
        return MULTIMODAL_PATH, body, dict(OSS_RESOLVE_HEADER) if uses_oss(contents) else {}

    def _uploader(self) -> Uploader:
        return Uploader(
            model=self.model,
            api_key=self._api_key(),
            base_url=self.endpoint(),
            workspace=self.dashscope_credential.workspace,
            timeout=self.timeout,
            check_host=ChatModel.check_allowed,
            provider=self.provider,
        )

    # -- calling --------------------------------------------------------------------------

    async def _call_api(
        self, batch: list[str | DataBlock], parameters: EmbeddingParameters
    ) -> EmbeddingBatch:
        ChatModel.check_allowed(self.endpoint())
        path, body, headers = await self.request(batch, parameters)
        client = self.client()
        with dashscope_errors(self.model, self.provider):
            # The SDK's client has no base URL of its own when given an HTTP client: it is
            # passed with every request, as the SDK's chat resources pass theirs.
            response = await client.transport.request(
                "POST",
                path,
                json=body,
                headers=headers or None,
                base_url=client.config.base_url,
                sdk_module="embeddings",
            )
            if response.status_code >= 400:
                from dashscope.v2.errors import response_error  # noqa: PLC0415

                error = response_error(response)
                if error is not None:
                    raise error
        answer = read_json(response.content, model=self.model, provider=self.provider)
        return read_answer(answer, len(batch), model=self.model, provider=self.provider)
