"""A TCP proxy that misbehaves on demand, put between one replica and PostgreSQL.

`FaultProxy(upstream_port)` listens on 127.0.0.1 (a free port, `.port`) and forwards every
connection to the upstream, in one of four modes, switched at any time with `set_mode`:

- `pass`: forward both ways as it comes.
- `delay`: hold every chunk `delay_ms` before forwarding it (order kept: one pump per
  direction, each waits its turn), as a slow or distant network would.
- `cut`: close both sides of every open connection at once, and close each new one as soon
  as it is accepted (a database restart, a firewall reset) until the mode changes.
- `blackhole`: keep every connection open and read what arrives, but forward nothing and
  close nothing (a partition: packets dropped): only the client's own timeouts can end it.
  New connections are accepted and held, not connected upstream. As TCP does when a
  partition heals, what was held goes through, in order, once the mode is `pass` or `delay`
  again (a connection that timed out meanwhile was closed by its client, which ends it here).

It runs its own event loop in a daemon thread, so sync tests and scripts can drive it as well
as async ones. `close()` stops it and every connection (bounded).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = ["FaultProxy", "Mode"]

Mode = Literal["pass", "delay", "cut", "blackhole"]
_CHUNK = 65536
_WAIT = 10.0
_T = TypeVar("_T")


@dataclass(eq=False)  # hashed by identity: kept in a set
class _Link:
    """One client connection and its upstream, and their pumps."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for writer in (self.client, self.upstream):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.transport.abort()  # both sides see the connection end at once


class FaultProxy:
    """A TCP proxy from 127.0.0.1:`port` to 127.0.0.1:`upstream_port`; see the module doc."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode: Mode = "pass"
        self.delay_ms = 0
        self.accepted = 0
        self._links: set[_Link] = set()
        self._changed: asyncio.Event | None = None  # made on the loop, set at each switch
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy")
        self._thread.daemon = True
        self._thread.start()
        self._server = self._call(self._listen())
        self.port: int = self._server.sockets[0].getsockname()[1]

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(_WAIT)

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    def set_mode(self, mode: Mode, delay_ms: int = 0) -> None:
        """Switch mode; `cut` also ends every open connection now."""

        async def switch() -> None:
            self.mode, self.delay_ms = mode, delay_ms
            if self._changed is not None:
                self._changed.set()  # wakes what a black hole held
            self._changed = asyncio.Event()
            if mode == "cut":
                for link in list(self._links):
                    link.close()
                self._links.clear()

        self._call(switch())

    def open_connections(self) -> int:
        """How many client connections are open through the proxy now."""

        async def count() -> int:
            return len(self._links)

        return self._call(count())

    def close(self) -> None:
        """Stop listening and end every connection."""

        async def stop() -> None:
            self._server.close()
            for link in list(self._links):
                link.close()
            self._links.clear()

        with contextlib.suppress(Exception):
            self._call(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_WAIT)
        if not self._thread.is_alive():
            self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(writer)
        if self.mode == "cut":
            link.close()
            return
        self._links.add(link)
        link.tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await self._held()  # a black hole: not even connected upstream until it ends
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except asyncio.CancelledError:  # cut while held: closed already (and asyncio's
            return  # server callback would report a cancelled handler as an error)
        except OSError:
            link.close()
            self._links.discard(link)
            return
        link.upstream = up_writer
        link.tasks += [
            asyncio.create_task(self._pump(reader, up_writer, link)),
            asyncio.create_task(self._pump(up_reader, writer, link)),
        ]

    async def _held(self) -> None:
        """Return at once, or, in a black hole, once the mode changes to another."""
        while self.mode == "blackhole":
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        try:
            while data := await reader.read(_CHUNK):
                await self._held()  # read, and held while the black hole lasts
                if self.mode == "delay" and self.delay_ms:
                    await asyncio.sleep(self.delay_ms / 1000)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.close()  # one side ended: end the other (a cut, or a peer closing)
            self._links.discard(link)
