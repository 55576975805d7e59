"""Clients of parley's background runs, as the fault tests and scripts/fault-test.py drive them.

- `create_run(url, question)`: `POST /runs` (202), the run's id and thread.
- `join(url, run_id)`: `GET /runs/{id}/join` until the run has ended (through HAProxy,
  retried while the cluster is mid-fault: a refused or cut join is asked again, bounded).
- `Reader`: follows `GET /runs/{id}/stream` as an SSE client does. It starts where it is told
  (`Last-Event-ID: -1`, from the first event), keeps every frame's `id:` and data, and when
  its connection breaks (a killed replica, HAProxy's 503 while none is up) connects again,
  through HAProxy, with `Last-Event-ID` = the last id it saw. It ends at `data: [DONE]`.
  What it got is compared with the run's whole log read afterwards (`replay`): the same
  frames in the same order, none missing, none twice.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["Frame", "Reader", "create_run", "join", "replay", "thread_messages"]

_TIMEOUT = 30.0
_DEADLINE = 120.0  # a run through a fault (lease expiry, takeover) ends well within this
_RETRY_PAUSE = 0.5
# parley-native run statuses (service/schema.py `RunStatusName`) that end a run.
TERMINAL = {"completed", "max_iters", "interrupted", "awaiting_approval", "error"}


@dataclass(frozen=True)
class Frame:
    """One SSE frame of a run's stream: its id and its data line."""

    id: str
    data: str


def create_run(url: str, question: str, thread_id: str | None = None) -> dict[str, Any]:
    """Start a background run of the default agent; its `RunInfo` (202 expected)."""
    body: dict[str, Any] = {"message": question}
    if thread_id is not None:
        body["thread_id"] = thread_id
    answer = httpx.post(f"{url}/runs", json=body, timeout=_TIMEOUT)
    assert answer.status_code == 202, f"POST /runs: {answer.status_code} {answer.text}"
    info: dict[str, Any] = answer.json()
    return info


def join(url: str, run_id: str, deadline: float = _DEADLINE) -> dict[str, Any]:
    """The run once it has ended (`GET /runs/{id}/join`), asked again across faults."""
    end = time.monotonic() + deadline
    last = ""
    while time.monotonic() < end:
        try:
            answer = httpx.get(f"{url}/runs/{run_id}/join", params={"timeout": 20}, timeout=40)
            if answer.status_code == 200:
                info: dict[str, Any] = json.loads(answer.text)
                if info["status"] in TERMINAL:
                    return info
            last = f"{answer.status_code} {answer.text[-300:]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(_RETRY_PAUSE)
    raise TimeoutError(f"run {run_id} not ended within {deadline:g}s (last: {last})")


def _frames(lines: Any) -> Any:
    """(id, data) of each frame of an SSE body, `: comments` skipped."""
    frame_id, data = "", []
    for line in lines:
        if line == "":
            if data:
                yield frame_id, "\n".join(data)
            data = []
        elif line.startswith(":"):
            continue
        elif line.startswith("id:"):
            frame_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def replay(url: str, run_id: str) -> list[Frame]:
    """Every frame of an ended run's log, read from the start (`Last-Event-ID: -1`)."""
    headers = {"Last-Event-ID": "-1"}
    with httpx.stream(
        "GET", f"{url}/runs/{run_id}/stream", headers=headers, timeout=_TIMEOUT
    ) as answer:
        assert answer.status_code == 200, f"replay {run_id}: {answer.status_code}"
        return [Frame(i, d) for i, d in _frames(answer.iter_lines()) if d != "[DONE]"]


def thread_messages(url: str, thread_id: str) -> list[dict[str, Any]]:
    """The thread's stored messages (`GET /threads/{id}`)."""
    answer = httpx.get(f"{url}/threads/{thread_id}", timeout=_TIMEOUT)
    assert answer.status_code == 200, f"GET /threads/{thread_id}: {answer.status_code}"
    messages: list[dict[str, Any]] = answer.json()["messages"]
    return messages


@dataclass
class Reader:
    """A client following one run's stream across faults; see the module doc."""

    run_id: str
    first_url: str  # where it connects first (a replica, to be sure where it is)
    url: str  # where it connects again (HAProxy)
    frames: list[Frame] = field(default_factory=list)
    connections: int = 0
    done: bool = False
    errors: list[str] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def start(self) -> Reader:
        """Follow the stream in a thread of its own."""
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float = _DEADLINE) -> Reader:
        """Wait until the stream said `[DONE]` (or the reader gave up)."""
        assert self._thread is not None
        self._thread.join(timeout)
        return self

    def _follow(self) -> None:
        end = time.monotonic() + _DEADLINE
        target = self.first_url
        while not self.done and time.monotonic() < end:
            last = self.frames[-1].id if self.frames else "-1"
            try:
                self._connect(target, last)
            except httpx.HTTPError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            target = self.url
            if not self.done:
                time.sleep(_RETRY_PAUSE)

    def _connect(self, url: str, last_event_id: str) -> None:
        headers = {"Last-Event-ID": last_event_id}
        with httpx.stream(
            "GET", f"{url}/runs/{self.run_id}/stream", headers=headers, timeout=_TIMEOUT
        ) as answer:
            self.connections += 1
            if answer.status_code != 200:
                answer.read()
                self.errors.append(f"{answer.status_code} {answer.text[:200]}")
                return
            for frame_id, data in _frames(answer.iter_lines()):
                if data == "[DONE]":
                    self.done = True
                    return
                self.frames.append(Frame(frame_id, data))
