"""`code_interpreter`: stateful Python per conversation, in a sandboxed worker process.

Each conversation (the `session`, `session_id`, `thread_id` or `conversation_id` of a call;
one default session otherwise) has its own work directory and its own worker, which keeps
variables and imports between calls as a notebook does. The worker runs under the strongest
sandbox this machine offers (see `parley.tools.builtin.sandbox`): no network, writes only in
the work directory, limits on CPU, memory, file size and wall time. A worker that crashed or
was killed is started again on the next call, which says that the earlier state is gone.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from parley._sync import run_sync
from parley.errors import ConfigurationError
from parley.messages import ImageBlock, OutputBlock, TextBlock
from parley.tools.base import Tool, ToolOutput
from parley.tools.builtin._common import session_key, slug
from parley.tools.builtin._process import WorkerGoneError, WorkerProcess, WorkerTimeoutError
from parley.tools.builtin.sandbox import SandboxLimits, SandboxMode, detect_sandbox_mode
from parley.tools.registry import register_tool

__all__ = ["CodeInterpreter", "Execution"]

_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


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


def _strip_fence(code: str) -> str:
    """The code inside a Markdown fence, if the model wrapped it in one."""
    found = _FENCE.match(code)
    return found.group(1) if found else code


def _copy_in(files: Sequence[str], work_dir: Path) -> list[str]:
    """Copy local files (paths or file:// URLs) into the work directory; the ones skipped."""
    skipped = []
    for item in files:
        parts = urlsplit(item)
        path = Path(unquote(parts.path)) if parts.scheme == "file" else Path(item)
        if parts.scheme not in ("", "file") or not path.is_file():
            skipped.append(item)
            continue
        shutil.copy2(path, work_dir / path.name)
    return skipped


class _Session:
    """One conversation's work directory and worker."""

    def __init__(self, work_dir: Path, mode: SandboxMode) -> None:
        self.work_dir = work_dir
        self.mode = mode
        self.lock = threading.Lock()
        self.worker: WorkerProcess | None = None
        self.lost: str | None = None

    def _start(self, limits: SandboxLimits) -> tuple[WorkerProcess, str | None]:
        if self.worker is not None and not self.worker.alive:
            self._drop("it exited")
        if self.worker is not None:
            return self.worker, None
        notice = None
        if self.lost:
            notice = (
                f"Note: the interpreter was restarted because {self.lost}; variables, "
                "imports and definitions from earlier calls are gone (files remain)."
            )
        self.worker = WorkerProcess(self.mode, self.work_dir, limits)
        self.lost = None
        return self.worker, notice

    def _drop(self, reason: str) -> None:
        if self.worker is not None:
            self.worker.kill()
        self.worker = None
        self.lost = reason

    def run(self, code: str, limits: SandboxLimits) -> Execution:
        with self.lock:
            try:
                worker, notice = self._start(limits)
            except WorkerGoneError as exc:
                self.worker = None
                error = f"The interpreter failed to start: {exc.reason}"
                return Execution(error=error, sandbox=self.mode)
            return self._request(worker, code, limits, notice)

    def _request(
        self, worker: WorkerProcess, code: str, limits: SandboxLimits, notice: str | None
    ) -> Execution:
        try:
            reply = worker.request(code, limits.wall_time)
        except WorkerTimeoutError:
            self._drop("the previous call ran past its time limit")
            error = (
                f"Timeout: the code ran for more than {limits.wall_time:g} seconds and was "
                "stopped. The interpreter's state is lost."
            )
            return Execution(error=error, notice=notice, sandbox=self.mode)
        except WorkerGoneError as exc:
            self._drop(exc.reason.splitlines()[0])
            error = f"The interpreter stopped: {exc.reason}. Its state is lost."
            return Execution(error=error, notice=notice, sandbox=self.mode)
        return Execution(
            stdout=reply["stdout"],
            stderr=reply["stderr"],
            error=reply["error"],
            result=reply["result"],
            images=[base64.b64decode(image) for image in reply["images"]],
            files=list(reply["files"]),
            notice=notice,
            sandbox=self.mode,
        )

    def close(self) -> None:
        with self.lock:
            if self.worker is not None:
                self.worker.close()
            self.worker = None


def _shutdown(sessions: dict[str, _Session], temporary_root: str | None) -> None:
    for session in list(sessions.values()):
        session.close()
    sessions.clear()
    if temporary_root:
        shutil.rmtree(temporary_root, ignore_errors=True)


def _limits(cfg: Mapping[str, Any]) -> SandboxLimits:
    given = cfg.get("limits")
    if isinstance(given, SandboxLimits):
        limits = given
    elif isinstance(given, Mapping):
        limits = SandboxLimits(**given)
    elif given is None:
        limits = SandboxLimits()
    else:
        raise ConfigurationError(f"code_interpreter: limits must be SandboxLimits, got {given!r}")
    if cfg.get("timeout") is not None:
        limits = dataclasses.replace(limits, wall_time=float(cfg["timeout"]))
    return limits


@register_tool("code_interpreter")
class CodeInterpreter(Tool):
    """Runs Python in a sandboxed, stateful worker per conversation.

    Args:
        cfg: `work_dir` (default: a temporary directory, removed on `close()`), `sandbox`
            (`"auto"`, `"bwrap"`, `"unshare"` or `"rlimits"`), `limits` (`SandboxLimits` or
            a dict of its fields) and `timeout` (the wall time per call, as Qwen-Agent's).
    """

    description = (
        "A Python sandbox: runs Python code and returns its output. Variables, imports and "
        "files persist between calls in this conversation. Figures drawn with matplotlib are "
        "returned as images. There is no network access; files can be written only in the "
        "current directory."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    }
    # The interpreter enforces its own wall time (and kills the worker when it runs out).
    timeout: ClassVar[float | None] = None

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.limits = _limits(self.cfg)
        self.sandbox: SandboxMode = detect_sandbox_mode(str(self.cfg.get("sandbox", "auto")))
        given = self.cfg.get("work_dir")
        temporary = None if given else tempfile.mkdtemp(prefix="parley-ci-")
        self.root = Path(given or str(temporary)).resolve()
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shutdown, self._sessions, temporary)

    @property
    def file_access(self) -> bool:
        """It reads the files of the conversation (Qwen-Agent's flag)."""
        return True

    def work_dir(self, session: str | None = None) -> Path:
        """The work directory of a session."""
        return self.root / slug(session or "default")

    def _session(self, key: str) -> _Session:
        with self._lock:
            if not self._finalizer.alive:
                raise ConfigurationError("this code interpreter was closed")
            found = self._sessions.get(key)
            if found is None:
                found = self._sessions[key] = _Session(self.work_dir(key), self.sandbox)
            return found

    def run_code(
        self,
        code: str,
        *,
        session: str | None = None,
        files: Sequence[str] = (),
        timeout: float | None = None,
    ) -> Execution:
        """Run code in a session and wait for it (blocking; see `execute` for async)."""
        state = self._session(session or "default")
        state.work_dir.mkdir(parents=True, exist_ok=True)
        skipped = _copy_in(files, state.work_dir) if files else []
        limits = (
            self.limits
            if timeout is None
            else dataclasses.replace(self.limits, wall_time=float(timeout))
        )
        execution = state.run(_strip_fence(code), limits)
        if skipped:
            note = "Files not copied (only local files are): " + ", ".join(skipped)
            execution.notice = f"{execution.notice}\n{note}" if execution.notice else note
        return execution

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        files: Sequence[str] = (),
        timeout: float | None = None,
    ) -> Execution:
        """Run code in a session (the worker is driven from a thread)."""
        return await asyncio.to_thread(
            self.run_code, code, session=session, files=files, timeout=timeout
        )

    def execute_sync(
        self,
        code: str,
        *,
        session: str | None = None,
        files: Sequence[str] = (),
        timeout: float | None = None,
    ) -> Execution:
        """The sync twin of `execute`."""
        return run_sync(self.execute(code, session=session, files=files, timeout=timeout))

    def _from_call(self, params: str | dict[str, Any], kwargs: dict[str, Any]) -> Execution:
        arguments = self._verify_json_format_args(params)
        return self.run_code(
            str(arguments["code"]),
            session=session_key(kwargs),
            files=kwargs.get("files") or (),
            timeout=kwargs.get("timeout"),
        )

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> ToolOutput:
        """Run the code (Qwen-Agent style); the session comes from the call's context."""
        return self._from_call(params, kwargs).to_output()

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> ToolOutput:
        """Run the code without blocking the event loop."""
        execution = await asyncio.to_thread(self._from_call, params, kwargs)
        return execution.to_output()

    def close(self) -> None:
        """Stop every worker (and remove the work directory if it was a temporary one)."""
        self._finalizer()

    def __enter__(self) -> CodeInterpreter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
