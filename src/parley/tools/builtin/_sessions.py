"""The code interpreter's sessions: one worker per conversation, reaped when idle.

A session is one user's thread (`RunContext.session_key`): its work directory, the thread's
directory in the workspace, and while it is live a worker process holding its variables. The
pool keeps at most `max_sessions` workers alive and stops those idle for `idle_timeout`
seconds, least recently used first; a stopped session keeps its files, and its next call
starts a new worker and says that the earlier state is gone (as after a crash). Reaping runs
before any worker starts, and from a timer armed only while sessions exist and cancelled on
`close()`: no thread outlives what it watches. A busy session (a call running) is never
reaped; when every live session is busy, a new one is refused rather than over the cap.

A call may be cancelled (`Cancellation`, from any thread): one waiting for its session does
not start, and a running one is interrupted (see `WorkerProcess.request`). Its `Execution`
then says "Stopped by cancel" (`STOPPED`), with the output the cell had made; a cell killed
because it did not stop loses the session's state, and the next call says so.

Each session holds its limits as a session (`_limits.SessionBox`): its uid, its cgroup and a
watch over its worker, from its first worker until it ends. A call runs inside the box's
`cell`: its file-size allowance (what remains of the disk quota) goes to the worker, and
what the watch did comes back. A call past a limit of the session ("Stopped: ... which
limit"), past its wall time ("Timeout: ...") or cancelled ("Stopped by cancel") keeps the
output the cell had made.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from parley.errors import ConfigurationError
from parley.messages import ImageBlock, OutputBlock, TextBlock
from parley.tools.base import ToolOutput
from parley.tools.builtin._limits import Cell, Enforcement, SessionBox, SessionLimitError
from parley.tools.builtin._process import (
    Cancellation,
    WorkerGoneError,
    WorkerProcess,
    WorkerTimeoutError,
)
from parley.tools.builtin._protocol import CellReply
from parley.tools.builtin.sandbox import SandboxLimits, SandboxMode

__all__ = ["STOPPED", "Execution", "Session", "SessionPool"]

_LOST_NOTES = 4096  # how many stopped sessions' reasons are remembered for their next call


@dataclass
class Execution:
    """What one call of the interpreter produced.

    Attributes:
        stdout: What the code printed (also from C code and child processes).
        stderr: What it wrote to standard error.
        error: The traceback of an exception the code raised, or why the run was stopped.
        result: The repr of the cell's last expression, as a notebook shows it.
        images: PNG images of the matplotlib figures the code left open.
        files: Files created or changed in the work directory, relative to it.
        notice: What happened to the session (a restart, and why).
        sandbox: The sandbox mode the code ran in.
    """

    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    result: str | None = None
    images: list[bytes] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    notice: str | None = None
    sandbox: SandboxMode = "rlimits"

    def add_notice(self, note: str) -> None:
        """Add a line to the notice."""
        self.notice = f"{self.notice}\n{note}" if self.notice else note

    def to_text(self) -> str:
        """The run as the model reads it (Qwen-Agent's section names)."""
        parts = [self.notice] if self.notice else []
        for title, text in (
            ("stdout", self.stdout),
            ("stderr", self.stderr),
            ("error", self.error),
            ("execute_result", self.result),
        ):
            if text and text.strip():
                parts.append(f"{title}:\n\n```\n{text.rstrip()}\n```")
        if self.files:
            parts.append("files written in the work directory: " + ", ".join(self.files))
        if self.images:
            parts.append(f"{len(self.images)} image(s) attached.")
        return "\n\n".join(parts) or "Finished execution."

    def to_output(self) -> ToolOutput:
        """Text alone, or the text followed by the images."""
        if not self.images:
            return self.to_text()
        blocks: list[OutputBlock] = [TextBlock(text=self.to_text())]
        blocks.extend(ImageBlock.from_bytes(png, "image/png") for png in self.images)
        return blocks


def _restart_notice(reason: str) -> str:
    return (
        f"Note: the interpreter was restarted because {reason}; variables, imports and "
        "definitions from earlier calls are gone (files remain)."
    )


STOPPED = "Stopped by cancel: the run was cancelled while this code ran"
"""How the error of a cancelled call begins."""
_STOPPED_BEFORE = (
    "Stopped by cancel: the run was cancelled before this code started; it did not run."
)
_CANCEL_POLL = 0.2  # how often a call waiting for its session's lock looks for a cancel


def _interrupted(reply: CellReply) -> str:
    if reply.error is None:
        return f"{STOPPED}, as it finished; it ran to its end."
    return (
        f"{STOPPED}; it was interrupted (KeyboardInterrupt), and the interpreter keeps its "
        f"state.\n{reply.error}"
    )


class Session:
    """One conversation's work directory and, while live, its worker.

    Args:
        key: The conversation's key (user and thread).
        work_dir: Its directory.
        mode: The sandbox mode its worker runs in.
        lost: Why an earlier worker of this conversation was stopped, if one was.
        box: Its limits as a session (uid, cgroup, watch: `_limits`).
    """

    def __init__(
        self, key: str, work_dir: Path, mode: SandboxMode, lost: str | None, box: SessionBox
    ) -> None:
        self.key = key
        self.work_dir = work_dir
        self.mode = mode
        self.box = box
        self.lock = threading.Lock()
        self.worker: WorkerProcess | None = None
        self.lost = lost
        self.last_used = time.monotonic()
        self.removed = False  # reaped or ended: the pool holds another Session for the key
        self.ended = False  # the conversation was deleted

    @property
    def live(self) -> bool:
        """Whether its worker is running."""
        return self.worker is not None and self.worker.alive

    def _acquire(self, cancel: Cancellation | None) -> bool:
        """Take the lock (a call before this one may hold it); False if cancelled meanwhile."""
        while not self.lock.acquire(timeout=_CANCEL_POLL):
            if cancel is not None and cancel.requested:
                return False
        return True

    def run(
        self,
        code: str,
        limits: SandboxLimits,
        make_room: Callable[[Session], str | None],
        cancel: Cancellation | None = None,
    ) -> Execution | None:
        """Run a cell; None if the session was removed before it got its turn."""
        if not self._acquire(cancel):
            return Execution(error=_STOPPED_BEFORE, sandbox=self.mode)
        try:
            if self.ended:
                return Execution(
                    error="This conversation was deleted; its interpreter and files are gone.",
                    sandbox=self.mode,
                )
            if self.removed:
                return None
            self.last_used = time.monotonic()
            try:
                return self._run(code, limits, make_room, cancel)
            finally:
                self.last_used = time.monotonic()
        finally:
            self.lock.release()

    def _run(
        self,
        code: str,
        limits: SandboxLimits,
        make_room: Callable[[Session], str | None],
        cancel: Cancellation | None,
    ) -> Execution:
        if self.worker is not None and not self.worker.alive:
            self._drop(self.box.take_stop_reason() or "it exited")
        notice = None
        if self.worker is None:
            refusal = make_room(self) or self._start(limits)
            if refusal:
                return Execution(error=refusal, sandbox=self.mode)
            notice = _restart_notice(self.lost) if self.lost else None
            self.lost = None
        assert self.worker is not None
        if cancel is not None and cancel.requested:
            return Execution(error=_STOPPED_BEFORE, notice=notice, sandbox=self.mode)
        with self.box.cell(limits) as cell:
            execution = self._request(self.worker, code, limits, cancel, cell.file_size)
        execution.notice = notice
        return self._limited(execution, cell)

    def _start(self, limits: SandboxLimits) -> str | None:
        """Start a worker as the session's uid, in its cgroup, watched; None, or why not."""
        try:
            self.box.prepare(limits)
            self.worker = WorkerProcess(
                self.mode, self.work_dir, limits, uid=self.box.uid, launch=self.box.command
            )
        except (WorkerGoneError, SessionLimitError) as exc:
            return f"The interpreter failed to start: {exc.reason}"
        self.box.started(self.worker, limits)
        return None

    def _limited(self, execution: Execution, cell: Cell) -> Execution:
        """The call as the session's limits left it: stopped by the watch, or over quota."""
        if cell.stopped and self.worker is None:  # the watch, not the code, ended the worker
            self.box.take_stop_reason()
            self.lost = cell.stopped
            execution.error = (
                f"Stopped: {cell.stopped}. The interpreter's state is lost (files remain)."
            )
        elif cell.stopped:  # stopped as the call ended: its result stands, its state does not
            self._drop(self.box.take_stop_reason() or cell.stopped)
            execution.add_notice(f"The interpreter was stopped after this call: {cell.stopped}.")
        if cell.note:
            execution.add_notice(cell.note)
        return execution

    def _drop(self, reason: str) -> None:
        if self.worker is not None:
            self.worker.kill()
        self.box.worker_ended()
        self.worker = None
        self.lost = reason

    def _request(
        self,
        worker: WorkerProcess,
        code: str,
        limits: SandboxLimits,
        cancel: Cancellation | None,
        file_size: int | None,
    ) -> Execution:
        try:
            reply = worker.request(code, limits.wall_time, cancel, file_size=file_size)
        except WorkerTimeoutError as exc:
            if cancel is not None and cancel.requested:
                gone = WorkerGoneError(
                    "it stopped answering", cause="killed", stdout=exc.stdout, stderr=exc.stderr
                )
                return self._killed_by_cancel(gone)
            self._drop("the previous call ran past its time limit")
            error = (
                f"Timeout: the code ran for more than {limits.wall_time:g} seconds and was "
                "stopped. The interpreter's state is lost."
            )
            return Execution(stdout=exc.stdout, stderr=exc.stderr, error=error, sandbox=self.mode)
        except WorkerGoneError as exc:
            return self._gone(exc, cancelled=cancel is not None and cancel.requested)
        return Execution(
            stdout=reply.stdout,
            stderr=reply.stderr,
            error=_interrupted(reply) if reply.interrupted else reply.error,
            result=reply.result,
            images=list(reply.images),
            files=list(reply.files),
            sandbox=self.mode,
        )

    def _gone(self, exc: WorkerGoneError, *, cancelled: bool) -> Execution:
        if self.ended:
            error = "This conversation was deleted while the code ran; it was stopped."
            return Execution(error=error, sandbox=self.mode)
        if exc.cause == "killed" or (cancelled and exc.cause == "exit"):
            return self._killed_by_cancel(exc)
        self._drop(exc.reason.splitlines()[0])
        return Execution(
            stdout=exc.stdout,
            stderr=exc.stderr,
            error=f"The interpreter stopped: {exc.reason}. Its state is lost.",
            sandbox=self.mode,
        )

    def _killed_by_cancel(self, exc: WorkerGoneError) -> Execution:
        self._drop("the previous call was stopped by cancel")
        if exc.cause == "killed":
            how = "it did not stop when interrupted, so the interpreter was killed"
        else:
            how = f"the interpreter ended ({exc.reason.splitlines()[0]})"
        error = f"{STOPPED}; {how}, and its state is lost."
        return Execution(stdout=exc.stdout, stderr=exc.stderr, error=error, sandbox=self.mode)

    def try_stop(self, reason: str) -> bool:
        """Stop the worker and retire the session, unless a call is running in it."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            if self.worker is not None:
                self.worker.close()
                self.worker = None
                self.lost = reason
            self.box.close()
            self.removed = True
            return True
        finally:
            self.lock.release()

    def end(self) -> None:
        """The conversation was deleted: kill the worker now, even in the middle of a call."""
        self.ended = True
        worker = self.worker
        if worker is not None:
            worker.kill()  # a running call sees its worker gone and returns
        with self.lock:
            self.worker = None
            self.box.close()
            self.removed = True

    def close(self) -> None:
        """Stop the worker (the interpreter is closing), waiting for a running call."""
        with self.lock:
            if self.worker is not None:
                self.worker.close()
            self.worker = None
            self.box.close()
            self.removed = True


class SessionPool:
    """The live sessions of one interpreter, least recently used first.

    Args:
        mode: The sandbox mode of its workers.
        idle_timeout: Seconds after its last call that a session's worker is stopped.
        max_sessions: Workers alive at once; starting one more stops the least recently used.
        enforcement: How sessions are held to their limits (default: `Enforcement()`); the
            pool closes it with itself.
    """

    def __init__(
        self,
        mode: SandboxMode,
        idle_timeout: float,
        max_sessions: int,
        enforcement: Enforcement | None = None,
    ) -> None:
        if idle_timeout <= 0 or max_sessions < 1:
            raise ConfigurationError(
                "code_interpreter: idle_timeout must be > 0 and max_sessions >= 1, got "
                f"{idle_timeout!r} and {max_sessions!r}"
            )
        self.mode = mode
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lost: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self.enforcement = enforcement if enforcement is not None else Enforcement()

    def run(
        self,
        key: str,
        work_dir: Path,
        code: str,
        limits: SandboxLimits,
        cancel: Cancellation | None = None,
    ) -> Execution:
        """Run a cell in the session of `key` (made if needed), blocking until it is done.

        `cancel.request()` (from any thread) interrupts it: see `WorkerProcess.request`.
        """
        while True:
            session = self._get(key, work_dir)
            execution = session.run(code, limits, self._make_room, cancel)
            if execution is not None:
                self._arm()
                return execution

    def _get(self, key: str, work_dir: Path) -> Session:
        with self._lock:
            if self._closed:
                raise ConfigurationError("this code interpreter was closed")
            found = self._sessions.get(key)
            if found is None:
                box = self.enforcement.open(key, work_dir)
                found = Session(key, work_dir, self.mode, self._lost.pop(key, None), box)
                self._sessions[key] = found
            self._sessions.move_to_end(key)
            return found

    def live_sessions(self) -> list[str]:
        """The keys of the sessions whose worker is running, least recently used first."""
        with self._lock:
            return [key for key, session in self._sessions.items() if session.live]

    def _retire(self, session: Session) -> None:
        with self._lock:
            if self._sessions.get(session.key) is session:
                del self._sessions[session.key]
            if session.lost:
                self._lost[session.key] = session.lost
                while len(self._lost) > _LOST_NOTES:
                    self._lost.popitem(last=False)

    def reap(self) -> list[str]:
        """Stop the workers idle past the timeout (not those running a call); their keys."""
        now = time.monotonic()
        with self._lock:
            idle = [s for s in self._sessions.values() if now - s.last_used >= self.idle_timeout]
        reaped = []
        for session in idle:
            if session.try_stop(f"it was idle for more than {self.idle_timeout:g} seconds"):
                self._retire(session)
                reaped.append(session.key)
        return reaped

    def _make_room(self, starting: Session) -> str | None:
        """Before `starting` starts a worker: reap, then stop the least recently used."""
        self.reap()
        with self._lock:
            others = [s for s in self._sessions.values() if s is not starting and s.live]
        excess = len(others) + 1 - self.max_sessions
        reason = f"more than {self.max_sessions} sessions were live and it was the least used"
        for session in others:
            if excess <= 0:
                break
            if session.try_stop(reason):
                self._retire(session)
                excess -= 1
        if excess > 0:
            return (
                f"The code interpreter already runs {self.max_sessions} sessions, all busy; "
                "try again when one of them finishes."
            )
        return None

    def _arm(self) -> None:
        """Make sure a timer will reap the oldest session when its idle time is up."""
        with self._lock:
            if self._closed or self._timer is not None or not self._sessions:
                return
            oldest = min(s.last_used for s in self._sessions.values())
            delay = max(0.0, oldest + self.idle_timeout - time.monotonic()) + 0.05
            self._timer = threading.Timer(delay, self._tick)
            self._timer.name = "parley-ci-reaper"
            self._timer.daemon = True
            self._timer.start()

    def _tick(self) -> None:
        with self._lock:
            self._timer = None
        self.reap()
        self._arm()

    def end(self, key: str) -> None:
        """The conversation was deleted: stop its worker at once and forget it."""
        with self._lock:
            session = self._sessions.pop(key, None)
            self._lost.pop(key, None)
        if session is not None:
            session.end()

    def close(self) -> None:
        """Stop every worker and the timer; later calls are refused."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
            sessions = list(self._sessions.values())
            self._sessions.clear()
        if timer is not None:
            timer.cancel()
        for session in sessions:
            session.close()
        self.enforcement.close()
