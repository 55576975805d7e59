"""Reading Gemini responses into deltas: the cases the server tests do not reach."""

from __future__ import annotations

from typing import Any

import pytest

from parley.errors import ContentFilterError, RateLimitError
from parley.messages import AudioBlock, TextBlock, ThinkingBlock, URLSource
from parley.models.accumulator import StreamAccumulator
from parley.models.response import ChatResponse
from parley.providers.gemini._errors import error_from_status
from parley.providers.gemini._wire import ResponseReader, usage
from parley.providers.gemini.formatter import PART_SIGNATURE


def read(*chunks: dict[str, Any]) -> ChatResponse:
    reader = ResponseReader(model="m")
    accumulator = StreamAccumulator("m")
    for chunk in chunks:
        for delta in reader.read(chunk):
            accumulator.add(delta)
    return accumulator.final()


def candidate(*parts: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if reason:
        body["finishReason"] = reason
    return {"candidates": [body]}


def test_usage_counts_thoughts_as_output_and_tool_prompts_as_input() -> None:
    counted = usage(
        {
            "promptTokenCount": 100,
            "toolUsePromptTokenCount": 20,
            "candidatesTokenCount": 30,
            "thoughtsTokenCount": 50,
            "cachedContentTokenCount": 64,
        }
    )
    assert (counted.input_tokens, counted.output_tokens, counted.cached_tokens) == (120, 80, 64)


def test_an_unknown_finish_reason_is_inferred_and_kept() -> None:
    response = read(candidate({"text": "Hi"}, reason="SOMETHING_NEW"))
    assert response.finish_reason == "stop"
    assert response.metadata == {"finish_reason": "SOMETHING_NEW"}


def test_a_signed_text_part_keeps_its_signature_before_it() -> None:
    response = read(candidate({"text": "Hi", "thoughtSignature": "s1"}, reason="STOP"))
    assert response.content == [
        ThinkingBlock(thinking="", extra={PART_SIGNATURE: "s1"}),
        TextBlock(text="Hi"),
    ]


def test_a_call_without_arguments() -> None:
    (call,) = read(candidate({"functionCall": {"name": "now"}}, reason="STOP")).tool_calls
    assert (call.name, call.input, call.raw_input) == ("now", {}, None)


def test_file_data_the_model_sent() -> None:
    part = {"fileData": {"fileUri": "https://example.com/a.mp3", "mimeType": "audio/mpeg"}}
    gs = {"fileData": {"fileUri": "gs://bucket/a.mp3", "mimeType": "audio/mpeg"}}
    ftp = {"fileData": {"fileUri": "ftp://host/a.mp3", "mimeType": "audio/mpeg"}}
    response = read(candidate(part, gs, ftp, reason="STOP"))
    # A Vertex AI `gs://` object is a storage location parley keeps as it is; a URI of a
    # scheme parley's sources do not take is left out rather than failing the call.
    assert response.content == [
        AudioBlock(source=URLSource(url="https://example.com/a.mp3", media_type="audio/mpeg")),
        AudioBlock(source=URLSource(url="gs://bucket/a.mp3", media_type="audio/mpeg")),
    ]


def test_a_blocked_prompt_mid_stream_ends_it() -> None:
    reader = ResponseReader(model="m")
    with pytest.raises(ContentFilterError, match="SAFETY"):
        reader.read({"promptFeedback": {"blockReason": "SAFETY"}})


def test_retry_info_gives_the_wait() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"}],
        }
    }
    error = error_from_status(429, body)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 31
    assert "429 RESOURCE_EXHAUSTED: Quota exceeded" in str(error)
