"""The machine's floors, measured against the stack's own servers in the same run: a NATS
request/reply, a JetStream publish ack, an asyncpg INSERT (commit), a local HTTP request; and
the fake model's own time for a turn's two calls."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import nats
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig

from tests.bench.stats import Summary, summarize

WARMUP = 20


async def _timed(op: Callable[[], Awaitable[object]], n: int, time_cap_s: float) -> Summary:
    """``n`` sequential awaits of ``op`` after a warm-up, in ms; stops early at the time cap."""
    deadline = time.monotonic() + time_cap_s
    for _ in range(WARMUP):
        await op()
    times: list[float] = []
    for _ in range(n):
        if time.monotonic() > deadline:
            break
        start = time.perf_counter()
        await op()
        times.append((time.perf_counter() - start) * 1000)
    return summarize(times)


async def nats_floors(nats_url: str, n: int, time_cap_s: float = 20.0) -> dict[str, Summary]:
    """Request/reply through nats-server (requester and responder on separate connections)
    and one JetStream publish to a file-backed stream, acknowledged."""
    tag = os.urandom(4).hex()
    requester = await nats.connect(nats_url, name="bench-requester")
    responder = await nats.connect(nats_url, name="bench-responder")
    stream = f"BENCHFLOOR{tag.upper()}"
    js = requester.jetstream()
    try:

        async def reply(msg: Msg) -> None:
            await msg.respond(msg.data)

        subject = f"bench.floor.{tag}.echo"
        await responder.subscribe(subject, cb=reply)
        await responder.flush()
        payload = b"x" * 256

        async def request() -> object:
            return await requester.request(subject, payload, timeout=5.0)

        await js.add_stream(
            StreamConfig(name=stream, subjects=[f"benchfloor.{tag}"], storage=StorageType.FILE)
        )

        async def publish() -> object:
            return await js.publish(f"benchfloor.{tag}", payload, timeout=5.0)

        return {
            "nats_request_reply_ms": await _timed(request, n, time_cap_s),
            "jetstream_publish_ack_ms": await _timed(publish, n, time_cap_s),
        }
    finally:
        with contextlib.suppress(Exception):
            await js.delete_stream(stream)
        for nc in (requester, responder):
            with contextlib.suppress(Exception):
                await nc.close()


async def postgres_floor(database_url: str, n: int, time_cap_s: float = 20.0) -> Summary:
    """One INSERT in autocommit (so one commit, flushed as the server's settings say) into a
    logged table of its own, dropped afterwards."""
    conn = await asyncpg.connect(database_url, timeout=10.0)
    table = f"bench_floor_{os.urandom(4).hex()}"
    try:
        await conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, body text NOT NULL)")

        async def insert() -> object:
            return await conn.execute(f"INSERT INTO {table} (body) VALUES ($1)", "x" * 256)

        return await _timed(insert, n, time_cap_s)
    finally:
        with contextlib.suppress(Exception):
            await conn.execute(f"DROP TABLE IF EXISTS {table}")
        await conn.close()


async def postgres_settings(database_url: str) -> dict[str, str]:
    """The settings that decide what a commit costs."""
    conn = await asyncpg.connect(database_url, timeout=10.0)
    try:
        names = ("fsync", "synchronous_commit", "wal_sync_method", "server_version")
        return {name: str(await conn.fetchval(f"SHOW {name}")) for name in names}
    finally:
        await conn.close()


def http_floor(base_url: str, n: int, time_cap_s: float = 20.0) -> Summary:
    """GET /healthz of the gateway over one persistent client (as the turns are sent)."""
    deadline = time.monotonic() + time_cap_s
    times: list[float] = []
    with httpx.Client(base_url=base_url, timeout=5.0, trust_env=False) as client:
        for _ in range(WARMUP):
            client.get("/healthz").raise_for_status()
        for _ in range(n):
            if time.monotonic() > deadline:
                break
            start = time.perf_counter()
            client.get("/healthz").raise_for_status()
            times.append((time.perf_counter() - start) * 1000)
    return summarize(times)


def measure_floors(
    nats_url: str, database_url: str, http_url: str, n: int
) -> dict[str, Summary | dict[str, str]]:
    async def both() -> dict[str, Summary | dict[str, str]]:
        out: dict[str, Summary | dict[str, str]] = {}
        out.update(await nats_floors(nats_url, n))
        out["postgres_insert_commit_ms"] = await postgres_floor(database_url, max(20, n // 4))
        out["postgres_settings"] = await postgres_settings(database_url)
        return out

    result = asyncio.run(both())
    result["http_healthz_ms"] = http_floor(http_url, n)
    return result


def model_floor(base_url: str, n: int, system_chars: int = 6000) -> Summary:
    """The fake model's time for one turn's two calls (tool call, then text), streamed as the
    agent asks for them, over a persistent client without any SDK; per pair in ms."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": "Current time in a timezone.",
                "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
            },
        }
    ]
    first: list[dict[str, Any]] = [
        {"role": "system", "content": "x" * system_chars},
        {"role": "user", "content": "turn"},
    ]
    call = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    second = [
        *first,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "2026-01-01T00:00:00+00:00"},
    ]
    common = {"model": "gpt-4o-mini", "tools": tools, "stream": True, "max_tokens": 4096}
    common["stream_options"] = {"include_usage": True}
    pairs: list[float] = []
    headers = {"Authorization": "Bearer bench-key"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=10.0, trust_env=False) as client:
        for i in range(n + 3):
            start = time.perf_counter()
            for messages in (first, second):
                resp = client.post("/chat/completions", json={**common, "messages": messages})
                if resp.status_code != 200 or "[DONE]" not in resp.text:
                    raise RuntimeError(f"fake model answered {resp.status_code}: {resp.text[:200]}")
            if i >= 3:
                pairs.append((time.perf_counter() - start) * 1000)
    return summarize(pairs)
