"""Middleware: something that transforms a run's stream of events on its way to the caller.

A middleware has one method, `wrap(events, run)`: it takes the run's events (an async
iterator) and returns the events the caller sees, adding, changing or holding some back.
`parley.agents.speech.TTSMiddleware` is one: it adds the answer's audio.

Give an agent its middleware for every run, `Agent(..., middleware=[...])`, or one run its
own, `agent.stream(...).use(middleware)` before iterating (the service does, for a request
that asks for speech). The first middleware listed sees the run's own events; each next one
sees what the one before it made, and the caller sees the last one's.

Closing: when the caller stops early (`run.aclose()`, a cancelled task), the outermost
stream is closed, and each middleware must close the stream it wraps (an async generator
that iterates it under `contextlib.aclosing` does), and release what it holds (a voice's
connection). The run closes its own stream afterwards in any case, so the run's clean-up
(keeping a partial answer, freeing its memory) never depends on a middleware getting it
right. A middleware should not swallow `RunEnded`: callers wait for it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from parley.agents.events import AgentEvent
from parley.errors import UserError

if TYPE_CHECKING:
    from parley.agents.run import AgentRun

__all__ = ["Middleware", "check_middleware", "through"]


@runtime_checkable
class Middleware(Protocol):
    """Transforms a run's events: `wrap(events, run)` returns what the caller sees."""

    def wrap(self, events: AsyncIterator[AgentEvent], run: AgentRun) -> AsyncIterator[AgentEvent]:
        """The events the caller sees, made from `events` (the run's, or the one before's).

        Close `events` when closed early (see the module's docstring).
        """
        ...


def check_middleware(middleware: Sequence[object]) -> list[Middleware]:
    """`middleware` as a list, each checked to have a `wrap` method.

    Raises:
        UserError: An item is not a middleware.
    """
    out: list[Middleware] = []
    for item in middleware:
        if not isinstance(item, Middleware):
            raise UserError(
                f"middleware must have a wrap(events, run) method, got {type(item).__name__}"
            )
        out.append(item)
    return out


async def through(
    events: AsyncGenerator[AgentEvent, None], middleware: Sequence[Middleware], run: AgentRun
) -> AsyncGenerator[AgentEvent, None]:
    """`events` passed through each of `middleware` in turn, closed together when closed."""
    stream: AsyncIterator[AgentEvent] = events
    for item in middleware:
        stream = item.wrap(stream, run)
    try:
        async for event in stream:
            yield event
    finally:
        try:
            close = getattr(stream, "aclose", None)
            if close is not None and stream is not events:
                await close()
        finally:
            await events.aclose()  # the run's own clean-up, whatever the middleware did
