"""SSRF attacks on web_fetch, against real local servers.

127.0.0.2 plays "the public internet" (opened with SB_WEB_FETCH_ALLOW_CIDRS=127.0.0.2/32);
127.0.0.1 and ::1 play the internal network. Every attack must be refused, the internal servers
must never see a request, and a normal fetch must still work afterwards.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from switchboard.net.ssrf import system_resolver
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.tools.web_fetch import WebFetchTool
from tests.fakes.web import MapResolver, Reply, WebServer, redirect

PAGE = "<html><head><title>Public</title></head><body><p>public page</p></body></html>"
MAX_BYTES = 64 * 1024


@dataclass
class Net:
    public: WebServer  # 127.0.0.2, allowed
    internal: WebServer  # 127.0.0.1
    internal6: WebServer | None  # ::1 when the host has IPv6 loopback
    resolver: MapResolver
    registry: ToolRegistry
    ctx: ToolContext

    async def fetch(self, url: str) -> ToolOutput:
        return await self.registry.execute("web_fetch", json.dumps({"url": url}), self.ctx)

    @property
    def p(self) -> int:
        return self.internal.port

    @property
    def p6(self) -> int:
        return self.internal6.port if self.internal6 else self.internal.port

    def internal_hits(self) -> int:
        return len(self.internal.requests) + len(self.internal6.requests if self.internal6 else [])


def _ipv6_server() -> WebServer | None:
    try:
        return WebServer("::1", {"/": Reply(body="internal v6")}).start()
    except OSError:
        return None


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[WebServer, WebServer, WebServer | None]]:
    """Started once for the module; each test starts with empty request logs."""
    public = WebServer("127.0.0.2", {"/": Reply(body=PAGE)}).start()
    internal = WebServer("127.0.0.1", {"/": Reply(body="internal secret")}).start()
    internal6 = _ipv6_server()
    try:
        yield public, internal, internal6
    finally:
        for server in (public, internal, internal6):
            if server is not None:
                server.stop()


@pytest.fixture
def net(servers: tuple[WebServer, WebServer, WebServer | None], ctx: ToolContext) -> Net:
    public, internal, internal6 = servers
    for server in servers:
        if server is not None:
            server.requests.clear()
    resolver = MapResolver(
        {
            "evil.example": ["127.0.0.1"],
            "mixed.example": ["127.0.0.2", "127.0.0.1"],
            "meta.example": ["169.254.169.254"],
        },
        fallback=system_resolver,
    )
    settings = WebSettings(web_fetch_allow_cidrs=["127.0.0.2/32"], web_fetch_max_bytes=MAX_BYTES)
    registry = ToolRegistry([WebFetchTool(settings, resolver=resolver)])
    return Net(public, internal, internal6, resolver, registry, ctx)


async def assert_refused(net: Net, url: str, *expected: str) -> ToolOutput:
    out = await net.fetch(url)
    assert out.is_error, out.content
    assert out.details["error"] == "tool_error"
    for text in expected:
        assert text in out.content, out.content
    assert net.internal_hits() == 0
    after = await net.fetch(net.public.url("/"))
    assert not after.is_error, after.content
    assert "public page" in after.content
    return out


# (id, URL builder, expected message parts)
Attack = tuple[str, Callable[[Net], str], tuple[str, ...]]
DIRECT: list[Attack] = [
    ("loopback", lambda n: f"http://127.0.0.1:{n.p}/", ("127.0.0.1 is a loopback address",)),
    ("loopback-2", lambda n: f"http://127.0.0.3:{n.p}/", ("loopback",)),
    ("private-10", lambda n: "http://10.0.0.1/", ("10.0.0.1 is a private address",)),
    ("private-172", lambda n: "http://172.16.5.4/", ("a private address",)),
    ("private-192", lambda n: "https://192.168.1.1/", ("a private address",)),
    ("cgnat", lambda n: "http://100.64.0.1/", ("shared (CGNAT)",)),
    ("metadata", lambda n: "http://169.254.169.254/latest/meta-data/", ("cloud metadata",)),
    ("link-local", lambda n: "http://169.254.10.1/", ("link-local",)),
    ("unspecified", lambda n: f"http://0.0.0.0:{n.p}/", ("unspecified",)),
    ("multicast", lambda n: "http://224.0.0.1/", ("multicast",)),
    ("broadcast", lambda n: "http://255.255.255.255/", ("broadcast",)),
    ("reserved", lambda n: "http://240.0.0.1/", ("reserved",)),
    ("ipv6-loopback", lambda n: f"http://[::1]:{n.p6}/", ("::1 is a loopback address",)),
    ("ipv6-unspecified", lambda n: f"http://[::]:{n.p6}/", ("unspecified",)),
    ("hex", lambda n: f"http://0x7f000001:{n.p}/", ("non-canonical spelling of 127.0.0.1",)),
    ("decimal", lambda n: f"http://2130706433:{n.p}/", ("non-canonical spelling of 127.0.0.1",)),
    ("octal", lambda n: f"http://017700000001:{n.p}/", ("non-canonical spelling of 127.0.0.1",)),
    ("short", lambda n: f"http://127.1:{n.p}/", ("non-canonical spelling of 127.0.0.1",)),
    ("dotted-hex", lambda n: f"http://0x7f.0.0.1:{n.p}/", ("non-canonical spelling",)),
    ("mapped", lambda n: f"http://[::ffff:127.0.0.1]:{n.p}/", ("IPv4-mapped form of 127.0.0.1",)),
    ("compatible", lambda n: f"http://[::127.0.0.1]:{n.p}/", ("IPv4-compatible form",)),
    ("nat64", lambda n: "http://[64:ff9b::a9fe:a9fe]/", ("NAT64 form of 169.254.169.254",)),
    ("6to4", lambda n: "http://[2002:7f00:1::1]/", ("6to4 form of 127.0.0.1",)),
    ("ula", lambda n: "http://[fd00:ec2::254]/", ("unique-local",)),
    ("ipv6-link-local", lambda n: "http://[fe80::1%25lo]/", ("link-local",)),
    ("site-local", lambda n: "http://[fec0::1]/", ("site-local",)),
    ("ipv6-multicast", lambda n: "http://[ff02::1]/", ("multicast",)),
    ("localhost", lambda n: f"http://localhost:{n.p}/", ("localhost resolves to", "loopback")),
    (
        "dns-loopback",
        lambda n: f"http://evil.example:{n.p}/",
        ("evil.example resolves to 127.0.0.1",),
    ),
    (
        "dns-any-bad",
        lambda n: f"http://mixed.example:{n.p}/",
        ("mixed.example resolves to 127.0.0.1",),
    ),
    ("dns-metadata", lambda n: "http://meta.example/", ("cloud metadata",)),
    ("file", lambda n: "file:///etc/passwd", ("only http:// and https://", "file://")),
    ("gopher", lambda n: f"gopher://127.0.0.2:{n.p}/_GET", ("gopher://",)),
    ("ftp", lambda n: "ftp://127.0.0.2/", ("ftp://",)),
    ("no-scheme", lambda n: "//127.0.0.1/", ("without a scheme",)),
    ("credentials", lambda n: f"http://u:p@127.0.0.2:{n.public.port}/", ("credentials",)),
]


@pytest.mark.parametrize(
    ("url_for", "expected"), [a[1:] for a in DIRECT], ids=[a[0] for a in DIRECT]
)
async def test_direct_attack_refused(
    net: Net, url_for: Callable[[Net], str], expected: tuple[str, ...]
) -> None:
    await assert_refused(net, url_for(net), "refused:", *expected)


REDIRECTS = [
    ("to-loopback", lambda n: f"http://127.0.0.1:{n.internal.port}/", "127.0.0.1 is a loopback"),
    ("to-metadata", lambda n: "http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("to-dns-loopback", lambda n: f"http://evil.example:{n.internal.port}/", "evil.example"),
    ("to-hex", lambda n: f"http://0x7f000001:{n.internal.port}/", "non-canonical"),
    ("to-file", lambda n: "file:///etc/passwd", "file://"),
    ("to-gopher", lambda n: f"gopher://127.0.0.1:{n.internal.port}/_x", "gopher://"),
]


@pytest.mark.parametrize(("status", "target", "expected"), [
    (302, *r[1:]) for r in REDIRECTS] + [(307, REDIRECTS[0][1], REDIRECTS[0][2])],
    ids=[r[0] for r in REDIRECTS] + ["to-loopback-307"],
)  # fmt: skip
async def test_redirect_to_internal_refused(
    net: Net, status: int, target: Callable[[Net], str], expected: str
) -> None:
    net.public.route("/go", redirect(target(net), status))
    out = await assert_refused(net, net.public.url("/go"), "refused:", expected)
    assert [r.path for r in net.public.requests][:1] == ["/go"]  # the first hop was fetched
    assert "cached" not in out.details


async def test_redirect_chain_that_turns_internal_refused(net: Net) -> None:
    net.public.route("/a", redirect("/b"))
    net.public.route("/b", redirect(net.public.url("/c", host="evil.example")))
    await assert_refused(net, net.public.url("/a"), "evil.example resolves to 127.0.0.1")


async def test_too_many_redirects(net: Net) -> None:
    net.public.route("/loop", redirect("/loop"))
    out = await assert_refused(net, net.public.url("/loop"), "too many redirects (more than 5)")
    assert out.content.startswith("refused:")
    assert sum(r.path == "/loop" for r in net.public.requests) == 6


@pytest.mark.parametrize("undeclared", [False, True], ids=["content-length", "streamed"])
async def test_oversize_body_refused(net: Net, undeclared: bool) -> None:
    net.public.route("/big", Reply(body=b"a" * (MAX_BYTES * 4), undeclared=undeclared))
    await assert_refused(net, net.public.url("/big"), "larger than the 64 KiB limit")


async def test_gzip_bomb_refused(net: Net) -> None:
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024))  # ~20 KiB on the wire
    assert len(bomb) < MAX_BYTES
    net.public.route(
        "/bomb", Reply(body=bomb, content_type="text/plain", headers={"Content-Encoding": "gzip"})
    )
    await assert_refused(net, net.public.url("/bomb"), "larger than the 64 KiB limit")


async def test_dns_rebinding_uses_the_vetted_address(net: Net) -> None:
    # First answer public, every later answer internal: resolving once and pinning means the
    # connection still goes to the vetted address, and the name is looked up only once.
    net.resolver.mapping = {"rebind.example": lambda n: ["127.0.0.2"] if n == 1 else ["127.0.0.1"]}
    out = await net.fetch(net.public.url("/", host="rebind.example"))
    assert not out.is_error, out.content
    assert "public page" in out.content
    assert net.resolver.calls == ["rebind.example"]
    assert net.internal_hits() == 0


async def test_allow_list_is_exact(net: Net) -> None:
    # 127.0.0.2/32 is open; its neighbours are not.
    with WebServer("127.0.0.4", {"/": Reply(body="neighbour")}) as neighbour:
        await assert_refused(net, neighbour.url("/"), "127.0.0.4 is a loopback address")
        assert neighbour.requests == []
