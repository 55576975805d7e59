"""What the code interpreter's worker may say to parley, checked strictly.

The worker's supervisor (`_worker.py`) answers in JSON lines. parley reads each line with a
limit (`line_limit`) and validates it against these models, which forbid any other field and
any other type; a line that is too long, is not JSON or does not fit ends the worker with a
clear error ("the interpreter sent a malformed reply"). The supervisor runs no code it is
sent, and the code holds none of its descriptors: this is the second wall, for a supervisor
that misbehaves, not the first.

    <- {"kind": "ready", "pid": ..., "layers": {"uid": ..., "landlock": abi, "seccomp": bool}}
    <- {"kind": "cell", "cell": n, "stdout": ..., "stderr": ..., "error": ..., "result": ...,
        "images": [base64 PNG, ...], "files": [...], "interrupted": bool}
    <- {"kind": "ended", "cell": n | null, "cause": "exit" | "killed" | "malformed",
        "status": int | null, "detail": ..., "stdout": ..., "stderr": ...}

`ended` says the REPL child is gone (the supervisor exits after it): it exited or died of a
signal (`status`: an exit status, or minus the signal's number), was killed after an
interrupt it did not obey (`killed`), or sent the supervisor something malformed.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from parley.tools.builtin.sandbox import SandboxLimits

__all__ = [
    "CellReply",
    "Ended",
    "Ready",
    "WorkerMessage",
    "line_limit",
    "parse_message",
]

REPLY_BYTES = 32 * 1024 * 1024
"""The longest line the REPL child may send its supervisor (its figures, base64)."""
_PATH_BYTES = 4 * 1024 * 1024  # the changed files' names: 50 paths, escaped


class _Message(BaseModel):
    # Bytes come as base64 text (the figures), decoded and checked here.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, val_json_bytes="base64")


class Ready(_Message):
    """The worker is confined and waits for cells."""

    kind: Literal["ready"]
    pid: int
    layers: dict[str, int | bool]


class CellReply(_Message):
    """One cell's outcome."""

    kind: Literal["cell"]
    cell: int
    stdout: str
    stderr: str
    error: str | None
    result: str | None
    images: list[bytes]
    files: list[str] = Field(max_length=50)
    interrupted: bool


class Ended(_Message):
    """The REPL child is gone, and why; the supervisor exits after saying so."""

    kind: Literal["ended"]
    cell: int | None
    cause: Literal["exit", "killed", "malformed"]
    status: int | None
    detail: str
    stdout: str
    stderr: str


WorkerMessage = Annotated[Ready | CellReply | Ended, Field(discriminator="kind")]
"""Any line the worker may send."""

_MESSAGE: TypeAdapter[Ready | CellReply | Ended] = TypeAdapter(WorkerMessage)


def parse_message(line: bytes) -> Ready | CellReply | Ended:
    """One line of the worker, validated.

    Raises:
        ValueError: It is not JSON, or not one of the messages (pydantic's ValidationError).
    """
    return _MESSAGE.validate_json(line)


def line_limit(limits: SandboxLimits) -> int:
    """The longest line parley reads from a worker with these limits.

    Its figures (bounded by the child's own line), stdout and stderr (`output_chars` each, at
    most 12 bytes a character once JSON-escaped), and the names of the changed files.
    """
    return REPLY_BYTES + 2 * 12 * limits.output_chars + _PATH_BYTES
