"""Telegram polling with two real gateway processes (``python -m switchboard_gateway``, as
Compose and Kubernetes run it) on one bot: the adapter starts the poller in polling mode, one
process holds the lease and polls, and when it is killed (SIGKILL, no release) the other takes
over within the lease TTL without losing or doubling an update."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js.errors import KeyNotFoundError

from switchboard.v1 import messages_pb2
from tests.fakes.telegram_updates import FakeTelegramUpdates
from tests.support.streams import stored as stream_messages

from .gateway_process import GatewayProcess, gateway_process

TAKEOVER_S = 90.0  # the killed holder's lease expires after the bucket's TTL (5 s in tests)


@pytest.fixture
def fake() -> Iterator[FakeTelegramUpdates]:
    with FakeTelegramUpdates() as tg:
        yield tg


@pytest.fixture
async def admin(nats_url: str) -> AsyncIterator[NATS]:
    nc = await nats.connect(nats_url)
    yield nc
    await nc.close()


async def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)
    return value


async def inbound(nc: NATS) -> list[tuple[str, messages_pb2.InboundMessage]]:
    found = await stream_messages(nc.jetstream(), "INBOUND", messages_pb2.InboundMessage)
    return [(s.msg_id, s.message) for s in found]


def lease_held(gw: GatewayProcess) -> float:
    """``sb_channel_lease_held`` for telegram/default on this process's /metrics."""
    response = httpx.get(f"{gw.url}/metrics", headers=gw.auth, timeout=10)
    assert response.status_code == 200, response.text
    text = response.text
    for line in text.splitlines():
        if line.startswith("sb_channel_lease_held{") and 'channel="telegram"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_two_gateway_processes_one_polls_and_the_other_takes_over_a_kill(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    env = {
        "SB_TELEGRAM_BOT_TOKEN": fake.token,
        "SB_TELEGRAM_API_BASE": fake.base_url,
        "SB_TELEGRAM_MODE": "polling",
    }
    with ExitStack() as stack:
        a = stack.enter_context(
            gateway_process(nats_url, tmp_path / "a", SB_INSTANCE="gw-a", **env)
        )
        b = stack.enter_context(
            gateway_process(nats_url, tmp_path / "b", SB_INSTANCE="gw-b", **env)
        )
        kv = await admin.jetstream().key_value("sb_channel_leases")

        async def holder() -> GatewayProcess | None:
            try:
                value = ((await kv.get("telegram.default")).value or b"").decode()
            except KeyNotFoundError:
                return None
            return a if value.startswith("gw-a:") else b if value.startswith("gw-b:") else None

        first = await wait_for("a lease holder", holder)
        second = b if first is a else a
        for i in range(10):
            fake.push_message(f"m{i}")

        async def count(n: int) -> bool:
            return len(await inbound(admin)) >= n

        await wait_for("10 messages in INBOUND", lambda: count(10))
        assert (lease_held(first), lease_held(second)) == (1.0, 0.0)
        assert fake.conflicts == 0

        first.proc.kill()  # no release: the lease expires after its TTL
        first.proc.wait(10)
        for i in range(10, 20):
            fake.push_message(f"m{i}")
        await wait_for("20 messages in INBOUND", lambda: count(20), timeout=TAKEOVER_S)
        assert lease_held(second) == 1.0
        got = await inbound(admin)
        assert sorted(m.text for _, m in got) == sorted(f"m{i}" for i in range(20))
        assert len({msg_id for msg_id, _ in got}) == 20
