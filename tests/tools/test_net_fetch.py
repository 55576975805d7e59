"""The guarded fetcher against real servers on 127.0.0.1, with names given by an injected resolver.

Names end in `.invalid` (RFC 6761: they never resolve), so a request that reaches the local
server through one proves the fetcher connected to the address it checked rather than asking
the system's resolver again.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Sequence

import pytest

from parley.errors import ToolExecutionError
from parley.tools.builtin._net import (
    ALLOWED_HOSTS_ENV,
    FetchNotAllowedError,
    FetchPolicy,
    ResponseTooLargeError,
    blocked_reason,
    fetch,
)
from tests._requires import unavailable
from tests.tools._web import Body, Endless, Redirect, Site, serve

pytestmark = pytest.mark.timeout(60)


class Resolver:
    """Answers from a table and counts the lookups (a DNS server a test controls)."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host in self.table:
            return list(self.table[host])
        raise OSError(f"unknown host {host}")


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as running:
        running.routes["/doc.txt"] = Body(b"hello")
        yield running


def policy(resolver: Resolver | None = None, **values: object) -> FetchPolicy:
    return FetchPolicy(resolver=resolver, timeout=10.0, **values)  # type: ignore[arg-type]


# -- which addresses ---------------------------------------------------------------------------


async def test_loopback_is_refused_by_default(site: Site) -> None:
    with pytest.raises(FetchNotAllowedError, match=r"127\.0\.0\.1 is a loopback address"):
        await fetch(f"{site.base}/doc.txt", policy(), tool_name="t")
    assert site.seen == []


async def test_loopback_is_fetched_when_a_setting_allows_it(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{site.base}/doc.txt"
    assert (await fetch(url, policy(allowed_hosts=("127.0.0.1",)), tool_name="t")).content == (
        b"hello"
    )
    assert (await fetch(url, policy(allowed_hosts=("127.0.0.0/8",)), tool_name="t")).content
    assert (await fetch(url, policy(allow_private=True), tool_name="t")).content == b"hello"
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "intranet.invalid, 127.0.0.1")
    fetched = await fetch(url, policy(), tool_name="t")
    assert fetched.content == b"hello"
    assert fetched.media_type == "text/plain"
    assert len(site.seen) == 4


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),  # CGNAT
        ("169.254.169.254", "link-local"),  # the clouds' metadata service
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fd12:3456::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local"),
        ("2002:7f00:1::1", "loopback"),  # 6to4 around 127.0.0.1
        ("64:ff9b::a00:1", "private"),  # NAT64 around 10.0.0.1
    ],
)
async def test_a_public_looking_name_resolving_to_a_private_address_is_refused(
    address: str, reason: str
) -> None:
    resolver = Resolver({"files.example.com": [address]})
    with pytest.raises(FetchNotAllowedError, match=f"resolves to {address}, which is a {reason}"):
        await fetch("http://files.example.com/report.pdf", policy(resolver), tool_name="t")
    assert resolver.asked == ["files.example.com"]


def test_public_addresses_pass() -> None:
    for address in ("8.8.8.8", "93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8"):
        assert blocked_reason(address) is None, address


async def test_one_private_address_among_public_ones_is_enough_to_refuse(site: Site) -> None:
    resolver = Resolver({"mixed.invalid": ["93.184.216.34", "127.0.0.1"]})
    with pytest.raises(FetchNotAllowedError, match=r"127\.0\.0\.1, which is a loopback"):
        await fetch(f"http://mixed.invalid:{site.port}/doc.txt", policy(resolver), tool_name="t")
    assert site.seen == []


async def test_the_connection_goes_to_the_checked_address_without_a_second_lookup(
    site: Site,
) -> None:
    resolver = Resolver({"docs.parley.invalid": ["127.0.0.1"]})
    allowed = policy(resolver, allowed_hosts=("docs.parley.invalid",))
    fetched = await fetch(f"http://docs.parley.invalid:{site.port}/doc.txt", allowed, tool_name="t")
    assert fetched.content == b"hello"
    assert fetched.url == f"http://docs.parley.invalid:{site.port}/doc.txt"
    # One lookup, and the server was asked for the name it was reached by.
    assert resolver.asked == ["docs.parley.invalid"]
    assert site.seen == [("/doc.txt", f"docs.parley.invalid:{site.port}")]


# -- redirects ---------------------------------------------------------------------------------


async def test_a_redirect_to_a_disallowed_address_is_refused(site: Site) -> None:
    resolver = Resolver({"docs.parley.invalid": ["127.0.0.1"]})
    allowed = policy(resolver, allowed_hosts=("docs.parley.invalid",))
    site.routes["/go"] = Redirect(f"http://127.0.0.1:{site.port}/secret")
    site.routes["/secret"] = Body(b"internal")
    with pytest.raises(FetchNotAllowedError, match=r"loopback address.*redirected there from"):
        await fetch(f"http://docs.parley.invalid:{site.port}/go", allowed, tool_name="t")
    assert site.paths == ["/go"]  # /secret was never asked for


