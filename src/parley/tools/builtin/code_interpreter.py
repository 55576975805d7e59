"""`code_interpreter`: stateful Python per conversation, in a sandboxed worker process.

Each conversation, one user's thread, has its own work directory and its own worker, which
keeps variables and imports between calls as a notebook does. The conversation comes from
the call's `RunContext` (`ctx`: its user and thread); without one, from the `session` of a
direct call or the `session` / `thread_id` keywords of a Qwen-Agent style call, for the local
user. The work directory is the thread's directory of the workspace (`parley.tools.
workspace`), which `storage` and `doc_parser` see too.

The worker runs under the strongest sandbox this machine offers (see
`parley.tools.builtin.sandbox`): no network, files only in the work directory, limits on CPU,
memory, processes, file size and wall time; memory, processes and disk also for the whole
session, however many processes it runs (`_limits`), and as root a uid per session. A worker
that crashed, was killed, or was stopped because it sat idle (`idle_timeout`), more sessions
were live (`max_sessions`) or the session passed a limit is started again on the next call,
which says that the earlier state is gone. Deleting the thread (`end_session`) stops its
worker and removes its files.

Cancelling a call (the run is cancelled: `run.cancel()`, the service's cancel, a client that
leaves, or the task awaiting `acall` / `execute` cancelled) interrupts its code: the cell
gets KeyboardInterrupt and keeps the interpreter's state, or, if it goes on past a short
grace, the interpreter is killed (the next call starts a new one and says so). The call then
returns at once with what happened: an error starting "Stopped by cancel", and whatever
stdout and stderr the code had written. That is the result the agent loop records.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypedDict, Unpack, cast
from urllib.parse import unquote, urlsplit

from parley._sync import run_sync
from parley.errors import ConfigurationError, ToolExecutionError
from parley.models.tools import ToolSpec
from parley.tools.base import Tool, ToolOutput
from parley.tools.builtin import _common
from parley.tools.builtin._hostfs import copy_into
from parley.tools.builtin._limits import Backend, Enforcement, check_disk_quota
from parley.tools.builtin._paths import Located, NotAFileError, open_beneath
from parley.tools.builtin._process import INTERRUPT_GRACE, Cancellation
from parley.tools.builtin._sessions import Execution, SessionPool
from parley.tools.builtin._uids import UidRange
from parley.tools.builtin.sandbox import (
    SandboxLimits,
    SandboxMode,
    describe_sandbox,
    detect_sandbox_mode,
    model_note,
)
from parley.tools.context import RunContext, session_key
from parley.tools.executor import run_in_tool_thread, run_interruptible
from parley.tools.registry import register_tool
from parley.tools.workspace import Workspace, default_workspace

__all__ = ["CodeInterpreter", "CodeOptions", "Execution"]

logger = logging.getLogger("parley.tools")

_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)
_IDLE_TIMEOUT = 600.0
# How long a cancelled call is waited for: the worker's grace, then parley's own margin.
_CANCEL_GRACE = INTERRUPT_GRACE + 10.0
_MAX_SESSIONS = 16
_ABOUT = (
    "A Python sandbox: runs Python code and returns its output. Variables, imports and files "
    "persist between calls in this conversation. Figures drawn with matplotlib are returned "
    "as images."
)


def _strip_fence(code: str) -> str:
    """The code inside a Markdown fence, if the model wrapped it in one."""
    found = _FENCE.match(code)
    return found.group(1) if found else code


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _copy_in(
    files: Sequence[str],
    work_dir: Path,
    roots: Sequence[Path],
    limits: SandboxLimits,
    workspace: Path | None = None,
) -> list[str]:
    """Copy local files into the work directory; each one refused, with why.

    Only files under the work directory itself (already in reach) or under the configured
    `file_roots` are taken: a caller naming `/etc/passwd` or another thread's file gets a
    refusal, not a copy, even where a file root holds the `workspace` (every conversation's
    folders); nor is a file that would take the conversation past its disk quota.
    The code may have planted links in its directory: the copy is read from its root
    without following links and written link-safe (`_hostfs.copy_into`).
    """
    refused = []
    home = work_dir.resolve()
    for item in files:
        parts = urlsplit(item)
        if parts.scheme not in ("", "file"):
            refused.append(f"{item} (not a local file)")
            continue
        # A relative path is the conversation's: it names a file of the work directory.
        path = (work_dir / (unquote(parts.path) if parts.scheme == "file" else item)).resolve()
        root = next((r for r in (home, *roots) if _inside(path, [r])), None)
        if root not in (None, home) and workspace and _inside(path, [workspace.resolve()]):
            root = None  # another conversation's file, though under a file root
        if root is None:
            refused.append(f"{item} (outside this conversation's files and the file_roots)")
        elif root == home:  # used where it is
            if not path.is_file():
                refused.append(f"{item} (no such file)")
        elif why := _copy_one(Located(root, path.relative_to(root).parts), item, work_dir, limits):
            refused.append(f"{item} ({why})")
    return refused


def _copy_one(located: Located, shown: str, work_dir: Path, limits: SandboxLimits) -> str | None:
    """Copy one file of the file_roots in (if it fits the disk quota); None, or why not."""
    try:
        source = open_beneath(located, shown=shown, tool_name="code_interpreter")
    except NotAFileError:
        return "no such file"
    except ToolExecutionError as exc:
        return str(exc)
    try:
        too_much = check_disk_quota(work_dir, os.fstat(source).st_size, limits)
        if too_much:
            return too_much
        copy_into(work_dir, located.parts[-1], source)
    except IsADirectoryError:
        return "a folder of that name is in the conversation's directory"
    except OSError as exc:
        return f"it could not be copied: {exc.strerror or exc}"
    finally:
        os.close(source)
    return None


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


def _conversation(
    ctx: RunContext[Any] | None, session: str | None, user_id: str | None
) -> tuple[str | None, str]:
    """(user, thread) of a call: the run's context first, then what a direct caller named."""
    if ctx is not None:
        return ctx.user_id, ctx.thread_id
    return user_id, session or "default"


