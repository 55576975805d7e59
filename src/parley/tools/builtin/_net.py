"""Fetching a URL a model chose without reaching what it must not (server-side request forgery).

`fetch` GETs an `http(s)` URL through httpx, and:

- resolves the host itself and refuses the URL when ANY of its addresses is loopback, private
  (RFC 1918, CGNAT 100.64/10, fc00::/7), link-local (169.254/16, where clouds serve instance
  metadata, and fe80::/10), unspecified, multicast, reserved or otherwise not public; an IPv4
  address carried inside an IPv6 one (`::ffff:127.0.0.1`, 6to4, NAT64) is judged as the IPv4
  address. A policy may allow some hosts or networks (`allowed_hosts`, and the operator's
  `$PARLEY_FETCH_ALLOWED_HOSTS`, comma-separated) or every address (`allow_private`);
- connects to the very address it checked: the request goes to the IP, while the `Host` header
  and the TLS server name keep the host name, so the certificate is still verified for the
  name. No second lookup happens, so a DNS answer that changes between check and connection
  (DNS rebinding) cannot move the request;
- follows redirects itself, checking each hop the same way, at most `max_redirects`;
- never goes through a proxy from the environment (a proxy would resolve the name itself);
- reads at most `max_bytes` of the body (streamed; past the cap it stops and says so), and
  gives the whole fetch, every hop included, one deadline (`timeout`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from parley.errors import ToolExecutionError
from parley.models.base import ChatModel
from parley.tools.builtin._common import optional_import

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "FetchNotAllowedError",
    "FetchPolicy",
    "Fetched",
    "ResponseTooLargeError",
    "blocked_reason",
    "fetch",
    "resolve",
]

ALLOWED_HOSTS_ENV = "PARLEY_FETCH_ALLOWED_HOSTS"
"""Hosts, addresses or networks every fetching tool may reach, comma-separated (operators)."""

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves a host and port to IP addresses (the seam tests replace)."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598 (CGNAT): not `is_private` in 3.11
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: an IPv4 address in the low 32 bits


class FetchNotAllowedError(ToolExecutionError):
    """The URL (or a redirect on the way) points where this tool may not go."""


class ResponseTooLargeError(ToolExecutionError):
    """The response is larger than the policy's `max_bytes`; the rest was not read."""


