"""Gemini wire-format bodies and stream events for a scripted answer (`Reply`).

Shapes follow the Gemini API reference (`GenerateContentResponse`, `Candidate`, `Part`,
`UsageMetadata`, `PromptFeedback`) and `google-genai`'s types: camelCase JSON, a stream of
`data:` events each holding a whole `GenerateContentResponse`, the last with `finishReason`.

Embedding answers (`Embeddings`), as `google-genai`'s `models.embed_content` reads them:
`batchEmbedContents` (`{"embeddings": [{"values"}], "usageMetadata"}`), Vertex AI's
`embedContent` (`{"embedding": {"values"}, ...}`) and Vertex AI's `predict` for its text
models (`{"predictions": [{"embeddings": {"values", "statistics"}}], "metadata"}`). A vector's
key (see `vector_for`) is its content's parts' texts, inline data or file URIs, joined by `|`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from parley.providers._server.embeddings import MEDIA_TOKENS, Embeddings, text_tokens
from parley.providers._server.steps import Faults

__all__ = [
    "Embeddings",
    "FunctionCall",
    "Reply",
    "batch_embed_contents",
    "embed_content",
    "generate_content",
    "part_key",
    "predict_embeddings",
    "stream_chunks",
]

_ids = itertools.count(1)


@dataclass
class FunctionCall:
    """A function call in a scripted answer.

    Args:
        name: The function's name.
        args: Its arguments.
        id: The call's id (the Gemini API often gives none).
        signature: A thought signature on the call's part.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    signature: str | None = None

    def part(self) -> dict[str, Any]:
        """The `functionCall` part."""
        call: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.id is not None:
            call["id"] = self.id
        part: dict[str, Any] = {"functionCall": call}
        if self.signature is not None:
            part["thoughtSignature"] = self.signature
        return part


@dataclass
class Reply(Faults):
    """One scripted answer, whole or streamed as the request asks.

    Args:
        text: The answer's text.
        thinking: A thought summary (`thought: true` parts).
        thought_signature: A signature on the last thought part.
        text_signature: A signature on the last text part.
        trailing_signature: A signature on an empty text part after the rest (as streams
            end).
        function_calls: Function calls, all in one event when streamed.
        parts: Extra parts (media, ...) sent as given, after the text.
        finish_reason: The candidate's finish reason (`STOP` by default).
        finish_message: The candidate's `finishMessage` (why it finished), if any.
        block_reason: Answer with no candidate and `promptFeedback.blockReason` set.
        input_tokens: `promptTokenCount`.
        output_tokens: `candidatesTokenCount` (default: the number of streamed pieces).
        thoughts_tokens: `thoughtsTokenCount`.
        cached_tokens: `cachedContentTokenCount`.
        chunk_size: Characters per streamed piece.
        model_version: The `modelVersion` to report (default: the model asked for).
        response_id: The `responseId` to report.
        delay: Seconds before answering at all (a slow server; see `Faults`).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an error event at this position and end the stream.
        error: The error event's `error` object.
    """

    text: str = ""
    thinking: str = ""
    thought_signature: str | None = None
    text_signature: str | None = None
    trailing_signature: str | None = None
    function_calls: list[FunctionCall] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "STOP"
    finish_message: str | None = None
    block_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int | None = None
    thoughts_tokens: int = 0
    cached_tokens: int = 0
    model_version: str | None = None
    response_id: str | None = None
    error: dict[str, Any] = field(
        default_factory=lambda: {"code": 500, "message": "Internal error", "status": "INTERNAL"}
    )

    def out_tokens(self) -> int:
        """The `candidatesTokenCount` to report."""
        if self.output_tokens is not None:
            return self.output_tokens
        return len(self.pieces(self.text)) + len(self.function_calls) + 1


def _usage(reply: Reply, *, final: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": reply.input_tokens}
    total = reply.input_tokens
    if final:
        output = reply.out_tokens()
        usage["candidatesTokenCount"] = output
        total += output + reply.thoughts_tokens
        if reply.thoughts_tokens:
            usage["thoughtsTokenCount"] = reply.thoughts_tokens
        if reply.cached_tokens:
            usage["cachedContentTokenCount"] = reply.cached_tokens
    usage["totalTokenCount"] = total
    return usage


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    return {**part, "thoughtSignature": signature} if signature is not None else part


def _groups(reply: Reply, *, stream: bool) -> Iterator[list[dict[str, Any]]]:
    """The parts, grouped as they go out: one group per stream event (one group if whole)."""
    thoughts = reply.pieces(reply.thinking) if stream else [reply.thinking] * bool(reply.thinking)
    for index, piece in enumerate(thoughts):
        last = index == len(thoughts) - 1
        part = {"text": piece, "thought": True}
        yield [_signed(part, reply.thought_signature if last else None)]
    texts = reply.pieces(reply.text) if stream else [reply.text] * bool(reply.text)
    for index, piece in enumerate(texts):
        last = index == len(texts) - 1
        yield [_signed({"text": piece}, reply.text_signature if last else None)]
    if reply.parts:
        yield list(reply.parts)
    if reply.function_calls:
        yield [call.part() for call in reply.function_calls]
    if reply.trailing_signature is not None:
        yield [{"text": "", "thoughtSignature": reply.trailing_signature}]


def _response(
    reply: Reply, model: str, parts: list[dict[str, Any]] | None, *, final: bool, response_id: str
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if reply.block_reason is not None:
        body["promptFeedback"] = {"blockReason": reply.block_reason}
    else:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts or []}}
        if final:
            candidate["finishReason"] = reply.finish_reason
            if reply.finish_message is not None:
                candidate["finishMessage"] = reply.finish_message
        candidate["index"] = 0
        body["candidates"] = [candidate]
    body["usageMetadata"] = _usage(reply, final=final)
    body["modelVersion"] = reply.model_version or model
    body["responseId"] = response_id
    return body


