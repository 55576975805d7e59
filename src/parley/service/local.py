"""Without auth the service answers this machine only: its address, its names, its pages.

With no API key and no shared secret every request is the user `local`: whatever reaches the
service drives its agents (and their code interpreter) and reads every thread. Binding
127.0.0.1 keeps other machines out, but not the web pages the user visits, whose scripts run
on this machine. So, without auth, a request must pass these checks (with auth none applies:
a page cannot send the user's key, and the service may be served under any name):

1. Its client is this machine (a loopback address), else 403: the app may be served some
   other way than `parley serve` (uvicorn on 0.0.0.0, a container). Who the client is, is
   `client_address`'s answer: behind a reverse proxy (`PARLEY_TRUSTED_PROXIES`), the client
   its `X-Forwarded-For` names, and none when the proxy names none.
2. `Host` names this machine, else 421. DNS rebinding: a page from `http://evil.example:8080`
   points its own name at 127.0.0.1, and its scripts then reach the service as same-origin
   requests, carrying `Host: evil.example:8080`. A name of this machine is `localhost` or a
   name under `.localhost` (browsers resolve those to loopback themselves, RFC 6761), a
   loopback address (127.0.0.0/8, `[::1]`), or an unspecified one (`0.0.0.0`, `[::]`: a
   connection there reaches this machine, and the toolkit's client and app default to
   `http://0.0.0.0:8080`). An address cannot be rebound; only a name can. Any port: rebinding
   forges the name (its URL has the right port anyway), and a tunnel or a proxy on this
   machine changes the port (`ssh -L 9000:localhost:8080`).
3. `Origin`, when sent, is a page of this machine (an `http(s)` origin whose host passes 2,
   any port) or one listed in `PARLEY_CORS_ORIGINS`, else 403. A page of another site can
   post to `http://127.0.0.1:8080/invoke` without asking anyone (a form, a `no-cors` fetch):
   it cannot read the answer, but the run would happen. Browsers send `Origin` with every
   such POST.
4. A JSON body says so (`Content-Type: application/json`, or a `+json` type), else 415. A
   form or a `no-cors` fetch cannot send that type (a `Blob` body sends none, which FastAPI
   would read as JSON all the same); only a request the browser first asks about (CORS), which
   this service allows only for `PARLEY_CORS_ORIGINS`.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from fastapi import Request

from parley.errors import AuthenticationError, ServiceError
from parley.service.settings import IPNetwork, ServiceSettings, is_loopback

__all__ = [
    "FORWARDING_HEADERS",
    "UNNAMED_CLIENT_HINT",
    "check_local_request",
    "client_address",
    "is_local_name",
]

FORWARDING_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")
"""Headers a reverse proxy adds to name the client it forwards for."""
UNNAMED_CLIENT_HINT = (
    "list the proxies in front of this service in PARLEY_TRUSTED_PROXIES (their addresses, "
    "as JSON: '[\"127.0.0.1\"]'), and have them send X-Forwarded-For"
)
"""What to do about a request whose client a proxy did not name."""

_NO_AUTH = "this service has no auth configured"
_SET_AUTH = "set PARLEY_API_KEYS=true or AUTH_SECRET to serve others"
# What a Host header cannot hold besides a name and a port (userinfo, a path, spaces).
_NOT_IN_HOST = set("@/?#\\ \t")


def check_local_request(request: Request, settings: ServiceSettings) -> None:
    """Refuse a request a service without auth must not answer (see the module docstring).

    Raises:
        AuthenticationError: A client on another machine, or a page of another origin (403).
        ServiceError: A `Host` that is not a name of this machine (421), or a JSON body not
            declared as JSON (415).
    """
    client = client_address(request, settings)
    if client is None:
        raise AuthenticationError(
            f"{_NO_AUTH}, so it answers this machine only, and this request came through a "
            f"proxy that did not say for whom; {UNNAMED_CLIENT_HINT}, or {_SET_AUTH}",
            status_code=403,
        )
    if not is_loopback(client):
        raise AuthenticationError(
            f"{_NO_AUTH}, so it answers this machine only; {_SET_AUTH}", status_code=403
        )
    host = request.headers.get("host", "")
    if not _is_local_host(host):
        raise ServiceError(
            f"{_NO_AUTH}, so it answers only requests addressed to this machine by a loopback "
            f"name (localhost, 127.0.0.1, [::1]), not Host {host[:100]!r}; {_SET_AUTH}",
            status_code=421,
        )
    origin = request.headers.get("origin")
    if origin is not None and not _is_allowed_origin(origin, settings.cors_origins):
        raise AuthenticationError(
            f"{_NO_AUTH}, so it answers only pages of this machine, not a page of "
            f"{origin[:100]!r}; list that origin in PARLEY_CORS_ORIGINS to allow it, or "
            f"{_SET_AUTH}",
            status_code=403,
        )
    if _takes_json(request) and not _is_json(request.headers.get("content-type")):
        raise ServiceError(
            "send the body as JSON with 'Content-Type: application/json' (this service has no "
            "auth configured, so it takes no body a web page of another site could send)",
            status_code=415,
        )


def client_address(request: Request, settings: ServiceSettings) -> str | None:
    """The address of the client a request comes from; None when it cannot be told.

    - No connection address (an in-process transport, a Unix socket): this machine.
    - `trusted_proxies` unset: the connection's address, unless the request carries a header
      a proxy adds (`X-Forwarded-For`, `Forwarded`, `X-Real-IP`): then a proxy sent it, and
      its client is unknown (None). A proxy that adds none cannot be told from a client.
    - Set: from one of those proxies, the client `X-Forwarded-For` names (the last address
      in it that is not a trusted proxy: the ones before it are the client's own to write),
      or None without that header; from anyone else, the connection's address.
    """
    if request.client is None:
        return "127.0.0.1"
    peer = request.client.host
    proxies = settings.trusted_proxies
    if proxies is None:
        forwarded = any(name in request.headers for name in FORWARDING_HEADERS)
        return None if forwarded else peer
    networks = settings.proxy_networks
    if not _in(peer, networks):
        return peer
    hops = [
        hop.strip()
        for value in request.headers.getlist("x-forwarded-for")
        for hop in value.split(",")
        if hop.strip()
    ]
    for hop in reversed(hops):
        if not _in(hop, networks):
            return hop
    return hops[0] if hops else None  # all proxies: the first one asked for itself


def _in(address: str, networks: tuple[IPNetwork, ...]) -> bool:
    """Whether an address (as a connection or a header gives it) is in one of `networks`."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False  # not an address (a name, `unknown`): no proxy of ours
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def is_local_name(name: str) -> bool:
    """Whether a host name (no port, IPv6 without brackets) names this machine.

    `localhost` and names under `.localhost`, loopback addresses, and the unspecified ones
    (`0.0.0.0`, `::`), which reach this machine when connected to.
    """
    name = name.lower().removesuffix(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_unspecified or is_loopback(name)


@functools.lru_cache(maxsize=1024)  # asked of every request's Host
def _is_local_host(host: str) -> bool:
    """Whether a `Host` header (a name and an optional port) names this machine."""
    if not host or _NOT_IN_HOST & set(host):
        return False
    return _is_local_authority(host)


def _is_local_authority(authority: str) -> bool:
    try:
        parts = urlsplit(f"//{authority}")
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
    except ValueError:
        return False
    return parts.hostname is not None and is_local_name(parts.hostname)


def _is_allowed_origin(origin: str, allowed: list[str]) -> bool:
    if origin in allowed or "*" in allowed:
        return True
    scheme, _, authority = origin.partition("://")
    if scheme.lower() not in {"http", "https"} or _NOT_IN_HOST & set(authority):
        return False  # `null` (a sandboxed frame, a file), or not an origin at all
    return bool(authority) and _is_local_authority(authority)


def _takes_json(request: Request) -> bool:
    """Whether the request's route reads a JSON body."""
    return getattr(request.scope.get("route"), "body_field", None) is not None


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return False
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )
