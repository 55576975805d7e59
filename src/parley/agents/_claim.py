"""Which run holds a memory, and the runs being closed because their consumer left them.

A run holds its memory from its first step to its end (`AgentRun`): a second run on it
meanwhile is a usage mistake, refused with `UserError`. A run whose `async for` was left
early (a `break`, a `return`, an exception in the loop's body) is closed at once, in a task
(`close_soon`), as `aclose()` would close it; a run that starts on its memory meanwhile waits
for that closing, which ends with the claim, instead of being refused. Without this, the
claim lasted until the garbage collector found the abandoned run (a run and its event
generator refer to each other).

Runs are told apart by a key of their own, not by their run id: a caller may give two runs
one id (attempts of one run, `Agent.continue_stream(run_id=...)`), and one's closing must not
pass for the other's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from parley.errors import UserError

if TYPE_CHECKING:
    from parley.agents.memory import Memory

__all__ = ["claim", "close_soon", "closing", "release"]

_lock = threading.Lock()  # runs on one memory may start from different loops' threads
_closing: dict[str, concurrent.futures.Future[None]] = {}
"""The runs being closed, by key: done once the run's clean-up (and its claim) ended."""
_tasks: set[asyncio.Task[None]] = set()
"""The closing tasks under way, kept referenced until they end."""


async def claim(memory: Memory, run_id: str, key: str) -> None:
    """Take `memory` for the run `run_id` (keyed `key`) once a run closing on it has let go.

    Raises:
        UserError: A run still going holds the memory.
    """
    while True:
        with _lock:
            holder = memory.active_run
            if holder is None:
                memory.active_run = run_id
                memory.active_key = key
                return
            ending = _closing.get(memory.active_key or holder)
        if ending is None:
            raise UserError(
                f"{memory!r} is in use by run {holder}: one run at a time on a memory. Await "
                "that run first, or give each concurrent conversation its own memory "
                "(`agent.reply(..., memory=InMemoryMemory())`)"
            )
        # Shielded: a cancelled waiter must not cancel the closing others wait for.
        await asyncio.shield(asyncio.wrap_future(ending))


def release(memory: Memory, key: str) -> None:
    """Give `memory` up, if the run of that key holds it."""
    with _lock:
        if memory.active_key == key:
            memory.active_run = None
            memory.active_key = None


def closing(key: str) -> concurrent.futures.Future[None] | None:
    """The closing of the run of that key under way (see `close_soon`), if any."""
    with _lock:
        return _closing.get(key)


def close_soon(key: str, events: AsyncGenerator[Any, None]) -> None:
    """Close a run's events (its clean-up, which releases its memory) in a task, now.

    Called where its consumer left it, on the loop it runs on. Off a loop (the consumer
    collected in another thread) nothing is done here: asyncio's own finalizer closes the
    generator on its loop when it is collected.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    with _lock:
        _closing[key] = done
    task = loop.create_task(_close(events))
    _tasks.add(task)

    def finished(task: asyncio.Task[None]) -> None:
        _tasks.discard(task)
        with _lock:
            _closing.pop(key, None)
        done.set_result(None)

    task.add_done_callback(finished)


async def _close(events: AsyncGenerator[Any, None]) -> None:
    # The run's own clean-up keeps what it must (a partial answer) and logs nothing more to
    # say: its consumer has gone, so a failure while closing has no one to go to.
    with contextlib.suppress(Exception):
        await events.aclose()
