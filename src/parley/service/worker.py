"""A process's run worker: takes queued runs, and keeps the leases of the runs it holds.

Every `parley serve` process runs one beside its HTTP routes (taking up to `run_concurrency`
runs from the queue; 0 takes none), and `parley worker` runs one alone: the same settings,
agents and database, no HTTP. The worker polls the store for runs to take (`pending` runs
whose thread is free, and runs whose worker's lease ran out: a takeover) every
`POLL_SECONDS`, and at once when a run of this process ends (its thread may have a run
waiting). It renews the leases of its runs every third of `lease_seconds`; a run whose
lease it lost (taken over elsewhere) is stopped here.

A run made by a request in this process is tried at once by `RunManager.submit` (no poll's
delay); the poll is for the rest: runs made elsewhere, enqueued runs whose turn came, and
runs of dead processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from parley.service.runs import RunManager
from parley.service.runs_protocol import stop_if_cancelled

__all__ = ["POLL_SECONDS", "RunWorker"]

log = logging.getLogger("parley.service")

POLL_SECONDS = 0.5
"""How often a worker looks for runs to take when nothing wakes it sooner."""


class RunWorker:
    """Takes runs from the queue for a `RunManager`, and renews its leases (see the module).

    Args:
        manager: The process's runs.
        poll_seconds: How often to look for runs when nothing wakes the worker.
    """

    def __init__(self, manager: RunManager, *, poll_seconds: float = POLL_SECONDS) -> None:
        self.manager = manager
        self.poll_seconds = poll_seconds
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start polling and renewing (in tasks of the running loop)."""
        self._tasks = [
            asyncio.create_task(self._poll(), name="parley-run-worker"),
            asyncio.create_task(self._renew(), name="parley-run-leases"),
        ]

    async def _poll(self) -> None:
        wake = self.manager.wake
        while True:
            wake.clear()
            try:
                await self.manager.poll_once()
            except Exception:  # the database blinked: the next round tries again
                stop_if_cancelled()
                log.warning("the run worker could not poll the queue", exc_info=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_seconds):
                    await wake.wait()

    async def _renew(self) -> None:
        every = self.manager.queue.lease_seconds / 3
        while True:
            await asyncio.sleep(every)
            try:
                await self.manager.renew()
            except Exception:
                stop_if_cancelled()
                log.exception("the run worker could not renew its leases")

    async def close(self) -> None:
        """Stop polling and renewing (the runs themselves are the manager's to stop)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
