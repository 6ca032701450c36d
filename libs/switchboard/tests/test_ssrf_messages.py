"""What the SSRF guard tells the model when it refuses, which port it resolves and connects
to, and the system resolver: the refusal text is all the model sees of why a fetch failed, so
each reason has to be the right one."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pytest

from switchboard.net.errors import Refused
from switchboard.net.ssrf import SsrfGuard, parse_ip, system_resolver
from tests.fakes.web import MapResolver


class PortResolver:
    """Answers every name with one public address and records the (host, port) asked."""

    def __init__(self, answer: Sequence[str] = ("93.184.215.14",)) -> None:
        self.answer = list(answer)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        return self.answer


async def _refusal(guard: SsrfGuard, url: str) -> str:
    with pytest.raises(Refused) as caught:
        await guard.check(url)
    return str(caught.value)


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://example.com/", 80),
        ("https://example.com/", 443),
        ("http://example.com:8443/", 8443),
    ],
)
async def test_the_resolver_and_the_target_get_the_urls_port(url: str, port: int) -> None:
    resolver = PortResolver()
    target = await SsrfGuard(resolver=resolver).check(url)
    assert resolver.asked == [("example.com", port)]
    assert target.port == port


async def test_odd_numeric_spellings_name_the_address_and_the_fix() -> None:
    guard = SsrfGuard(resolver=MapResolver({}))
    # A trailing dot does not hide a numeric spelling, and the message says what it points to.
    for url in ("http://2130706433./", "http://0x7f.0.0.1/", "http://127.0.0.0x1/"):
        host = url.removeprefix("http://").removesuffix("/")
        assert await _refusal(guard, url) == (
            f"refused: {host} is a non-canonical spelling of 127.0.0.1, a loopback address; "
            "write IPv4 addresses as four decimal numbers"
        )


async def test_five_numeric_labels_are_a_host_name_not_an_address() -> None:
    resolver = PortResolver()
    target = await SsrfGuard(resolver=resolver).check("http://1.2.3.4.5/")
    assert resolver.asked == [("1.2.3.4.5", 80)]
    assert target.addresses == ("93.184.215.14",)


async def test_refusals_without_scheme_or_with_credentials() -> None:
    guard = SsrfGuard(resolver=MapResolver({}))
    assert await _refusal(guard, "example.com/page") == (
        "refused: only http:// and https:// URLs can be fetched, not a URL without a scheme"
    )
    assert await _refusal(guard, "https://user:secret@example.com/") == (
        "refused: URLs with credentials (user:password@host) are not fetched"
    )


async def test_resolved_refusals_name_the_host_and_the_address() -> None:
    guard = SsrfGuard(
        resolver=MapResolver({"intranet.example": ["10.0.0.7"], "odd.example": ["bogus"]})
    )
    assert await _refusal(guard, "http://intranet.example/") == (
        "refused: intranet.example resolves to 10.0.0.7, a private address"
    )
    assert await _refusal(guard, "http://odd.example/") == (
        "refused: odd.example resolved to 'bogus', which is not an IP address"
    )
    assert await _refusal(guard, "http://10.0.0.7/") == "refused: 10.0.0.7 is a private address"


async def test_host_names_up_to_253_characters() -> None:
    longest = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(longest) == 253
    resolver = PortResolver()
    assert (await SsrfGuard(resolver=resolver).check(f"http://{longest}/")).host == longest
    too_long = longest + "d"
    message = await _refusal(SsrfGuard(resolver=resolver), f"http://{too_long}/")
    assert message == f"refused: {too_long!r} is not a valid host name"
    assert resolver.asked == [(longest, 80)]


@pytest.mark.parametrize("address", ["2001:2::1", "2001:10::1"])
async def test_other_non_global_ipv6_is_reserved(address: str) -> None:
    # Benchmarking and ORCHID space: not in a named block, not global either.
    message = await _refusal(SsrfGuard(resolver=MapResolver({})), f"http://[{address}]/")
    assert message == f"refused: {address} is a reserved address"


async def test_allow_list_entries_may_carry_host_bits() -> None:
    guard = SsrfGuard(["10.1.2.3/16"], MapResolver({}))
    assert (await guard.check("http://10.1.200.9/")).addresses == ("10.1.200.9",)


def test_an_ipv6_zone_is_dropped() -> None:
    for text in ("fe80::1%eth0", "fe80::1%eth0%x"):
        ip = parse_ip(text)
        assert ip == ipaddress.ip_address("fe80::1")
        assert str(ip) == "fe80::1"


async def test_the_system_resolver_answers_the_hosts_addresses() -> None:
    assert await system_resolver("127.0.0.2", 80) == ["127.0.0.2"]
    found = await system_resolver("localhost", 443)
    assert "127.0.0.1" in found or "::1" in found
    assert len(found) == len(set(found))  # each address once, however many socket kinds
    guard = SsrfGuard()
    assert (await _refusal(guard, "http://localhost:8080/")).startswith(
        "refused: localhost resolves to "
    )
