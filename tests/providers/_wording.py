"""The one wording of a failure without an answer, which every provider's error must use.

A provider's connection errors and timeouts are worded once, in `parley.models._errors`: the
same failure reads the same sentence whichever provider met it, naming the provider, the
server it asked and what to do. The contract suites match every provider's error against
these patterns, so a provider that words its own fails. The patterns spell the sentences
out (they do not import parley's), so a change of wording shows here too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["CHECK_THE_BASE_URL", "OLLAMA_SERVE", "dropped", "origin", "timed_out", "unreachable"]

CHECK_THE_BASE_URL = "check the base URL and the network"
"""What an unreachable server's error says to do, unless the provider says better."""

OLLAMA_SERVE = "is Ollama running (`ollama serve`)? else check the base URL"
"""What Ollama's says to do instead: it runs on the user's machine."""

_CAUSE = r"\((\w+)(: .+)?\)"
"""The exception under the failure, named in brackets: `(ReadError)`, `(ConnectError: ...)`."""


def origin(url: str) -> str:
    """`scheme://host:port` of a server's URL, as the errors name it."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _who(provider: str, url: str) -> str:
    return f"{re.escape(provider)} at {re.escape(origin(url))}"


def unreachable(provider: str, url: str, hint: str = CHECK_THE_BASE_URL) -> str:
    """Nothing listens at `url`: who could not be reached, why, and what to check."""
    return rf"^cannot reach {_who(provider, url)} {_CAUSE}: {re.escape(hint)}$"


def dropped(provider: str, url: str) -> str:
    """The connection dropped before the answer ended (before any of it, or in a stream)."""
    who = _who(provider, url)
    return rf"^the connection to {who} dropped before the answer ended {_CAUSE}: try again$"


def timed_out(provider: str, url: str) -> str:
    """No answer within the timeout."""
    who = _who(provider, url)
    return rf"^{who} did not answer in time \(\w+\): raise the timeout or try again$"
