"""Threads for sync tools, apart from asyncio's default executor.

Sync tools used to run on `asyncio.to_thread`, the loop's default pool (`min(32, cpus + 4)`
threads: 6 on two cores). Sixteen sync tools in one round then took three tool-times, and a
tool that hung kept its thread for good, starving everything else that used `to_thread` (the
service's own work and the code interpreter included).

`ToolExecutor` gives tools threads of their own:

- **Sized to the round.** A call starts a thread when no idle one is free, up to
  `max_workers`, so the calls of one round run together; threads idle for `idle_seconds`
  end, so a quiet process keeps none.
- **A timed-out call gives its thread up.** When its caller stops waiting (the tool's timeout,
  a cancelled run), a call still running is *abandoned*: its thread no longer counts against
  `max_workers` (a new one takes its place) and ends when the call returns. Threads are
  daemons, so an abandoned call never holds up the process's exit.
- **Bounded.** At most `max_abandoned` abandoned calls may be running at once; past that a new
  call is refused with `ToolError` rather than growing threads without end.
- **A call can be told to stop.** `run_interruptible` is for a tool that can stop its work
  (the code interpreter interrupts its cell): when the awaiting task is cancelled (a run
  cancelled), it calls the tool's `interrupt` and waits up to `grace` seconds for the call
  to return, then returns what it returned, so the tool's `acall` can report what happened
  ("stopped by cancel", with the output so far) and the agent loop records that result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from parley.errors import ToolError

__all__ = ["ToolExecutor", "run_in_tool_thread", "run_interruptible", "tool_executor"]

T = TypeVar("T")

logger = logging.getLogger("parley.tools")


@dataclass(eq=False)
class _Job:
    run: Callable[[], Any]
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    abandoned: bool = False


class ToolExecutor:
    """A growing, bounded pool of daemon threads for sync tool calls.

    Args:
        max_workers: Calls running at once (more wait for a thread).
        max_abandoned: Abandoned calls (their caller stopped waiting) that may still be
            running before new calls are refused.
        idle_seconds: How long an idle thread waits for work before it ends.
    """

    def __init__(
        self, max_workers: int = 64, *, max_abandoned: int = 64, idle_seconds: float = 30.0
    ) -> None:
        if max_workers < 1 or max_abandoned < 0:
            raise ValueError("max_workers must be at least 1 and max_abandoned not negative")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self.idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0  # threads counted against max_workers
        self._idle = 0  # of those, the ones waiting for a job
        self._queued = 0  # jobs put and not yet taken
        self._abandoned = 0  # abandoned jobs still running

    @property
    def threads(self) -> int:
        """Threads counted against `max_workers` now (abandoned ones are not)."""
        return self._workers

    @property
    def abandoned(self) -> int:
        """Abandoned calls still running."""
        return self._abandoned

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> _Job:
        """Queue a call (in a copy of the caller's context); start a thread if none is free.

        Raises:
            ToolError: Too many abandoned calls are still running.
        """
        context = contextvars.copy_context()
        job = _Job(lambda: context.run(fn, *args, **kwargs))
        with self._lock:
            if self._abandoned >= self.max_abandoned:
                raise ToolError(
                    f"{self._abandoned} sync tool calls are still running after their callers "
                    "stopped waiting (timed out or cancelled); no more are started until "
                    "they end"
                )
            self._queued += 1
            self._jobs.put(job)
            self._grow()
        return job

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on a tool thread and await it.

        If the await is cancelled (a timeout) while the call runs, the call is abandoned.
        """
        job = self.submit(fn, *args, **kwargs)
        try:
            result: T = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._abandon(job)
            raise
        return result

    async def run_interruptible(
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        interrupt: Callable[[], None],
        grace: float,
        **kwargs: Any,
    ) -> T:
        """Run `fn` on a tool thread; if the await is cancelled, interrupt it and wait for it.

        On cancellation `interrupt()` is called (on the event loop's thread: it must return
        at once, and be safe against the call running in its thread), then the call is
        awaited up to `grace` seconds more and its result returned: the cancellation is
        answered by what the call did. A call that has not started is dropped, and one that
        does not return in time is abandoned; both raise `CancelledError`.
        """
        job = self.submit(fn, *args, **kwargs)
        done = asyncio.wrap_future(job.future)
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if job.future.cancel():  # not started: it never will
                raise
        interrupt()
        try:
            async with asyncio.timeout(grace):
                return await asyncio.shield(done)
        except (TimeoutError, asyncio.CancelledError):
            self._abandon(job)
            raise asyncio.CancelledError from None

    # -- inside -----------------------------------------------------------------------------

    def _grow(self) -> None:
        """Start a thread when the queued jobs outnumber the idle threads (lock held)."""
        if self._queued > self._idle and self._workers < self.max_workers:
            self._workers += 1
            threading.Thread(target=self._work, name="parley-tool", daemon=True).start()

    def _abandon(self, job: _Job) -> None:
        # Not started yet: it never will (the worker skips cancelled futures).
        if job.future.cancel():
            return
        with self._lock:
            if job.future.done() or job.abandoned:
                return
            job.abandoned = True
            self._workers -= 1
            self._abandoned += 1
            self._grow()  # a call waiting behind it gets a thread
        logger.warning(
            "a sync tool call is still running after its caller stopped waiting; its thread "
            "is left to finish (%d such calls now)",
            self._abandoned,
        )

    def _work(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                result = job.run()
            except BaseException as exc:  # the tool's, handed to its caller
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            with self._lock:
                if job.abandoned:
                    self._abandoned -= 1
                    return  # another thread took this one's place already

    def _next_job(self) -> _Job | None:
        """The next job, or None when idle too long (the thread then ends)."""
        while True:
            with self._lock:
                self._idle += 1
            try:
                job = self._jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    # A job put while this thread gave up counted it as idle: stay for it.
                    if self._queued > self._idle:
                        continue
                    self._workers -= 1
                    return None
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            return job


_default: ToolExecutor | None = None
_default_lock = threading.Lock()


def tool_executor() -> ToolExecutor:
    """The process-wide executor that sync tools run on."""
    global _default  # noqa: PLW0603  (one per process, made on first use)
    with _default_lock:
        if _default is None:
            _default = ToolExecutor()
        return _default


async def run_in_tool_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking call on the tools' own threads (not asyncio's default pool)."""
    return await tool_executor().run(fn, *args, **kwargs)


async def run_interruptible(
    fn: Callable[..., T],
    /,
    *args: Any,
    interrupt: Callable[[], None],
    grace: float,
    **kwargs: Any,
) -> T:
    """`run_in_tool_thread` for a call that can be stopped (`ToolExecutor.run_interruptible`)."""
    return await tool_executor().run_interruptible(
        fn, *args, interrupt=interrupt, grace=grace, **kwargs
    )
