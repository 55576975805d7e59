"""A plain HTTP server of the standard library, run from a thread of the test's process.

For tests that need a site on 127.0.0.1 (pages to fetch, a search API, a counter of requests):
they build the `ThreadingHTTPServer` with their handler, and this runs and stops it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """Serve with `server` from a daemon thread; its URL, `http://127.0.0.1:PORT`.

    On exit the server is shut down and closed, and the thread joined (a bounded wait).
    """
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
