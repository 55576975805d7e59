"""DashScope's two embedding endpoints on the wire: request bodies and answers.

Both take `{"model", "input", "parameters"}` and answer `{"output": {"embeddings": [...]},
"usage": {...}, "request_id"}` (Model Studio's API reference; the SDK's
`dashscope.v2.resources.embeddings`):

- text embedding (`/services/embeddings/text-embedding/text-embedding`): `input.texts` is a
  list of strings; each vector comes as `{"text_index", "embedding"}`; usage is
  `{"total_tokens"}`;
- multimodal embedding (`/services/embeddings/multimodal-embedding/multimodal-embedding`):
  `input.contents` is a list of one-key objects, `{"text": ...}`, `{"image": ...}` or
  `{"video": ...}`, the media as an `http(s)://` URL, a `data:` URI or an `oss://` location;
  each vector comes as `{"index", "embedding", "type"}`. Usage differs by model:
  qwen3-vl-embedding and multimodal-embedding-v1 count text in `input_tokens` and media in
  `image_tokens`; the tongyi-embedding-vision models count both in `input_tokens` (with
  `input_tokens_details`).

The size of the vectors is the request's `parameters.dimension`. A failure is
`{"code", "message", "request_id"}`, with an error status or (rarely) with 200.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parley.embeddings.base import EmbeddingBatch, EmbeddingInput
from parley.errors import ModelOutputError, UserError
from parley.messages import ImageBlock, TextBlock, VideoBlock
from parley.providers.dashscope._errors import error_from_code
from parley.providers.dashscope._media import media_value

__all__ = [
    "MULTIMODAL_PATH",
    "TEXT_PATH",
    "check_kind",
    "content",
    "read_answer",
    "tokens",
    "uses_oss",
]

TEXT_PATH = "/services/embeddings/text-embedding/text-embedding"
MULTIMODAL_PATH = "/services/embeddings/multimodal-embedding/multimodal-embedding"
OSS_SCHEME = "oss://"


def _unsupported(item: EmbeddingInput, index: int, model: str) -> UserError:
    kind = item.type if not isinstance(item, str) else "str"
    return UserError(f"{model} embeds text, images and videos; input {index} is a {kind} block")


def check_kind(item: EmbeddingInput, index: int, model: str) -> None:
    """Refuse a block DashScope's embedding models do not take (audio, files).

    Raises:
        UserError: The block is neither text, an image nor a video.
    """
    if not isinstance(item, str | TextBlock | ImageBlock | VideoBlock):
        raise _unsupported(item, index, model)


def content(item: EmbeddingInput, index: int, model: str, *, inline_local: bool) -> dict[str, str]:
    """One element of a multimodal request's `input.contents`.

    Raises:
        UserError: A block DashScope's embedding models do not take (audio, files).
        MessageError: A local file cannot be read.
    """
    if isinstance(item, str):
        return {"text": item}
    if isinstance(item, TextBlock):
        return {"text": item.text}
    if isinstance(item, ImageBlock | VideoBlock):
        return {item.type: media_value(item, inline_local=inline_local)}
    raise _unsupported(item, index, model)


def uses_oss(contents: Sequence[dict[str, str]]) -> bool:
    """Whether a media value is an `oss://` location (the service then needs to be told)."""
    return any(value.startswith(OSS_SCHEME) for part in contents for value in part.values())


def tokens(usage: Any) -> int | None:
    """The tokens an answer's `usage` counts: text and media, whichever way the model says."""
    if not isinstance(usage, dict):
        return None
    if isinstance(text := usage.get("input_tokens"), int):
        media = usage.get("image_tokens")  # top level: counted apart from `input_tokens`
        return text + (media if isinstance(media, int) else 0)
    total = usage.get("total_tokens")
    return total if isinstance(total, int) else None


def read_answer(body: dict[str, Any], size: int, *, model: str, provider: str) -> EmbeddingBatch:
    """The vectors of an answer, put back in input order by their index.

    Raises:
        ModelError: The body reports an error (`code`).
        ModelOutputError: The body has no vectors, or not one for each input.
    """
    if body.get("code"):
        raise error_from_code(
            None, str(body["code"]), body.get("message"), body, model=model, provider=provider
        )
    output = body.get("output")
    found = output.get("embeddings") if isinstance(output, dict) else None
    if not isinstance(found, list):
        raise ModelOutputError(
            f"{provider} answered without output.embeddings: {str(body)[:200]}",
            model=model,
            provider=provider,
        )
    vectors: list[Any] = [None] * size
    for item in found:
        index = item.get("text_index", item.get("index")) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < size or not isinstance(vector, list):
            raise ModelOutputError(
                f"{provider} sent a vector that fits no input of {size}: {str(item)[:200]}",
                model=model,
                provider=provider,
            )
        vectors[index] = vector
    if None in vectors:
        raise ModelOutputError(
            f"{provider} sent no vector for input {vectors.index(None)} of {size}",
            model=model,
            provider=provider,
        )
    return EmbeddingBatch(vectors, tokens=tokens(body.get("usage")))
