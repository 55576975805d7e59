"""Qwen-Agent's `qwen_agent.tools.base`: `BaseTool`, `BaseToolWithFileAccess`, the registry.

`BaseTool` is parley's `Tool` (already in Qwen-Agent's shape: `name`, `description`,
`parameters`, `call(params, **kwargs)`, `function`, `_verify_json_format_args`), and
`register_tool` / `TOOL_REGISTRY` are parley's registry, so a tool registered here is one
every parley agent and toolkit finds by name.

`BaseToolWithFileAccess` is a tool that works on the conversation's files: an agent hands it
`files=[...]` (the files of the user's messages and the agent's own `files`), and its `call`
copies each one into its `work_dir` before doing its work, as Qwen-Agent's does. Unlike
Qwen-Agent, the names come from a model or a user and are not trusted: a local path is
copied only from under `file_roots` (default: the working directory and the work dir
itself), read without following links swapped in; a URL is downloaded only from a public
address (`FetchPolicy`: `allow_private`, `allowed_hosts`, `$PARLEY_FETCH_ALLOWED_HOSTS`),
at most `max_file_bytes`. A refused or failed file raises, naming the file and why
(Qwen-Agent logs and goes on), so the model reads the reason as the call's result.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from parley._sync import run_sync
from parley.errors import DocumentError, ToolExecutionError
from parley.models.tools import ToolSpec
from parley.rag.ingest import Reader, is_url
from parley.tools import TOOL_REGISTRY, register_tool
from parley.tools.base import Tool
from parley.tools.builtin._net import FetchPolicy, fetch
from parley.tools.builtin._paths import PathNotAllowedError, replacing
from parley.tools.workspace import default_workspace

__all__ = [
    "TOOL_REGISTRY",
    "BaseTool",
    "BaseToolWithFileAccess",
    "PathNotAllowedError",
    "ToolServiceError",
    "register_tool",
    "with_files",
]

BaseTool = Tool
"""Qwen-Agent's `BaseTool`: parley's `Tool`."""

_MAX_FILE_BYTES = 50 * 1024 * 1024


class ToolServiceError(Exception):
    """Qwen-Agent's error for a tool's outside service (`code`, `message`, `extra`)."""

    def __init__(
        self,
        exception: Exception | None = None,
        code: str | None = None,
        message: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(exception if exception is not None else f"[{code}] {message}")
        self.exception = exception
        self.code = code
        self.message = message
        self.extra = extra


def default_work_dir(name: str) -> Path:
    """Where a file tool keeps its files by default: `<workspace>/tools/<name>`."""
    return default_workspace().root / "tools" / name


class BaseToolWithFileAccess(Tool):
    """A tool that gets the conversation's files (Qwen-Agent's class of that name).

    Args:
        cfg: `work_dir` (where files are copied; default `<workspace>/tools/<name>`),
            `file_roots` (folders local files may be copied from; default: the working
            directory), `allow_private` / `allowed_hosts` (what downloads may reach),
            `max_file_bytes` (the largest file copied, 50 MiB), and the tool's own keys.

    Subclasses do their work in `call` after `super().call(params, files=files)` (or
    `self.copy_files(files)`), finding the files in `self.work_dir` by their names.
    """

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        self.work_dir = str(self.cfg.get("work_dir") or default_work_dir(self.name))
        roots = self.cfg.get("file_roots") or [Path.cwd()]
        self.file_roots = [Path(r).resolve() for r in roots]
        max_bytes = int(self.cfg.get("max_file_bytes", _MAX_FILE_BYTES))
        self.fetch_policy = FetchPolicy.from_config(self.cfg, max_bytes=max_bytes)
        self._reader = Reader(max_bytes, self.fetch_policy, [*self.file_roots, self.work_dir])

    @property
    def file_access(self) -> bool:
        """It takes the conversation's files (Qwen-Agent's flag): agents hand them over."""
        return True

    def call(
        self, params: str | dict[str, Any], files: Sequence[str] | None = None, **kwargs: Any
    ) -> Any:
        """Copy `files` into `work_dir`; subclasses then do their work.

        Raises:
            PathNotAllowedError: A local file outside `file_roots`.
            ToolExecutionError: A file missing or too large, a URL not allowed or failing.
        """
        if files:
            self.copy_files(files)
        return None

    def copy_files(self, files: Sequence[str]) -> list[str]:
        """Copy local files and downloads into `work_dir`; their paths there, in order.

        Raises:
            PathNotAllowedError: A local file outside `file_roots`.
            ToolExecutionError: A file missing or too large, a URL not allowed or failing.
        """
        Path(self.work_dir).mkdir(parents=True, exist_ok=True)
        return [self._copy(str(file)) for file in files]

    def local_name(self, file: str) -> str:
        """The name a file (path or URL) has in `work_dir` once copied."""
        path = urlsplit(file).path if is_url(file) else file
        name = PurePosixPath(unquote(path)).name
        return name if name not in ("", ".", "..") else "download"

    def _copy(self, file: str) -> str:
        target = Path(self.work_dir) / self.local_name(file)
        if is_url(file):
            fetched = run_sync(fetch(file, self.fetch_policy, tool_name=self.name))
            data = fetched.content
            if not target.suffix and fetched.media_type:
                # A page's URL often has no extension: the parser goes by the name's.
                media_type = fetched.media_type.split(";")[0].strip()
                target = target.with_suffix(mimetypes.guess_extension(media_type) or "")
        else:
            data = self._read_local(file)
            if Path(file).resolve() == target.resolve():
                return str(target)
        folder = os.open(self.work_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with replacing(folder, target.name, ".parley-copy-") as descriptor:
                os.write(descriptor, data)
        finally:
            os.close(folder)
        return str(target)

    def _read_local(self, file: str) -> bytes:
        try:
            return self._reader.read_file(file).data
        except DocumentError as exc:
            cause = exc.__cause__
            if isinstance(cause, PathNotAllowedError):
                raise PathNotAllowedError(
                    f"{file!r} is outside the folders {self.name} may copy files from "
                    f"({', '.join(map(str, self.file_roots))}); set file_roots in its cfg "
                    "to allow another folder",
                    tool_name=self.name,
                ) from None
            raise ToolExecutionError(
                f"{self.name} cannot copy {file}: "
                + str(exc).removeprefix(f"cannot index {file}: "),
                tool_name=self.name,
            ) from None


def with_files(tool: Tool, files: Sequence[str], images: Sequence[str] = ()) -> Tool:
    """`tool`, handed `files=` on every call when it takes files (`file_access`).

    This is how Qwen-Agent's function-calling agents give a tool the conversation's files:
    those of the user's messages and the agent's own, then the conversation's local
    `images`. Qwen-Agent skips an image it cannot copy; here an image outside the tool's
    `file_roots` is not handed (files are, and the tool refuses those it may not read).
    """
    if not tool.file_access:
        return tool
    files = [*files, *(image for image in images if _may_copy(tool, image))]
    if not files:
        return tool
    handed = type(
        type(tool).__name__,
        (_HandedFiles,),
        {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "timeout": tool.timeout,
            "requires_approval": tool.requires_approval,
            "idempotent": tool.idempotent,
            "tool_type": tool.tool_type,
        },
    )
    made: Tool = handed(tool, files)
    return made


def _may_copy(tool: Tool, image: str) -> bool:
    """Whether a local image is a file inside the tool's `file_roots` (if it has them)."""
    path = Path(url2pathname(urlsplit(image).path) if image.startswith("file:") else image)
    roots = getattr(tool, "file_roots", None)
    if not path.is_file():
        return False
    resolved = path.resolve()
    return roots is None or any(resolved.is_relative_to(root) for root in roots)


class _HandedFiles(Tool):
    """A tool's stand-in that adds `files=` to its calls (see `with_files`)."""

    def __init__(self, inner: Tool, files: Sequence[str]) -> None:
        self.inner = inner
        self.files = list(files)
        self.cfg = inner.cfg
        self.json_schema = inner.json_schema

    @property
    def file_access(self) -> bool:
        """It takes files (that is why it was handed them)."""
        return True

    @property
    def local_only(self) -> bool:
        """As the tool it stands for."""
        return self.inner.local_only

    @property
    def takes_context(self) -> bool:
        """As the tool it stands for."""
        return self.inner.takes_context

    def tool_spec(self) -> ToolSpec:
        """The tool's own description."""
        return self.inner.tool_spec()

    def prepare(self, raw: str | dict[str, Any] | None) -> dict[str, Any]:
        """The tool's own argument check."""
        return self.inner.prepare(raw)

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> Any:
        """The tool's call, with the files."""
        return await self.inner.acall(params, **{"files": self.files, **kwargs})

    async def end_session(self, user_id: str | None, thread_id: str) -> None:
        """The tool's own."""
        await self.inner.end_session(user_id, thread_id)
