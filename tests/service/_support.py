"""Helpers the service's behaviour tests share: SSE frames, bounded waits, the runs of a thread.

Waits are loops with deadlines (never one long sleep): they return as soon as the condition
holds and fail with what they were waiting for.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy import select

from parley.service.runs import RunHandle
from parley.service.state import ServiceState
from parley.service.store import RunRecord, Store
from parley.service.store.tables import runs

__all__ = ["DONE", "frames", "run_records", "wait_for", "wait_for_run"]

T = TypeVar("T")

DONE = "[DONE]"


def frames(body: str) -> list[Any]:
    """The frames of an SSE body: each `data:` JSON parsed, `[DONE]` as the string.

    Fails on anything the protocol does not allow: comments, `event:` lines, pings.
    """
    out: list[Any] = []
    for chunk in body.split("\n\n"):
        if not chunk:
            continue
        assert chunk.startswith("data: "), f"not a data frame: {chunk!r}"
        assert "\n" not in chunk, f"a frame of several lines: {chunk!r}"
        data = chunk.removeprefix("data: ")
        out.append(DONE if data == DONE else json.loads(data))
    assert body.endswith("\n\n"), "the stream does not end with a blank line"
    return out


async def wait_for(
    check: Callable[[], Awaitable[T | None]] | Callable[[], T | None],
    what: str,
    *,
    timeout: float = 5.0,
    interval: float = 0.01,
) -> T:
    """Poll `check` (sync or async) until it returns a truthy value; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(interval)


async def wait_for_run(state: ServiceState, *, timeout: float = 5.0) -> RunHandle:
    """The one run active in this process, as soon as there is one."""
    return await wait_for(
        lambda: next(iter(state.runs.active.values()), None), "a run to start", timeout=timeout
    )


async def run_records(store: Store, thread_id: str) -> list[RunRecord]:
    """A thread's runs, oldest first (the store has no listing of its own)."""
    query = select(runs.c.id, runs.c.user_id).where(runs.c.thread_id == thread_id)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    records = [await store.get_run(row.id, row.user_id) for row in rows]
    found = [r for r in records if r is not None]
    return sorted(found, key=lambda r: r.started_at)
