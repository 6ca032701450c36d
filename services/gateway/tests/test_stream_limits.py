"""Event streams are bounded per token: at most SB_MAX_STREAMS_PER_TOKEN open at once (429
beyond, before anything is published), a slot comes back when its stream ends, and a stream
ends cleanly after SB_STREAM_MAX_LIFETIME_S. Against the gateway process: streamed responses
need real sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import nats

from switchboard import bus

from .gateway_process import gateway_process

CHAT = "/v1/chat/completions"


def streamed_chat(user: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": "hi"}]
    return {"model": "switchboard", "messages": messages, "stream": True, "user": user}


@asynccontextmanager
async def event_stream(client: httpx.AsyncClient, key: str) -> AsyncIterator[httpx.Response]:
    """An open event stream of session ``key`` (its first line read)."""
    async with client.stream("GET", f"/api/sessions/{key}/events") as response:
        assert response.status_code == 200, await response.aread()
        lines = response.aiter_lines()
        assert await anext(lines) == ": connected"
        yield response


async def refused(client: httpx.AsyncClient, method: str, path: str, **kw: Any) -> dict[str, Any]:
    """The error of a request answered 429 (read whole: a 200 stream would not end)."""
    async with client.stream(method, path, **kw) as response:
        assert response.status_code == 429, (path, response.status_code)
        await response.aread()
        error: dict[str, Any] = response.json()["error"]
        return error


async def open_when_free(
    client: httpx.AsyncClient, key: str, streams: AsyncExitStack, timeout: float = 30.0
) -> None:
    """Open an event stream (kept open in ``streams``) as soon as a slot is free."""
    async with asyncio.timeout(timeout):
        while True:
            response = await streams.enter_async_context(
                client.stream("GET", f"/api/sessions/{key}/events")
            )
            if response.status_code == 200:
                return
            assert response.status_code == 429
            await response.aclose()
            await asyncio.sleep(0.05)


async def until_open(client: httpx.AsyncClient, key: str, timeout: float = 30.0) -> list[str]:
    """Open an event stream as soon as a slot is free; every line it sent until it ended."""
    deadline = time.monotonic() + timeout
    while True:
        async with client.stream("GET", f"/api/sessions/{key}/events") as response:
            if response.status_code == 200:
                return [line async for line in response.aiter_lines()]
            assert response.status_code == 429 and time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def post_when_free(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], timeout: float = 30.0
) -> httpx.Response:
    """POST ``body`` as soon as the token has a stream slot free (429 until then)."""
    deadline = time.monotonic() + timeout
    while True:
        response = await client.post(path, json=body)
        if response.status_code != 429 or time.monotonic() >= deadline:
            return response
        await asyncio.sleep(0.05)


async def inbound_count(nats_url: str) -> int:
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info(bus.Subjects().stream("INBOUND"))
        return int(info.state.messages)
    finally:
        await nc.close()


async def test_streams_per_token_are_capped_and_slots_come_back(
    nats_url: str, tmp_path: Path
) -> None:
    with gateway_process(nats_url, tmp_path / "gw", SB_MAX_STREAMS_PER_TOKEN="2") as gw:
        async with (
            httpx.AsyncClient(base_url=gw.url, headers=gw.auth, timeout=60) as client,
            AsyncExitStack() as streams,
        ):
            first = await streams.enter_async_context(event_stream(client, "main:api:s1"))
            await streams.enter_async_context(event_stream(client, "main:api:s2"))

            error = await refused(client, "GET", "/api/sessions/main:api:s3/events")
            assert (error["type"], error["code"]) == ("rate_limit_error", "too_many_streams")
            assert "at most 2 at once (SB_MAX_STREAMS_PER_TOKEN)" in error["message"]
            error = await refused(client, "POST", CHAT, json=streamed_chat("carol"))
            assert error["code"] == "too_many_streams"
            assert await inbound_count(nats_url) == 0  # refused before publishing

            # Requests that are not streams are not counted.
            assert (await client.get("/v1/models")).status_code == 200
            posted = await client.post("/api/sessions/main:api:s1/messages", json={"text": "x"})
            assert posted.status_code == 202

            await first.aclose()  # the client goes away: its slot comes back
            await open_when_free(client, "main:api:s4", streams)
            await refused(client, "GET", "/api/sessions/main:api:s5/events")  # full again
    assert "Traceback" not in gw.output()


async def test_streams_end_after_their_lifetime(nats_url: str, tmp_path: Path) -> None:
    """With a 1 s lifetime (and one stream per token): an event stream ends by itself with a
    comment saying so, its slot is free again, and a streamed chat that nobody answers ends
    with the lifetime instead of the 300 s reply timeout."""
    env = {"SB_MAX_STREAMS_PER_TOKEN": "1", "SB_STREAM_MAX_LIFETIME_S": "1"}
    with gateway_process(nats_url, tmp_path / "gw", **env) as gw:
        async with httpx.AsyncClient(base_url=gw.url, headers=gw.auth, timeout=60) as client:
            for _ in range(2):  # the second one opens once the first gave its slot back
                lines = await until_open(client, "main:api:lifetime")
                assert lines[0] == ": connected"
                assert [line for line in lines if line][-1] == (
                    ": the stream reached its maximum lifetime; reconnect to go on"
                )
            # The slot comes back when the server has finished the stream, which may be a
            # moment after its last line reached us (seen once under load: a 429 here).
            response = await post_when_free(client, CHAT, streamed_chat("dave"))
            assert response.status_code == 504, response.text
            assert "did not start in time" in response.json()["error"]["message"]
            await until_open(client, "main:api:lifetime")  # that slot came back too
    assert "Traceback" not in gw.output()
