"""When and how long to wait before trying a failed model call again.

Retried: connection errors, timeouts, and HTTP 408, 409, 429 and 5xx, waiting what the
provider's `Retry-After` asked when it said, else an exponential backoff with jitter. Never
retried: 400, 401, 403, 404, 422, content filtering and context length, which fail the same
way every time.

Which kinds of error are retried at all is the model's to say, as in AgentScope: its
`_get_retryable_exceptions()` (a classmethod of `ChatModel`, `EmbeddingModel` and
`TTSModel`) returns the exception classes, `DEFAULT_RETRYABLE` unless a provider overrides
it. An HTTP error among them is still retried only for the statuses above; any other listed
exception is retried as it is (a provider SDK's own rate-limit error, say). A provider that
returns `()` retries nothing.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from parley.errors import (
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)

__all__ = [
    "DEFAULT_RETRYABLE",
    "RETRYABLE_STATUS",
    "RetryPolicy",
    "Retryable",
    "call_with_retries",
    "retry_wait",
]

logger = logging.getLogger("parley.models")

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Statuses below 500 worth another try: timeout, conflict, rate limit."""

T = TypeVar("T")

Retryable = tuple[type[BaseException], ...]
"""The exception classes a model's calls are retried on."""

DEFAULT_RETRYABLE: Retryable = (ModelConnectionError, ModelTimeoutError, ModelHTTPError)
"""What parley's providers retry: lost connections, timeouts, and HTTP errors (by status)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, honouring `Retry-After`.

    Args:
        max_retries: Tries after the first; 0 disables retrying.
        initial_delay: The first wait, in seconds, before jitter.
        max_delay: The longest wait the backoff grows to.
        max_retry_after: The longest `Retry-After` honoured; longer asks fail at once.
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 120.0

    def retryable(self, error: BaseException, retry_on: Retryable = DEFAULT_RETRYABLE) -> bool:
        """Whether a failure of this kind may pass on another try.

        Args:
            error: The failure.
            retry_on: The exception classes retried (the model's `_get_retryable_exceptions()`).
        """
        if not isinstance(error, retry_on):
            return False
        if isinstance(error, ModelHTTPError):
            status = error.status_code
            if status in RETRYABLE_STATUS or status >= 500:
                return error.retry_after is None or error.retry_after <= self.max_retry_after
            return False
        return True

    def delay(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait before try `attempt + 1` (`attempt` counts from 1)."""
        if isinstance(error, ModelHTTPError) and error.retry_after is not None:
            return max(0.0, error.retry_after)
        ceiling = min(self.max_delay, self.initial_delay * 2 ** (attempt - 1))
        # "Full jitter": spreads clients that failed together over the whole window.
        return random.uniform(ceiling / 2, ceiling)


def retry_wait(
    policy: RetryPolicy,
    attempt: int,
    error: BaseException,
    *,
    describe: str,
    retry_on: Retryable = DEFAULT_RETRYABLE,
) -> float | None:
    """Seconds to wait before trying again after try `attempt` failed (logged); None: give up."""
    if attempt > policy.max_retries or not policy.retryable(error, retry_on):
        return None
    wait = policy.delay(attempt, error)
    logger.warning(
        "%s failed (%s); retry %d of %d in %.2fs",
        describe,
        error,
        attempt,
        policy.max_retries,
        wait,
    )
    return wait


async def call_with_retries(
    policy: RetryPolicy,
    call: Callable[[], Awaitable[T]],
    *,
    describe: str = "model call",
    retry_on: Retryable = DEFAULT_RETRYABLE,
) -> T:
    """Await `call()`, trying again on failures of the `retry_on` kinds as `policy` says."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as error:
            wait = retry_wait(policy, attempt, error, describe=describe, retry_on=retry_on)
            if wait is None:
                raise
            await asyncio.sleep(wait)
