"""The contract between the service's run parts: run statuses, strategies, and the event log.

A run is a job in the store (`runs` row): created `pending` with what a worker needs to run it
(`RunInput`), claimed by a worker with a lease (`running`), ended `success`, `error`,
`timeout` or `interrupted`. Every event it makes is appended to its event log (`run_events`),
numbered 1, 2, 3... in order: that number is the event's id on every stream of the run, so a
reader that reconnects with `Last-Event-ID` gets what it missed and then the live events,
from any replica. The worker running a run writes its events (`EventLog.writer`); readers
anywhere follow them (`EventLog.follow`). Events reach readers only once stored: an id a
client saw is never lost when its replica dies and another takes the run over.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from parley.agents.events import AgentEvent
from parley.errors import ServiceError, UserError
from parley.messages import Msg

__all__ = [
    "ACTIVE_STATUSES",
    "FINAL_STATUSES",
    "CancelAction",
    "EventLog",
    "EventRows",
    "EventWriter",
    "EventsExpiredError",
    "MultitaskStrategy",
    "OnDisconnect",
    "RunInput",
    "RunStatus",
    "UnknownEventIdError",
    "parse_last_event_id",
    "stop_if_cancelled",
]

T = TypeVar("T")

RunStatus = Literal["pending", "running", "success", "error", "timeout", "interrupted"]
"""Where a run is: waiting for a worker, running, or how it ended (LangGraph's names)."""
ACTIVE_STATUSES: frozenset[str] = frozenset({"pending", "running"})
FINAL_STATUSES: frozenset[str] = frozenset({"success", "error", "timeout", "interrupted"})

MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a new run does on a busy thread: refuse (409), wait its turn, stop the current run
keeping its partial answer, or stop it and remove its messages."""
OnDisconnect = Literal["cancel", "continue"]
"""What a stream's client going away does to its run."""
CancelAction = Literal["interrupt", "rollback"]
"""How a cancel ends a run: keep its partial answer, or remove the run and its messages."""


class RunInput(BaseModel):
    """What a worker needs to start a run, stored with it (`runs.input`).

    Exactly one of `message` (a new question) and `resume` (an approval's answer) is set, or
    neither: a run that continues its thread as stored (a takeover, a LangGraph run with no
    input).
    """

    model_config = ConfigDict(extra="forbid")

    message: Msg | None = None
    resume: tuple[str, bool | dict[str, bool]] | None = None
    """The interrupt's id and the verdict (one for all its calls, or per call id)."""
    history: list[Msg] = Field(default_factory=list)
    """The conversation before `message`, stored first when the thread holds none yet."""
    model: str | None = None
    """The model alias the request named (None: the agent's own)."""
    speak: bool = False


class EventsExpiredError(ServiceError):
    """The run's event log was dropped after its retention (410)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"the events of run {run_id!r} are no longer kept (PARLEY_EVENT_RETENTION); "
            "read the run or its thread instead",
            status_code=410,
        )


class UnknownEventIdError(ServiceError, UserError):
    """A `Last-Event-ID` that is not one of the run's events (400)."""

    def __init__(self, run_id: str, event_id: str) -> None:
        super().__init__(
            f"Last-Event-ID {event_id[:40]!r} is not an event of run {run_id!r}: send an id "
            "this run's stream gave, -1 for every event from the start, or none for live "
            "events only",
            status_code=400,
        )


@dataclass(frozen=True)
class EventRows:
    """A run's last events, stored with its end (`Store.end_run`), in its transaction.

    `rows` are `run_events` rows (`run_id`, `seq`, `data`, `created_at`). `notify`, on
    PostgreSQL: the doorbell (channel, payload) the end's statement sends at its commit.
    """

    rows: list[dict[str, Any]]
    notify: tuple[str, str] | None = None


class EventWriter(ABC):
    """Appends one run's events to its log, in order, as its worker makes them."""

    @abstractmethod
    def put(self, event: AgentEvent) -> int:
        """Queue `event` for the log; its id (the next number). Stored soon, in order."""

    @abstractmethod
    async def flush(self) -> int:
        """Wait until every queued event is stored and told to readers; the last id stored.

        Raises:
            Exception: The store failed (the events stay queued; flush again).
        """

    @abstractmethod
    async def close(self) -> None:
        """Flush, and let go of the run (its readers end after its `RunEnded`)."""

    async def end_with(
        self, tail: Sequence[AgentEvent], end: Callable[[EventRows | None], Awaitable[T]]
    ) -> T:
        """Store `tail` (the run's last events) and every event still queued with its end.

        `end(rows)` records the run's end and stores `rows` in the same transaction; its
        result is returned. A false result (fenced out) or an error stored nothing: the
        queued events are queued again and `tail` is forgotten (its ids given again).

        This default, for a log outside the store, records the end alone (`end(None)`),
        then queues `tail` after it (`close` stores it).
        """
        result = await end(None)
        if result is not False:
            for event in tail:
                self.put(event)
        return result


class EventLog(ABC):
    """Every run's events: written by the worker running it, followed by readers anywhere."""

    @abstractmethod
    async def writer(
        self, run_id: str, *, new: bool = False, fence: tuple[str, int] | None = None
    ) -> EventWriter:
        """A writer for the run, numbering on from what its log holds (a takeover goes on).

        `new`: the run's first start, whose log holds nothing yet (the writer starts at 1
        without reading it). `fence`: the worker's id and its attempt at the run; a log that
        can, stores the writer's events only while that worker holds the run (one that lost
        it must not take ids that are the new worker's).
        """

    @abstractmethod
    def follow(self, run_id: str, after: int | None) -> AsyncIterator[tuple[int, AgentEvent]]:
        """The run's events with their ids: those after `after`, then live ones as stored.

        `after=None`: live events only (from now); `0` (`Last-Event-ID: -1`): from the start.
        Ends after the run's `RunEnded`; ends at once for a run that ended and whose every
        event after `after` was given. The caller checks the run is the reader's.

        Raises:
            UnknownEventIdError: `after` is beyond the run's last event, when it ended.
            EventsExpiredError: The run's log was dropped (its retention passed).
        """

    async def check(self, run_id: str, after: int | None) -> int | None:
        """Raise now what `follow(run_id, after)` would raise when it starts, if anything.

        For a route to answer 400 or 410 before its stream starts. Returns the id `follow`
        would read on from (`after`, or for None the log's last id now) when the log knows
        it. This default checks nothing (`follow` still raises) and knows nothing (None).
        """
        return None

    @abstractmethod
    async def sweep(self, retention: float) -> int:
        """Drop the logs of runs that ended over `retention` seconds ago; how many."""

    async def close(self) -> None:  # noqa: B027 - most logs hold nothing to close
        """Stop listening and free connections."""


def parse_last_event_id(run_id: str, header: str | None) -> int | None:
    """The `after` to follow from, for a `Last-Event-ID` header (None: live only).

    Raises:
        UnknownEventIdError: Not an id this service gives (a number) nor -1.
    """
    if header is None:
        return None
    text = header.strip()
    if text == "-1":
        return 0
    if text.isdigit() and len(text) <= 18:
        return int(text)
    raise UnknownEventIdError(run_id, header)


def stop_if_cancelled() -> None:
    """Raise CancelledError if the current task was asked to stop; call it in `except`.

    A cancel that lands inside a database driver's call can come out as the driver's own
    error (the cancel swallowed): a loop that catches errors to try again would then go on
    after its `close()`, which waits for it for ever.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