def generate_content(reply: Reply, model: str) -> dict[str, Any]:
    """A whole `GenerateContentResponse`."""
    parts = [part for group in _groups(reply, stream=False) for part in group]
    response_id = reply.response_id or f"resp-{next(_ids):06d}"
    return _response(reply, model, parts, final=True, response_id=response_id)


def stream_chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    """The `GenerateContentResponse` of each stream event; the last has the finish reason."""
    response_id = reply.response_id or f"resp-{next(_ids):06d}"
    if reply.block_reason is not None:
        return [_response(reply, model, None, final=True, response_id=response_id)]
    groups = list(_groups(reply, stream=True)) or [[]]
    return [
        _response(reply, model, group, final=i == len(groups) - 1, response_id=response_id)
        for i, group in enumerate(groups)
    ]


# -- embeddings -------------------------------------------------------------------------------


def part_key(part: Any) -> tuple[str, str]:
    """`(kind, key)` of an embedded part: its text, inline data or file URI.

    Raises:
        ValueError: Not a part the embedding calls take.
    """
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return "text", part["text"]
        inline = part.get("inlineData")
        if isinstance(inline, dict) and inline.get("mimeType") and "data" in inline:
            return "media", str(inline["data"])
        file_data = part.get("fileData")
        if isinstance(file_data, dict) and file_data.get("fileUri"):
            return "media", str(file_data["fileUri"])
    raise ValueError(f"not a text, inlineData or fileData part: {part!r}")


def _content_keys(content: Any) -> list[tuple[str, str]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"a content needs parts: {content!r}")
    return [part_key(part) for part in parts]


def _embedding_usage(step: Embeddings, keys: list[list[tuple[str, str]]]) -> dict[str, Any]:
    if step.usage is not None:
        return step.usage
    tokens = sum(
        text_tokens(key) if kind == "text" else MEDIA_TOKENS for item in keys for kind, key in item
    )
    return {"promptTokenCount": tokens, "totalTokenCount": tokens}


def batch_embed_contents(
    step: Embeddings, body: Any, model: str, *, vertexai: bool
) -> dict[str, Any]:
    """A `batchEmbedContents` answer: one embedding per request, in order.

    Raises:
        ValueError: The body is not such a request (the server answers 400), or, on the
            Gemini API, a request names another model than the URL.
    """
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        raise ValueError("requests must be a non-empty list")
    keys, sizes = [], []
    for request in requests:
        if not isinstance(request, dict):
            raise ValueError(f"a request must be an object: {request!r}")
        if not vertexai and request.get("model") != f"models/{model}":
            raise ValueError(f"each request must name models/{model}, not {request.get('model')}")
        config = request.get("embedContentConfig", {}) if vertexai else request
        keys.append(_content_keys(request.get("content")))
        sizes.append(config.get("outputDimensionality"))
    if len(set(sizes)) > 1:
        raise ValueError("the scripted server embeds one size per batch")
    vectors = step.vectors(["|".join(k for _, k in item) for item in keys], sizes[0])
    answer: dict[str, Any] = {"embeddings": [{"values": vector} for vector in vectors]}
    if usage := _embedding_usage(step, keys):
        answer["usageMetadata"] = usage
    return answer


def embed_content(step: Embeddings, body: Any) -> dict[str, Any]:
    """An `embedContent` answer (Vertex AI's call for one content): one embedding.

    Raises:
        ValueError: The body is not such a request (the server answers 400).
    """
    if not isinstance(body, dict):
        raise ValueError("the body must be an object")
    keys = _content_keys(body.get("content"))
    size = (body.get("embedContentConfig") or {}).get("outputDimensionality")
    vectors = step.vectors(["|".join(k for _, k in keys)], size)
    answer: dict[str, Any] = {"embedding": {"values": vectors[0]} if vectors else {}}
    if usage := _embedding_usage(step, [keys]):
        answer["usageMetadata"] = usage
    return answer


def predict_embeddings(step: Embeddings, body: Any) -> dict[str, Any]:
    """A Vertex AI `predict` answer for a text embedding model: one prediction per instance.

    Raises:
        ValueError: The body is not such a request (the server answers 400).
    """
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list) or not instances:
        raise ValueError("instances must be a non-empty list")
    texts = [i.get("content") if isinstance(i, dict) else None for i in instances]
    if not all(isinstance(text, str) for text in texts):
        raise ValueError("each instance needs a content string")
    size = (body.get("parameters") or {}).get("outputDimensionality")
    vectors = step.vectors([str(text) for text in texts], size)
    predictions = [
        {
            "embeddings": {
                "values": vector,
                "statistics": {"token_count": text_tokens(str(text)), "truncated": False},
            }
        }
        for text, vector in zip(texts, vectors, strict=False)
    ]
    characters = sum(len(str(text)) for text in texts)
    return {"predictions": predictions, "metadata": {"billableCharacterCount": characters}}
