"""SSRF guard for tools that fetch URLs chosen by the model.

:meth:`SsrfGuard.check` parses the URL, allows only http and https, resolves the host once and
refuses it when ANY resolved address is not public: loopback, private (RFC 1918), shared/CGNAT,
link-local (including the cloud metadata address 169.254.169.254), unspecified, multicast,
broadcast, reserved, unique-local, site-local, and IPv6 forms that embed a forbidden IPv4 address
(IPv4-mapped, IPv4-compatible, NAT64, 6to4). Odd numeric host spellings that resolvers accept
(``0x7f000001``, ``2130706433``, ``017700000001``, ``127.1``) are refused before resolving.

The returned :class:`Target` carries the vetted addresses; the caller must connect to one of
them (never resolve the name again), which defeats DNS rebinding between check and connect.
Operators can open specific networks with an allow-list of CIDRs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import FetchError, Refused

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# (host, port) -> the host's addresses as text, like getaddrinfo.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

_N4 = ipaddress.IPv4Network
_N6 = ipaddress.IPv6Network
# First match wins: the metadata address before the link-local block that contains it.
_V4_BLOCKS: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_N4("169.254.169.254/32"), "the cloud metadata address (link-local)"),
    (_N4("0.0.0.0/8"), "an unspecified address"),
    (_N4("127.0.0.0/8"), "a loopback address"),
    (_N4("10.0.0.0/8"), "a private address"),
    (_N4("172.16.0.0/12"), "a private address"),
    (_N4("192.168.0.0/16"), "a private address"),
    (_N4("100.64.0.0/10"), "a shared (CGNAT) address"),
    (_N4("169.254.0.0/16"), "a link-local address"),
    (_N4("224.0.0.0/4"), "a multicast address"),
    (_N4("255.255.255.255/32"), "the broadcast address"),
    (_N4("240.0.0.0/4"), "a reserved address"),
    (_N4("192.0.0.0/24"), "a reserved address"),
    (_N4("192.0.2.0/24"), "a reserved (documentation) address"),
    (_N4("198.51.100.0/24"), "a reserved (documentation) address"),
    (_N4("203.0.113.0/24"), "a reserved (documentation) address"),
    (_N4("198.18.0.0/15"), "a reserved (benchmarking) address"),
    (_N4("192.88.99.0/24"), "a reserved (6to4 relay) address"),
)
_V6_BLOCKS: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_N6("::/128"), "an unspecified address"),
    (_N6("::1/128"), "a loopback address"),
    (_N6("fe80::/10"), "a link-local address"),
    (_N6("fec0::/10"), "a site-local address"),
    (_N6("fc00::/7"), "a unique-local address"),
    (_N6("ff00::/8"), "a multicast address"),
    (_N6("2001::/32"), "a Teredo address"),
    (_N6("64:ff9b:1::/48"), "a local-use NAT64 address"),
    (_N6("100::/64"), "a discard-only address"),
    (_N6("2001:db8::/32"), "a reserved (documentation) address"),
)
_V4_COMPATIBLE = _N6("::/96")
_NAT64 = _N6("64:ff9b::/96")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?", re.IGNORECASE)


@dataclass(frozen=True)
class Target:
    """A vetted URL: connect only to ``addresses`` (resolver order)."""

    url: httpx.URL
    host: str  # ASCII (IDNA) host name or IP literal, without brackets
    port: int
    addresses: tuple[str, ...]

    @property
    def host_header(self) -> str:
        return self.url.netloc.decode("ascii")

    def pinned_url(self, address: str) -> httpx.URL:
        """The URL with its host replaced by ``address`` (the Host header keeps the name)."""
        return self.url.copy_with(host=address)


def parse_ip(text: str) -> IPAddress | None:
    """``text`` as an IP address (an IPv6 zone ``%eth0`` is dropped), or ``None``."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def _v4_reason(ip: ipaddress.IPv4Address) -> str | None:
    for network, reason in _V4_BLOCKS:
        if ip in network:
            return reason
    return None if ip.is_global else "a reserved address"


