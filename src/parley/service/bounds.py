"""What a request may cost: the size of its body and messages, and how long a stream waits.

- **Bodies.** `limit_body` wraps a request's `receive` so that a body over
  `max_body_bytes` is refused with 413 as it arrives: at once when its `Content-Length`
  says so, else as soon as the bytes read pass the limit (a chunked body too). The refusal is
  a `BodyTooLarge` (an `HTTPException`), which FastAPI re-raises from its body reading, so the
  app's own handlers answer it: `{"detail": ...}`, OpenAI's shape on `/v1`. The server throws
  away what the client still sends (uvicorn does, once the answer is out) and keeps the
  connection, so the client reads the 413 rather than a reset.
- **Messages.** `check_messages` refuses a message longer than `max_message_chars` (its
  text, tool calls' arguments, tool results; media weigh against the body's limit).
- **Slow readers.** A stream that waits longer than `send_timeout` for the client to take a
  frame, or whose run gets `stream_buffer_bytes` ahead of it (`runs.RunHandle`), drops the
  client: `ClientConnection.abort` closes its connection at once, dropping what was written
  but not yet sent. Closing it as servers do (after sending what is buffered) would hold the
  connection for as long as the client does not read. The app keeps the server's own `send`
  for this in the request's scope (`CONNECTION`); with uvicorn, its transport is aborted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope, Send

from parley.messages import Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock

__all__ = [
    "CONNECTION",
    "BodyTooLarge",
    "ClientConnection",
    "ClientTooSlow",
    "TimedStream",
    "check_messages",
    "limit_body",
    "message_chars",
]

log = logging.getLogger("parley.service")

CONNECTION = "parley.connection"
"""The scope key of the request's `ClientConnection`."""


class BodyTooLarge(HTTPException):
    """A request body over the service's limit (413)."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        size = f"{declared} bytes" if declared is not None else "more"
        super().__init__(
            413,
            f"the request body is too large: {size}, and this service takes at most {limit} "
            "bytes (PARLEY_MAX_BODY_BYTES sets the limit)",
        )


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses such a request before the app sees it
    return None


def limit_body(scope: Scope, receive: Receive, limit: int) -> Receive:
    """`receive`, raising `BodyTooLarge` before a body over `limit` bytes is read whole."""
    declared = _declared_length(scope)
    received = 0

    async def limited() -> Message:
        nonlocal received
        if declared is not None and declared > limit:
            raise BodyTooLarge(limit, declared)  # before reading a byte of it
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
        return message

    return limited


def message_chars(msg: Msg) -> int:
    """How many characters a message holds: its text, thinking, calls' arguments, results."""
    total = 0
    for block in msg.content:
        if isinstance(block, TextBlock | ToolResultBlock):
            total += len(block.text)
        elif isinstance(block, ThinkingBlock):
            total += len(block.thinking)
        elif isinstance(block, ToolCallBlock):
            total += len(block.raw_input or json.dumps(block.input, ensure_ascii=False))
    return total


def check_messages(msgs: Iterable[Msg], limit: int, where: tuple[str, ...]) -> None:
    """Refuse a request with a message too long (checked before anything is stored).

    Raises:
        RequestValidationError: A message holds more than `limit` characters (422, at `where`).
    """
    for msg in msgs:
        chars = message_chars(msg)
        if chars > limit:
            raise RequestValidationError(
                [
                    {
                        "loc": where,
                        "msg": f"a message holds at most {limit} characters, and a {msg.role} "
                        f"message here holds {chars} (PARLEY_MAX_MESSAGE_CHARS sets the limit)",
                        "type": "string_too_long",
                        "input": None,
                    }
                ]
            )


class ClientConnection:
    """The connection a request came on, as far as the app can reach it: to drop it.

    Args:
        send: The server's own `send` for the request (before any middleware wraps it):
            with uvicorn, a method of its request cycle, which holds the transport.
    """

    def __init__(self, send: Send) -> None:
        owner = getattr(send, "__self__", None)
        transport: Any = getattr(owner, "transport", None)
        usable = all(callable(getattr(transport, name, None)) for name in ("abort", "is_closing"))
        self._transport = transport if usable else None

    @property
    def can_abort(self) -> bool:
        """Whether `abort` drops the connection itself (else the server closes it its way)."""
        return self._transport is not None

    def abort_now(self) -> None:
        """Close the connection now, unsent data dropped (the server hears of it soon after).

        A response waiting for the client to take data gives up then (the server sees a
        client gone), so a stream blocked on a client that does not read ends too.
        """
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    async def abort(self) -> None:
        """Close the connection now, unsent data dropped; then let the server notice."""
        self.abort_now()
        # The transport tells the server at the loop's next turn: once it has, the server
        # takes the unfinished response as the client's leaving, not as the app's mistake.
        await asyncio.sleep(0)
        await asyncio.sleep(0)


class ClientTooSlow(Exception):  # noqa: N818 - what the client is
    """The client took no frame for the send timeout."""


class TimedStream(StreamingResponse):
    """Server-sent events to a client that must keep up: each send bounded by `send_timeout`.

    A send that waits longer raises `ClientTooSlow` out of the response, for the subclass's
    `__call__` to drop the client (`ClientConnection.abort`).
    """

    def __init__(
        self, frames: AsyncIterator[str], *, send_timeout: float, headers: dict[str, str]
    ) -> None:
        super().__init__(frames, media_type="text/event-stream", headers=headers)
        self.send_timeout = send_timeout

    def _too_slow(self) -> None:
        """What to do the moment a send times out, before the frames' generator closes."""

    async def stream_response(self, send: Send) -> None:
        """Send the response, each send bounded by `send_timeout`."""

        async def timed(message: Message) -> None:
            try:
                async with asyncio.timeout(self.send_timeout):
                    await send(message)
            except TimeoutError:
                self._too_slow()
                raise ClientTooSlow(
                    f"no frame taken for {self.send_timeout:g}s (PARLEY_SEND_TIMEOUT)"
                ) from None

        await super().stream_response(timed)

    async def _close_frames(self) -> None:
        # Now rather than whenever the collector gets to it: a generator's `finally` (a run's,
        # a model call's) stops what the client left.
        close = getattr(self.body_iterator, "aclose", None)
        if close is not None:
            await close()