def _enforcement(cfg: Mapping[str, Any]) -> Enforcement:
    uids = cfg.get("session_uids", UidRange())
    if isinstance(uids, Sequence) and not isinstance(uids, str) and len(uids) == 2:
        uids = UidRange(int(uids[0]), int(uids[1]))
    if uids is False:
        uids = None
    if uids is not None and not isinstance(uids, UidRange):
        raise ConfigurationError(
            f"code_interpreter: session_uids must be [first, count] or false, got {uids!r}"
        )
    parent = cfg.get("cgroup_parent")
    return Enforcement(
        cast("Backend", str(cfg.get("session_limits", "auto"))),  # checked there
        cgroup_parent=Path(parent) if parent else None,
        uids=uids,
    )


class CodeOptions(TypedDict, total=False):
    """Where code runs and what it gets: `CodeInterpreter.run_code`'s keyword arguments."""

    session: str | None
    files: Sequence[str]
    timeout: float | None
    ctx: RunContext[Any] | None
    user_id: str | None


@register_tool("code_interpreter")
class CodeInterpreter(Tool):
    """Runs Python in a sandboxed, stateful worker per conversation.

    Args:
        cfg: `work_dir` (the workspace root; default: the process's `default_workspace()`),
            `sandbox` (`"auto"`, `"bwrap"`, `"unshare"` or `"rlimits"`), `limits`
            (`SandboxLimits` or a dict of its fields), `timeout` (the wall time per call, as
            Qwen-Agent's), `idle_timeout` (seconds before an idle session's worker is
            stopped, default 600), `max_sessions` (workers alive at once, default 16),
            `file_roots` (folders whose files a call's `files` may copy in; none by default),
            `session_limits` (how memory and processes are capped per session: `"auto"`,
            `"cgroup"` or `"watchdog"`; see `_limits`), `cgroup_parent` (a delegated cgroup
            v2 for the sessions' groups) and `session_uids` (`[first, count]`: the uids
            sessions run as when parley is root; `false`: all run as `nobody`).
    """

    description = (
        f"{_ABOUT} There is no network access; files can be read and written only in the "
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
        self.workspace = Workspace(given) if given else default_workspace()
        self.root = self.workspace.root
        self.file_roots = [Path(p).resolve() for p in self.cfg.get("file_roots") or ()]
        self.enforcement = _enforcement(self.cfg)
        self._pool = SessionPool(
            self.sandbox,
            idle_timeout=float(self.cfg.get("idle_timeout", _IDLE_TIMEOUT)),
            max_sessions=int(self.cfg.get("max_sessions", _MAX_SESSIONS)),
            enforcement=self.enforcement,
        )
        self._finalizer = weakref.finalize(self, self._pool.close)
        logger.info("code_interpreter: sandbox %s", self.sandbox_description)

    @property
    def file_access(self) -> bool:
        """It reads the files of the conversation (Qwen-Agent's flag)."""
        return True

    @property
    def isolated(self) -> bool:
        """Whether the sandbox hides the machine's files from the code (bubblewrap)."""
        return self.sandbox == "bwrap"

    @property
    def local_only(self) -> bool:
        """Outside bubblewrap the code could read the machine's files: this machine only."""
        return not self.isolated

    @property
    def sandbox_description(self) -> str:
        """What the code can reach in this interpreter's mode, and how limits hold."""
        return f"{describe_sandbox(self.sandbox)}; {self.enforcement.details()}"

    @property
    def model_description(self) -> str:
        """The description the model reads, true of the sandbox mode in use."""
        return f"{_ABOUT} {model_note(self.sandbox)} {self.enforcement.describe(self.limits)}"

    def tool_spec(self) -> ToolSpec:
        """The tool's description for a model, with what its sandbox mode allows."""
        return ToolSpec(
            name=self.name, description=self.model_description, parameters=self.json_schema
        )

    @property
    def function(self) -> dict[str, Any]:
        """The tool as Qwen-Agent lays it out, with what its sandbox mode allows."""
        return {**super().function, "description": self.model_description}

    def work_dir(self, session: str | None = None, user_id: str | None = None) -> Path:
        """The work directory of a conversation (a thread of a user; the local user's)."""
        return self.workspace.session_dir(user_id, session or "default", create=False)

    def live_sessions(self) -> list[str]:
        """The conversations whose worker is running (`user/thread`), least recent first."""
        return self._pool.live_sessions()

    def run_code(
        self,
        code: str,
        *,
        session: str | None = None,
        files: Sequence[str] = (),
        timeout: float | None = None,
        ctx: RunContext[Any] | None = None,
        user_id: str | None = None,
        cancel: Cancellation | None = None,
    ) -> Execution:
        """Run code in a conversation and wait for it (blocking; see `execute` for async).

        The conversation is `ctx`'s user and thread when given, else `session` (a thread of
        `user_id`, the local user by default). `cancel.request()`, from any thread, stops
        the code (see the module).
        """
        if not self._finalizer.alive:
            raise ConfigurationError("this code interpreter was closed")
        user, thread = _conversation(ctx, session, user_id)
        work_dir = self.workspace.session_dir(user, thread)
        refused = (
            _copy_in(files, work_dir, self.file_roots, self.limits, self.root) if files else []
        )
        limits = (
            self.limits
            if timeout is None
            else dataclasses.replace(self.limits, wall_time=float(timeout))
        )
        key = session_key(user, thread)
        execution = self._pool.run(key, work_dir, _strip_fence(code), limits, cancel)
        if refused:
            note = "Files not copied: " + "; ".join(refused)
            execution.notice = f"{execution.notice}\n{note}" if execution.notice else note
        return execution

    async def execute(self, code: str, **options: Unpack[CodeOptions]) -> Execution:
        """Run code in a conversation (the worker is driven from a tool thread).

        The options are `run_code`'s. Cancelling the awaiting task stops the code; the
        `Execution` returned then says so (see the module).
        """
        cancel = Cancellation()
        return await run_interruptible(
            self.run_code,
            code,
            cancel=cancel,
            interrupt=cancel.request,
            grace=_CANCEL_GRACE,
            **options,
        )

    def execute_sync(self, code: str, **options: Unpack[CodeOptions]) -> Execution:
        """The sync twin of `execute`."""
        return run_sync(self.execute(code, **options))

    def _from_call(
        self,
        params: str | dict[str, Any],
        kwargs: dict[str, Any],
        cancel: Cancellation | None = None,
    ) -> Execution:
        arguments = self._verify_json_format_args(params)
        ctx = kwargs.get("ctx")
        user_id = kwargs.get("user_id")
        return self.run_code(
            str(arguments["code"]),
            session=_common.session_key(kwargs),
            files=kwargs.get("files") or (),
            timeout=kwargs.get("timeout"),
            ctx=ctx if isinstance(ctx, RunContext) else None,
            user_id=str(user_id) if user_id is not None else None,
            cancel=cancel,
        )

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> ToolOutput:
        """Run the code (Qwen-Agent style); the conversation comes from the call's context."""
        return self._from_call(params, kwargs).to_output()

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> ToolOutput:
        """Run the code without blocking the event loop.

        A cancelled call (its run cancelled) stops the code and returns what happened
        ("Stopped by cancel", with the output so far), which the agent loop records.
        """
        # The tools' own threads, not asyncio's default pool: a hung sync tool elsewhere must
        # not keep code from running (parley.tools.executor).
        cancel = Cancellation()
        execution = await run_interruptible(
            self._from_call, params, kwargs, cancel, interrupt=cancel.request, grace=_CANCEL_GRACE
        )
        return execution.to_output()

    async def end_session(self, user_id: str | None, thread_id: str) -> None:
        """The thread was deleted: stop its worker (even mid-call) and remove its files."""
        await run_in_tool_thread(self._end, user_id, thread_id)

    def _end(self, user_id: str | None, thread_id: str) -> None:
        self._pool.end(session_key(user_id, thread_id))
        self.workspace.remove(user_id, thread_id)

    def close(self) -> None:
        """Stop every worker; the conversations' files stay (deleting a thread removes them)."""
        self._finalizer()

    def __enter__(self) -> CodeInterpreter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
