"""A steady client load on the cluster: threads asking `/invoke` one question after another.

`InvokeLoad(url, clients)` starts `clients` threads, each with its own httpx client, each
asking the default agent a question of its own (`c<client>-q<n>`) in a new thread, again and
again until `stop()`. Every answer is kept (`Outcome`: the question, the status, the body, or
the transport error), so a test can say what each request met during a fault.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx

__all__ = ["InvokeLoad", "Outcome", "is_clear_failure"]

_TIMEOUT = 60.0
_PAUSE = 0.05  # between one client's requests: steady, not a flood


@dataclass(frozen=True)
class Outcome:
    """One request's fate."""

    question: str
    status: int | None  # None: no HTTP answer at all (`error` says what happened)
    body: str = ""
    error: str = ""

    @property
    def answered(self) -> bool:
        """A 200 whose answer is the agent's (`turn 1: <question>`)."""
        return self.status == 200 and f"turn 1: {self.question}" in self.body


def is_clear_failure(outcome: Outcome) -> bool:
    """A failure that says what is wrong: a 503 from parley (JSON `detail`) or from HAProxy."""
    if outcome.status != 503:
        return False
    return "No server is available" in outcome.body or '"detail"' in outcome.body


@dataclass
class InvokeLoad:
    """`clients` threads asking `/invoke` at `url` until `stop()`; see the module doc."""

    url: str
    clients: int = 3
    timeout: float = _TIMEOUT  # a request longer than this is an outcome of its own (hung)
    outcomes: list[Outcome] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> InvokeLoad:
        """Start the clients."""
        for index in range(self.clients):
            thread = threading.Thread(target=self._client, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> list[Outcome]:
        """Stop asking (each client finishes its request in flight) and return every outcome."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(self.timeout + 5)
        return list(self.outcomes)

    def wait_answers(self, count: int, timeout: float = 60.0) -> None:
        """Wait until `count` more questions have been answered (200) than now."""
        target = self.answered() + count
        deadline = time.monotonic() + timeout
        while self.answered() < target:
            if time.monotonic() > deadline:
                last = self.outcomes[-5:]
                raise TimeoutError(f"fewer than {count} answers in {timeout:g}s: {last}")
            time.sleep(0.1)

    def answered(self) -> int:
        """How many questions got their answer so far."""
        with self._lock:
            return sum(o.answered for o in self.outcomes)

    def _client(self, index: int) -> None:
        with httpx.Client(base_url=self.url, timeout=self.timeout) as client:
            number = 0
            while not self._stopping.is_set():
                number += 1
                question = f"c{index}-q{number}"
                try:
                    answer = client.post("/invoke", json={"message": question})
                    outcome = Outcome(question, answer.status_code, answer.text)
                except httpx.HTTPError as exc:
                    outcome = Outcome(question, None, error=f"{type(exc).__name__}: {exc}")
                with self._lock:
                    self.outcomes.append(outcome)
                time.sleep(_PAUSE)