async def resolve(host: str, port: int) -> list[str]:
    """The addresses of `host`, as the system resolver gives them (each once, in order)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """What a fetch may reach and how much it may read.

    Attributes:
        allow_private: Reach loopback, private and link-local addresses too.
        allowed_hosts: Host names (matched exactly, any case), IP addresses or networks
            (`10.0.0.0/8`) that may be reached although they are not public.
        max_bytes: The most body bytes read.
        timeout: Seconds the whole fetch (every redirect included) may take.
        max_redirects: The most redirects followed.
        verify: TLS verification as httpx takes it (`True`, a CA bundle path or an
            `ssl.SSLContext`, for a private CA).
        resolver: Resolves names instead of the system resolver (tests; None: `resolve`).
    """

    allow_private: bool = False
    allowed_hosts: tuple[str, ...] = ()
    max_bytes: int = 10 * 1024 * 1024
    timeout: float = 30.0
    max_redirects: int = 5
    verify: bool | str | ssl.SSLContext = True
    resolver: Resolver | None = field(default=None, compare=False)

    @classmethod
    def from_config(cls, cfg: dict[str, Any], **defaults: Any) -> FetchPolicy:
        """The policy a tool's configuration sets: `allow_private` and `allowed_hosts`."""
        hosts = cfg.get("allowed_hosts") or ()
        if isinstance(hosts, str):
            hosts = hosts.split(",")
        return cls(
            allow_private=bool(cfg.get("allow_private", False)),
            allowed_hosts=tuple(str(h) for h in hosts),
            **defaults,
        )

    def allowances(self) -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
        """The host names and networks allowed, the environment's included."""
        entries = [*self.allowed_hosts, *os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")]
        names: set[str] = set()
        networks = []
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                names.add(entry.lower().rstrip("."))
        return names, networks


@dataclass(frozen=True)
class Fetched:
    """A fetched response.

    Attributes:
        url: Where the body came from (after redirects).
        status_code: The final response's status.
        media_type: Its `Content-Type`, if it had one.
        content: The body (at most the policy's `max_bytes`).
    """

    url: str
    status_code: int
    media_type: str | None
    content: bytes


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def blocked_reason(address: str) -> str | None:
    """Why an address is no public one (`"loopback"`, `"private"`, ...), or None if it is."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(ip, ipaddress.IPv6Address) and (inner := _embedded_ipv4(ip)) is not None:
        ip = inner
    for reason, hit in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private or ip in _SHARED),
        ("non-public", not ip.is_global),
    ):
        if hit:
            return reason
    return None


def _fail(
    tool: str, message: str, error: type[ToolExecutionError] = ToolExecutionError
) -> NoReturn:
    raise error(message, tool_name=tool)


def _parse(url: str, tool: str) -> httpx.URL:
    http = optional_import("httpx")
    try:
        parsed: httpx.URL = http.URL(url)
    except (http.InvalidURL, ValueError) as exc:
        _fail(tool, f"{url!r} is not a valid URL: {exc}", FetchNotAllowedError)
    if parsed.scheme not in ("http", "https"):
        _fail(tool, f"only http and https URLs may be fetched, not {url!r}", FetchNotAllowedError)
    if not parsed.raw_host:
        _fail(tool, f"{url!r} names no host", FetchNotAllowedError)
    return parsed


def _literal(host: str) -> list[str]:
    """The address an IP literal host names (no lookup), else nothing."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        return []


async def _addresses(url: httpx.URL, policy: FetchPolicy, tool: str) -> list[str]:
    """The host's addresses, each checked against the policy (all of them, or none is used)."""
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        found = _literal(host) or list(await (policy.resolver or resolve)(host, port))
    except OSError as exc:
        _fail(tool, f"cannot resolve {host}: {exc}")
    if not found:
        _fail(tool, f"cannot resolve {host}: no addresses")
    if policy.allow_private:
        return found
    names, networks = policy.allowances()
    if host.lower().rstrip(".") in names:
        return found
    for address in found:
        reason = blocked_reason(address)
        if reason and not any(ipaddress.ip_address(address.split("%")[0]) in n for n in networks):
            shown = f"{host} is" if host == address else f"{host} resolves to {address}, which is"
            _fail(
                tool,
                f"refused to fetch {url}: {shown} a {reason} address. Only public addresses "
                "may be fetched unless the tool's allowed_hosts (or allow_private) says so",
                FetchNotAllowedError,
            )
    return found


async def _send(
    client: httpx.AsyncClient, url: httpx.URL, addresses: list[str], tool: str
) -> httpx.Response:
    """Send the GET to each checked address in turn, until one connects."""
    http = optional_import("httpx")
    host = url.raw_host.decode("ascii")
    headers = {"Host": url.netloc.decode("ascii")}
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    failure: Exception | None = None
    for address in addresses:
        pinned = url.copy_with(host=address.split("%")[0])
        ChatModel.check_allowed(str(pinned))  # the test suite's switch, on the real address
        request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
        try:
            return await client.send(request, stream=True)
        except http.ConnectError as exc:
            failure = exc
    _fail(tool, f"cannot connect to {host}: {failure}")


async def _body(response: httpx.Response, url: httpx.URL, limit: int, tool: str) -> bytes:
    """At most `limit` bytes of the body; past the cap the fetch stops (nothing more read)."""
    too_large = f"{url} is larger than {limit} bytes (the most this tool reads)"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        _fail(tool, too_large, ResponseTooLargeError)
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            _fail(tool, too_large, ResponseTooLargeError)
        chunks.append(chunk)
    return b"".join(chunks)


async def _hop(url: httpx.URL, policy: FetchPolicy, tool: str) -> str | Fetched:
    """One request: where a redirect points, or the fetched response."""
    http = optional_import("httpx")
    addresses = await _addresses(url, policy, tool)
    # A client per hop: a pooled TLS connection made for one name is never reused for another.
    client = http.AsyncClient(trust_env=False, verify=policy.verify, timeout=policy.timeout)
    async with client:
        response = await _send(client, url, addresses, tool)
        try:
            location = response.headers.get("location")
            if response.status_code in _REDIRECTS and location:
                return str(url.join(location))
            if response.status_code >= 400:
                status = f"{response.status_code} {response.reason_phrase}"
                _fail(tool, f"fetching {url} failed: {status}")
            content = await _body(response, url, policy.max_bytes, tool)
        finally:
            await response.aclose()  # unread bytes are dropped with the connection
    media_type = response.headers.get("content-type")
    return Fetched(str(url), response.status_code, media_type, content)


async def _follow(url: str, policy: FetchPolicy, tool: str) -> Fetched:
    target = url
    for hop in range(policy.max_redirects + 1):
        try:
            answer = await _hop(_parse(target, tool), policy, tool)
        except FetchNotAllowedError as exc:
            if hop:  # say where the model's URL led, or the refusal reads as its mistake
                _fail(tool, f"{exc} (redirected there from {url})", type(exc))
            raise
        if isinstance(answer, Fetched):
            return answer
        target = answer
    _fail(tool, f"{url} redirected more than {policy.max_redirects} times")


async def fetch(url: str, policy: FetchPolicy, *, tool_name: str) -> Fetched:
    """GET a model-chosen `http(s)` URL under `policy` (see the module's docstring).

    Raises:
        FetchNotAllowedError: The URL, or a redirect, is not http(s) or reaches an address the
            policy does not allow.
        ResponseTooLargeError: The body is larger than `policy.max_bytes`.
        ToolExecutionError: The fetch failed, answered an error status, took longer than
            `policy.timeout` or redirected more than `policy.max_redirects` times.
    """
    http = optional_import("httpx")
    try:
        async with asyncio.timeout(policy.timeout):
            return await _follow(url, policy, tool_name)
    except TimeoutError:
        _fail(tool_name, f"fetching {url} did not finish within {policy.timeout} seconds")
    except http.HTTPError as exc:
        _fail(tool_name, f"fetching {url} failed: {type(exc).__name__}: {exc}")