async def test_redirects_to_other_schemes_are_refused(site: Site) -> None:
    site.routes["/go"] = Redirect("file:///etc/passwd")
    with pytest.raises(FetchNotAllowedError, match=r"only http and https.*redirected there"):
        await fetch(f"{site.base}/go", policy(allow_private=True), tool_name="t")


async def test_allowed_redirects_are_followed_and_bounded(site: Site) -> None:
    site.routes["/old"] = Redirect("/doc.txt", status=301)
    allowed = policy(allow_private=True, max_redirects=3)
    fetched = await fetch(f"{site.base}/old", allowed, tool_name="t")
    assert fetched.content == b"hello"
    assert fetched.url == f"{site.base}/doc.txt"
    site.routes["/loop"] = Redirect("/loop")
    site.seen.clear()
    with pytest.raises(ToolExecutionError, match="redirected more than 3 times"):
        await fetch(f"{site.base}/loop", allowed, tool_name="t")
    assert site.paths == ["/loop"] * 4


# -- how much, how long ------------------------------------------------------------------------


async def test_an_endless_body_is_cut_at_the_cap(site: Site) -> None:
    endless = Endless()
    site.routes["/huge"] = endless
    capped = policy(allow_private=True, max_bytes=100_000)
    with pytest.raises(ResponseTooLargeError, match="larger than 100000 bytes"):
        await fetch(f"{site.base}/huge", capped, tool_name="t")
    # The fetcher hung up: the server's next writes failed (it would stream forever).
    assert endless.hung_up.wait(timeout=10)


async def test_an_announced_length_over_the_cap_is_refused_before_the_body(site: Site) -> None:
    site.routes["/big"] = Body(b"x" * 10, declared_length=10**12)
    with pytest.raises(ResponseTooLargeError, match="larger than 1000 bytes"):
        await fetch(f"{site.base}/big", policy(allow_private=True, max_bytes=1000), tool_name="t")


@pytest.mark.timeout(30)
async def test_a_trickling_server_meets_one_deadline_for_the_whole_fetch(site: Site) -> None:
    # Each chunk comes well within any per-read timeout; only a deadline ends this.
    trickle = Endless(delay=0.05, chunk=b"x", limit=200)  # 10 seconds of it
    site.routes["/slow"] = trickle
    slow = FetchPolicy(allow_private=True, timeout=0.5, max_bytes=10**9)
    with pytest.raises(ToolExecutionError, match=r"did not finish within 0\.5 seconds"):
        await fetch(f"{site.base}/slow", slow, tool_name="t")
    assert trickle.hung_up.wait(timeout=10)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/x", "file:///etc/passwd", "gopher://h/", "http:///nohost", "not a url"],
)
async def test_only_http_urls_with_a_host(url: str) -> None:
    with pytest.raises(FetchNotAllowedError):
        await fetch(url, policy(Resolver({})), tool_name="t")


async def test_an_error_status_and_an_unknown_host_are_tool_errors(site: Site) -> None:
    with pytest.raises(ToolExecutionError, match="404"):
        await fetch(f"{site.base}/missing", policy(allow_private=True), tool_name="t")
    with pytest.raises(ToolExecutionError, match=r"cannot resolve nowhere\.invalid"):
        await fetch("http://nowhere.invalid/", policy(Resolver({})), tool_name="t")


# -- TLS to a pinned address -------------------------------------------------------------------


def _tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    try:
        import trustme  # noqa: PLC0415  (a test-only package of the dev group)
    except ImportError:
        unavailable("trustme is not installed", "it is in the dev dependency group")
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("docs.parley.invalid").configure_cert(server)
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return server, client


async def test_https_to_the_checked_address_still_verifies_the_name() -> None:
    server, client = _tls()
    with serve(tls=server) as site:
        site.routes["/doc.txt"] = Body(b"secure")
        resolver = Resolver({"docs.parley.invalid": ["127.0.0.1"], "other.invalid": ["127.0.0.1"]})
        names = ("docs.parley.invalid", "other.invalid")
        pinned = policy(resolver, allowed_hosts=names, verify=client)
        url = f"https://docs.parley.invalid:{site.port}/doc.txt"
        assert (await fetch(url, pinned, tool_name="t")).content == b"secure"
        # The certificate names docs.parley.invalid only: another name on the same address fails.
        with pytest.raises(ToolExecutionError, match=r"CERTIFICATE_VERIFY_FAILED|hostname"):
            await fetch(f"https://other.invalid:{site.port}/doc.txt", pinned, tool_name="t")