def _embedded(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    if ip.ipv4_mapped is not None:
        return "an IPv4-mapped", ip.ipv4_mapped
    if ip in _V4_COMPATIBLE:
        return "an IPv4-compatible", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64:
        return "a NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "a 6to4", ip.sixtofour
    return None


def classify(ip: IPAddress) -> str | None:
    """Why ``ip`` must not be fetched (``"a loopback address"``...), or ``None`` if public."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _v4_reason(ip)
    for network, reason in _V6_BLOCKS:
        if ip in network:
            return reason
    embedded = _embedded(ip)
    if embedded is not None:
        form, v4 = embedded
        inner = _v4_reason(v4)
        if inner is not None:
            return f"{form} form of {v4}, {inner}"
        if form == "an IPv4-compatible":
            return "a deprecated IPv4-compatible address"
        return None  # a mapped, NAT64 or 6to4 form of a public IPv4 address
    return None if ip.is_global else "a reserved address"


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from ``getaddrinfo`` (via the event loop), duplicates removed."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _numeric_host(host: str) -> bool:
    labels = host.removesuffix(".").split(".")
    return 1 <= len(labels) <= 4 and all(_NUMERIC_LABEL.fullmatch(label) for label in labels)


class SsrfGuard:
    """Vets URLs before a fetch; see the module docstring."""

    def __init__(self, allow_cidrs: Iterable[str] = (), resolver: Resolver | None = None) -> None:
        self._allow: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(cidr, strict=False) for cidr in allow_cidrs
        )
        self._resolve = resolver or system_resolver

    async def check(self, url: str | httpx.URL) -> Target:
        """The vetted :class:`Target` for ``url``; raises :class:`Refused` (or
        FetchError when the host does not resolve). httpx is imported by the first check, not
        at start-up (see switchboard.net.fetch)."""
        import httpx

        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise Refused(f"not a valid URL ({exc})") from exc
        if parsed.scheme not in ("http", "https"):
            shown = f"{parsed.scheme}://" if parsed.scheme else "a URL without a scheme"
            raise Refused(f"only http:// and https:// URLs can be fetched, not {shown}")
        if parsed.userinfo:
            raise Refused("URLs with credentials (user:password@host) are not fetched")
        host = parsed.raw_host.decode("ascii")
        if not host:
            raise Refused("the URL has no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)

        literal = self._literal(host)
        if literal is not None:
            self._vet(host, literal, literal=True)
            addresses: list[IPAddress] = [literal]
        else:
            if len(host) > 253 or not _HOST_NAME.fullmatch(host):
                raise Refused(f"{host!r} is not a valid host name")
            addresses = [self._parse_resolved(host, a) for a in await self._lookup(host, port)]
            for address in addresses:
                self._vet(host, address, literal=False)
        return Target(parsed, host, port, tuple(str(_connectable(a)) for a in addresses))

    @staticmethod
    def _literal(host: str) -> IPAddress | None:
        """``host`` as a canonical IP literal; refuses odd numeric spellings."""
        ip = parse_ip(host.removesuffix("."))
        if ip is not None:
            return ip
        if not _numeric_host(host):
            return None
        try:
            decoded = ipaddress.IPv4Address(socket.inet_aton(host.removesuffix(".")))
        except OSError as exc:
            raise Refused(f"{host!r} is not a valid numeric address") from exc
        reason = classify(decoded)
        suffix = f", {reason}" if reason else ""
        raise Refused(
            f"{host} is a non-canonical spelling of {decoded}{suffix}; "
            "write IPv4 addresses as four decimal numbers"
        )

    async def _lookup(self, host: str, port: int) -> Sequence[str]:
        try:
            found = await self._resolve(host, port)
        except OSError as exc:
            raise FetchError(f"could not resolve host {host!r}") from exc
        if not found:
            raise FetchError(f"could not resolve host {host!r}")
        return found

    @staticmethod
    def _parse_resolved(host: str, text: str) -> IPAddress:
        ip = parse_ip(text)
        if ip is None:
            raise Refused(f"{host} resolved to {text!r}, which is not an IP address")
        return ip

    def _allowed(self, ip: IPAddress) -> bool:
        return any(ip in network for network in self._allow)

    def _vet(self, host: str, ip: IPAddress, *, literal: bool) -> None:
        if self._allowed(_connectable(ip)):
            return
        reason = classify(ip)
        if reason is None:
            return
        raise Refused(f"{host} is {reason}" if literal else f"{host} resolves to {ip}, {reason}")


def _connectable(ip: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address reaches its IPv4 address: connect (and allow-list) as that."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
