"""The access log: one line a request, written once its response has been sent.

uvicorn writes its access line when a response starts, before its head is sent: the
record's making, formatting and write (about a tenth of a millisecond here, 5% of a quick
`/invoke`) delay every answer. parley's line is the same (uvicorn's arguments, through
uvicorn's `AccessFormatter` under `parley serve`), written by the app after the response's
last bytes went to the server, when the client already has them:

    INFO:     127.0.0.1:50712 - "POST /invoke HTTP/1.1" 200 OK

`parley serve` sends `ACCESS_LOGGER` to uvicorn's access handler and turns uvicorn's own line
off (`uvicorn_log_config`). Served another way (`uvicorn parley.service.app:create_app`),
the logger has no handler of its own: uvicorn's line is the one written, and parley's records
go to the root logger's handlers if any (at INFO). A stream's line comes at its end; a response
cut short (its client gone) still gets its line, with the status it started with.
"""

from __future__ import annotations

import copy
import logging
from typing import Any
from urllib.parse import quote

from starlette.types import Message, Scope, Send

__all__ = ["ACCESS_LOGGER", "AccessLogged", "uvicorn_log_config"]

ACCESS_LOGGER = "parley.access"
"""The logger of the app's access lines (uvicorn's `uvicorn.access`, for the app's own)."""

log = logging.getLogger(ACCESS_LOGGER)


def uvicorn_log_config(level: str) -> dict[str, Any]:
    """The logging configuration of uvicorn, with `ACCESS_LOGGER` on its access handler.

    At `level`, as uvicorn sets its own access logger. Passed to uvicorn with
    `access_log=False`: uvicorn's own line is off, and parley's is formatted and written as
    uvicorn's was (to standard output, colored on a terminal).
    """
    from uvicorn.config import LOGGING_CONFIG  # noqa: PLC0415 - the server's, only to serve

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"][ACCESS_LOGGER] = {
        "handlers": ["access"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


class AccessLogged:
    """A request's `send`, which logs the request's line once its response was sent.

    Call `close()` when the app is done with the request: a response that started but never
    ended (its client left mid-stream) is logged then.
    """

    __slots__ = ("_request", "_send", "_status")

    def __init__(self, scope: Scope, send: Send) -> None:
        # As the request came: routing may change the scope's path on its way.
        self._request = (
            scope.get("client"),
            scope["method"],
            scope["path"],
            scope["query_string"],
            scope["http_version"],
        )
        self._send = send
        self._status: int | None = None  # set at the response's start, None once logged

    async def __call__(self, message: Message) -> None:
        """Send `message`; after the response's last body, write its line."""
        await self._send(message)
        kind = message["type"]
        if kind == "http.response.start":
            self._status = message["status"]
        elif kind == "http.response.body" and not message.get("more_body", False):
            self.close()

    def close(self) -> None:
        """Write the line if the response started and is not logged yet."""
        status, self._status = self._status, None
        if status is not None and log.isEnabledFor(logging.INFO):
            client, method, path, query, version = self._request
            where = f"{client[0]}:{client[1]}" if client else ""
            # A byte past ASCII (a server may pass one on) is shown escaped, not an error.
            target = quote(path) + (
                f"?{query.decode('ascii', 'backslashreplace')}" if query else ""
            )
            log.info('%s - "%s %s HTTP/%s" %d', where, method, target, version, status)
