"""Helpers for the tests of queued runs: a model held at a gate, and waiting on runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

from parley.models.base import ChatRequest
from parley.models.testing import ScriptedModel
from tests.service._support import wait_for


class Gated(ScriptedModel):
    """A model that streams `before` characters of each answer, then waits for `gate`.

    Opening the gate lets every answer through; a run on it cannot end on its own while it
    is shut, so whatever ends it came from outside.
    """

    def __init__(self, *steps: Any, before: int = 3) -> None:
        super().__init__(list(steps), chunk_size=1)
        self.before = before
        self.gate = asyncio.Event()
        self.at_gate = asyncio.Event()
        self.asked: list[str] = []

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Any]:
        self.asked.append(request.messages[-1].text)
        sent = 0
        async for delta in super()._stream(request):
            if sent >= self.before and not self.gate.is_set():
                self.at_gate.set()
                await self.gate.wait()
            sent += 1
            yield delta

    def pass_later_runs(self) -> None:
        """Let answers asked from now on through (a run held at the gate stays held)."""
        self.before = 10**9


def echo(request: ChatRequest) -> str:
    """`echo: <last message>`."""
    return f"echo: {request.messages[-1].text}"


async def run_status(client: httpx.AsyncClient, run_id: str, **kw: Any) -> str:
    """The run's status (`gone` when it is 404)."""
    got = await client.get(f"/runs/{run_id}", **kw)
    if got.status_code == 404:
        return "gone"
    status: str = got.json()["status"]
    return status


async def wait_status(
    client: httpx.AsyncClient, run_id: str, *statuses: str, timeout: float = 10, **kw: Any
) -> str:
    """Wait until the run is in one of `statuses`; that status."""

    async def check() -> str | None:
        status = await run_status(client, run_id, **kw)
        return status if status in statuses else None

    return await wait_for(check, f"run {run_id} to be {statuses}", timeout=timeout, interval=0.05)


async def thread_texts(client: httpx.AsyncClient, thread_id: str, **kw: Any) -> list[str]:
    """The thread's messages as `role: text`."""
    detail = (await client.get(f"/threads/{thread_id}", **kw)).json()
    return [
        f"{m['role']}: {''.join(b.get('text', '') for b in m['content'])}"
        for m in detail["messages"]
    ]
