"""Request bodies are bounded before they are read, parsed or authenticated: a 100 MB body sent
to the gateway process (declared with Content-Length, or chunked) is refused with 413 while the
gateway's memory stays flat, and it answers the next request. Smaller limits, the chunked
path and the webhook route are checked on the app itself."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .gateway_harness import Gateway, started
from .gateway_process import GatewayProcess, gateway_process

MiB = 1024 * 1024
ATTACK = 100 * MiB
BLOCK = b"x" * (64 * 1024)  # the one block the client sends over and over: it holds 64 KiB
CHAT = "/v1/chat/completions"


async def lazy_body(total: int, sent: list[int]) -> AsyncIterator[bytes]:
    """``total`` bytes, made as they are sent; ``sent[0]`` counts them."""
    while sent[0] < total:
        yield BLOCK
        sent[0] += len(BLOCK)


class PeakRss:
    """The highest resident memory of the gateway process while the block runs."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.gw = gw
        self.before = gw.rss()
        self.peak = self.before
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, self.gw.rss())

    def __enter__(self) -> PeakRss:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.before


def assert_too_large(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "request_too_large",
        None,
    )
    assert f"({limit} bytes)" in error["message"]


@pytest.fixture
def process(nats_url: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    with gateway_process(nats_url, tmp_path / "gateway") as gw:
        yield gw


# (token, Content-Length declared, status): a declared length is refused from the headers
# alone, token or not; a chunked body is counted as it is read, and without a token nothing
# of it is read at all (401 first).
ATTACKS = [(False, True, 413), (True, True, 413), (True, False, 413), (False, False, 401)]


async def test_a_100_mb_body_is_refused_and_the_gateway_goes_on(process: GatewayProcess) -> None:
    limit = 2 * MiB  # the default
    seen: list[str] = []
    with PeakRss(process) as memory:
        async with httpx.AsyncClient(base_url=process.url, timeout=120) as client:
            for with_token, declared, status in ATTACKS:
                sent = [0]
                headers = {"Content-Type": "application/json"}
                headers |= process.auth if with_token else {}
                if declared:
                    headers["Content-Length"] = str(ATTACK)
                response = await client.post(CHAT, content=lazy_body(ATTACK, sent), headers=headers)
                assert response.status_code == status, (with_token, declared, response.text)
                if status == 413:
                    assert_too_large(response, limit)
                seen.append(f"token={with_token} length={declared}: {status}, {sent[0]} sent")
                after = await client.post(
                    "/api/sessions/main:api:after/messages",
                    json={"text": "still here"},
                    headers=process.auth,
                )
                assert after.status_code == 202, after.text
    print(f"gateway RSS {memory.before / MiB:.0f} MiB, +{memory.growth / MiB:.1f} MiB at peak")
    print("\n".join(seen))
    # Holding the body (or a good part of it) would show up as tens of MiB.
    assert memory.growth < 32 * MiB, f"+{memory.growth / MiB:.1f} MiB"
    assert process.proc.poll() is None


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path, max_request_bytes=4096) as gateway:
        yield gateway


def chat(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "switchboard", "messages": [{"role": "user", "content": text}], **extra}


async def chunks(body: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


async def test_the_limit_is_the_setting_and_a_body_within_it_passes(gw: Gateway) -> None:
    headers = {**gw.auth, "Content-Type": "application/json"}
    over = httpx.Request("POST", "/", json=chat("x" * 4096)).content
    assert len(over) > 4096
    assert_too_large(await gw.client.post(CHAT, content=over, headers=headers), 4096)
    streamed = await gw.client.post(CHAT, content=chunks(over), headers=headers)
    assert "content-length" not in streamed.request.headers  # counted, not declared
    assert_too_large(streamed, 4096)
    assert await gw.inbound() == []

    within = httpx.Request("POST", "/", json=chat("y" * 3900, user="alice")).content
    assert len(within) <= 4096
    response = await gw.client.post(CHAT, content=chunks(within), headers=headers)
    assert response.status_code == 504  # accepted: no agent answers here
    [(_, _, message)] = await gw.inbound()
    assert message.text == "y" * 3900


async def test_a_webhook_body_is_bounded_too(gw: Gateway) -> None:
    """Channel webhooks (public, read raw by their adapter) are counted the same way."""
    payload = {"updates": [{"id": 1, "from": "u1", "chat": "u1", "text": "z" * 5000}]}
    body, headers = gw.fake.webhook(payload)
    response = await gw.client.post(
        "/channels/fakechat/acct", content=chunks(body), headers=headers
    )
    assert_too_large(response, 4096)
    assert gw.fake.parsed == []
    assert await gw.inbound() == []


async def test_a_body_sent_to_an_event_stream_ends_the_stream_cleanly(
    process: GatewayProcess,
) -> None:
    """The events route does not read its body, but the server keeps receiving it once the
    stream is open: past the limit the stream ends (properly, not an aborted connection), its
    slot comes back and nothing is logged as an error."""
    async with httpx.AsyncClient(base_url=process.url, headers=process.auth, timeout=120) as c:
        sent = [0]
        path = "/api/sessions/main:api:stream/events"
        async with c.stream("GET", path, content=lazy_body(ATTACK, sent)) as response:
            assert response.status_code == 200
            assert [line async for line in response.aiter_lines() if line] == [": connected"]
        assert (await c.get("/v1/models")).status_code == 200
    assert "ERROR" not in process.output()
