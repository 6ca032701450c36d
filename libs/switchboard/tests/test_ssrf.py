"""The SSRF guard's address classification, allow-list and URL vetting, without a network."""

from __future__ import annotations

import ipaddress

import pytest

from switchboard.net.errors import FetchError, Refused
from switchboard.net.ssrf import SsrfGuard, classify
from tests.fakes.web import MapResolver

FORBIDDEN = {
    "127.0.0.1": "a loopback address",
    "127.255.255.254": "a loopback address",
    "10.1.2.3": "a private address",
    "172.31.255.255": "a private address",
    "192.168.0.1": "a private address",
    "100.64.0.1": "a shared (CGNAT) address",
    "100.127.255.255": "a shared (CGNAT) address",
    "169.254.169.254": "the cloud metadata address (link-local)",
    "169.254.1.1": "a link-local address",
    "0.0.0.0": "an unspecified address",
    "0.1.2.3": "an unspecified address",
    "224.0.0.1": "a multicast address",
    "239.255.255.250": "a multicast address",
    "255.255.255.255": "the broadcast address",
    "240.0.0.1": "a reserved address",
    "192.0.0.8": "a reserved address",
    "192.0.2.1": "a reserved (documentation) address",
    "198.18.0.1": "a reserved (benchmarking) address",
    "::": "an unspecified address",
    "::1": "a loopback address",
    "fe80::1": "a link-local address",
    "fec0::1": "a site-local address",
    "fc00::1": "a unique-local address",
    "fd00:ec2::254": "a unique-local address",
    "ff02::1": "a multicast address",
    "2001:db8::1": "a reserved (documentation) address",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2": "a Teredo address",
    "64:ff9b:1::1": "a local-use NAT64 address",
    "::ffff:127.0.0.1": "an IPv4-mapped form of 127.0.0.1, a loopback address",
    "::ffff:169.254.169.254": "an IPv4-mapped form of 169.254.169.254, the cloud metadata address",
    "::127.0.0.1": "an IPv4-compatible form of 127.0.0.1, a loopback address",
    "::8.8.8.8": "a deprecated IPv4-compatible address",
    "64:ff9b::10.0.0.1": "a NAT64 form of 10.0.0.1, a private address",
    "2002:a9fe:a9fe::": "a 6to4 form of 169.254.169.254, the cloud metadata address",
    "2002:c0a8:0101::1": "a 6to4 form of 192.168.1.1, a private address",
}
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "2a00:1450:4001::200e",
          "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:0808:0808::1"]  # fmt: skip


@pytest.mark.parametrize(("address", "reason"), FORBIDDEN.items(), ids=list(FORBIDDEN))
def test_forbidden_addresses(address: str, reason: str) -> None:
    found = classify(ipaddress.ip_address(address))
    assert found is not None and found.startswith(reason), found


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None


async def test_target_pins_the_resolved_addresses() -> None:
    resolver = MapResolver(
        {"example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]}
    )
    target = await SsrfGuard(resolver=resolver).check("https://example.com/a?b=1#frag")
    assert target.addresses == ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    assert (target.host, target.port, target.host_header) == ("example.com", 443, "example.com")
    assert str(target.pinned_url(target.addresses[1])) == (
        "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/a?b=1#frag"
    )
    assert resolver.calls == ["example.com"]


async def test_idna_host_is_resolved_in_ascii() -> None:
    resolver = MapResolver({"xn--bcher-kva.example": ["8.8.8.8"]})
    target = await SsrfGuard(resolver=resolver).check("http://bücher.example:8080/")
    assert (target.host_header, target.addresses) == ("xn--bcher-kva.example:8080", ("8.8.8.8",))


async def test_mapped_address_connects_as_ipv4() -> None:
    target = await SsrfGuard().check("http://[::ffff:8.8.8.8]/")
    assert target.addresses == ("8.8.8.8",)


async def test_allow_list() -> None:
    guard = SsrfGuard(["10.1.0.0/16", "fd12::/16"], MapResolver({"docs.internal": ["10.1.2.3"]}))
    assert (await guard.check("http://docs.internal/")).addresses == ("10.1.2.3",)
    assert (await guard.check("http://[fd12::5]/")).addresses == ("fd12::5",)
    assert (await guard.check("http://[::ffff:10.1.9.9]/")).addresses == ("10.1.9.9",)
    for url in ("http://10.2.0.1/", "http://127.0.0.1/", "http://[fd13::1]/"):
        with pytest.raises(Refused):
            await guard.check(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://0x7f000001/", "refused: 0x7f000001 is a non-canonical spelling of 127.0.0.1"),
        ("http://0x08080808/", "refused: 0x08080808 is a non-canonical spelling of 8.8.8.8;"),
        ("http://1.2.3/", "refused: 1.2.3 is a non-canonical spelling of 1.2.0.3;"),
        ("http://999.1.1.1/", "refused: not a valid URL"),
        ("http://999.1.1/", "refused: '999.1.1' is not a valid numeric address"),
        ("http://127.0.0.1./", "refused: 127.0.0.1. is a loopback address"),
        ("mailto:a@b.c", "refused: only http:// and https:// URLs can be fetched, not mailto://"),
        ("http:///path", "refused: the URL has no host"),
        ("http://exa mple.com/", "refused: 'exa%20mple.com' is not a valid host name"),
        ("http://a..b/", "refused: 'a..b' is not a valid host name"),
    ],
)
async def test_refused_urls(url: str, message: str) -> None:
    with pytest.raises(Refused) as caught:
        await SsrfGuard(resolver=MapResolver({})).check(url)
    assert str(caught.value).startswith(message), caught.value


async def test_unresolvable_and_odd_resolver_answers() -> None:
    guard = SsrfGuard(resolver=MapResolver({"empty.example": [], "odd.example": ["not-an-ip"]}))
    for host in ("missing.example", "empty.example"):
        with pytest.raises(FetchError, match=f"could not resolve host '{host}'"):
            await guard.check(f"http://{host}/")
    with pytest.raises(Refused, match="not an IP address"):
        await guard.check("http://odd.example/")
