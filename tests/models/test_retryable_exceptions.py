"""A provider's `_get_retryable_exceptions` decides what the base's retry loop retries.

AgentScope's model bases retry exactly the exception classes a provider lists in that hook
(seed 003); parley's `ChatModel`, `EmbeddingModel` and `TTSModel` do the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

import pytest

from parley.embeddings import EmbeddingBatch, EmbeddingModel, EmbeddingParameters
from parley.errors import ModelConnectionError, ModelHTTPError
from parley.messages import Msg
from parley.models.accumulator import Delta, TextDelta
from parley.models.base import ChatModel, ChatRequest
from parley.models.retry import DEFAULT_RETRYABLE, Retryable, RetryPolicy, call_with_retries


class SDKRateLimitError(Exception):
    """A provider SDK's own rate-limit error, which parley's adapters do not map."""


class _Failing(ChatModel):
    """Raises the given errors in order, then answers 'ok'."""

    provider: ClassVar[str] = "failing"

    def __init__(self, failures: list[Exception]) -> None:
        super().__init__(None, "failing", max_retries=3)
        self.retry = RetryPolicy(max_retries=3, initial_delay=0.001, max_delay=0.002)
        self.failures = failures
        self.calls = 0

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        yield TextDelta("ok")


class _RetriesItsSDKErrors(_Failing):
    @classmethod
    def _get_retryable_exceptions(cls) -> Retryable:
        return (*super()._get_retryable_exceptions(), SDKRateLimitError)


class _RetriesNothing(_Failing):
    @classmethod
    def _get_retryable_exceptions(cls) -> Retryable:
        return ()


def test_the_default_is_parleys_transient_errors() -> None:
    assert ChatModel._get_retryable_exceptions() == DEFAULT_RETRYABLE
    assert EmbeddingModel._get_retryable_exceptions() == DEFAULT_RETRYABLE


async def test_an_unlisted_error_is_not_retried() -> None:
    model = _Failing([SDKRateLimitError("slow down")])
    with pytest.raises(SDKRateLimitError):
        await model.chat([Msg.user("x")])
    assert model.calls == 1


async def test_a_listed_error_is_retried_by_chat() -> None:
    model = _RetriesItsSDKErrors([SDKRateLimitError("slow down"), SDKRateLimitError("again")])
    response = await model.chat([Msg.user("x")])
    assert response.text == "ok"
    assert model.calls == 3


async def test_a_listed_error_is_retried_before_a_streams_first_chunk() -> None:
    model = _RetriesItsSDKErrors([SDKRateLimitError("slow down")])
    chunks = [chunk async for chunk in model.chat_stream([Msg.user("x")])]
    assert chunks[-1].text == "ok"
    assert model.calls == 2


async def test_an_empty_tuple_retries_nothing_not_even_parleys_own() -> None:
    model = _RetriesNothing([ModelConnectionError("reset")])
    with pytest.raises(ModelConnectionError):
        await model.chat([Msg.user("x")])
    assert model.calls == 1
    streaming = _RetriesNothing([ModelConnectionError("reset")])
    with pytest.raises(ModelConnectionError):
        _ = [chunk async for chunk in streaming.chat_stream([Msg.user("x")])]
    assert streaming.calls == 1


async def test_a_listed_http_error_keeps_the_status_rule() -> None:
    model = _RetriesItsSDKErrors([ModelHTTPError(400)])
    with pytest.raises(ModelHTTPError):
        await model.chat([Msg.user("x")])
    assert model.calls == 1  # a 400 fails the same way every time


async def test_call_with_retries_takes_the_classes() -> None:
    failures: list[Exception] = [KeyError("x")]

    async def call() -> str:
        if failures:
            raise failures.pop(0)
        return "done"

    policy = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.001)
    assert await call_with_retries(policy, call, retry_on=(KeyError,)) == "done"


class _Embedder(EmbeddingModel[str]):
    provider: ClassVar[str] = "flaky-embed"

    def __init__(self, failures: list[Exception]) -> None:
        super().__init__(None, "flaky-embed", max_retries=2, retry_delay=0.001)
        self.failures = failures
        self.calls = 0

    @classmethod
    def _get_retryable_exceptions(cls) -> Retryable:
        return (SDKRateLimitError,)

    async def _call_api(self, batch: list[str], parameters: EmbeddingParameters) -> EmbeddingBatch:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return EmbeddingBatch([[1.0, 0.0] for _ in batch])


async def test_an_embedding_provider_hook_is_honoured() -> None:
    model = _Embedder([SDKRateLimitError("slow down")])
    response = await model(["a"])
    assert model.calls == 2
    assert len(response.embeddings) == 1
