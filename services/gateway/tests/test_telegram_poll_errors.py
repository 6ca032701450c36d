"""Telegram polling when things go wrong: a hung getUpdates (the watchdog), rate limits, a
webhook set behind our back, an update that does not parse, a lost lease; and the lease itself
on a short-TTL bucket (helpers: telegram_poll_harness.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig

from switchboard_gateway.channels.lease import acquire
from tests.fakes.telegram_updates import FakeTelegramUpdates
from tests.support.streams import ensure_streams_short_leases

from .telegram_poll_harness import (
    KEY,
    metric,
    replica,
    wait_for,
    wait_inbound,
)


@pytest.fixture
def fake() -> Iterator[FakeTelegramUpdates]:
    with FakeTelegramUpdates() as tg:
        yield tg


@pytest.fixture
async def admin(nats_url: str) -> AsyncIterator[NATS]:
    """The admin's connection; the streams and buckets exist (as the router makes them)."""
    nc = await nats.connect(nats_url)
    await ensure_streams_short_leases(nc.jetstream())
    yield nc
    await nc.close()


async def test_a_hung_get_updates_is_restarted_by_the_watchdog(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    hung_before = metric("sb_channel_poll_restarts_total", reason="hung")
    async with replica(
        nats_url,
        tmp_path,
        fake,
        "gw-a",
        telegram_poll_timeout_s=1,
        telegram_poll_watchdog_margin_s=0.5,
    ) as a:
        await wait_for("a first poll", lambda: a.polls > 0)
        fake.hang = True
        await wait_for("a swallowed call", lambda: fake.hung > 0)
        fake.push_message("after the hang")
        await wait_for(
            "the watchdog",
            lambda: metric("sb_channel_poll_restarts_total", reason="hung") > hung_before,
        )
        assert metric("sb_channel_poll_healthy") == 0
        fake.hang = False
        got = await wait_inbound(admin, 1)
        assert [m.text for _, m in got] == ["after the hang"]
        await wait_for("healthy again", lambda: metric("sb_channel_poll_healthy") == 1)


async def test_rate_limits_are_waited_out_and_a_new_webhook_is_deleted_again(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    limited_before = metric("sb_channel_poll_restarts_total", reason="rate_limited")
    async with replica(nats_url, tmp_path, fake, "gw-a", telegram_poll_timeout_s=1) as a:
        await wait_for("a first poll", lambda: a.polls > 0)
        fake.fail_next("getUpdates", 429, "Too Many Requests: retry after 1", retry_after=1)
        await wait_for("the 429", lambda: fake.failed_at("getUpdates"))
        fake.push_message("after the limit")
        await wait_inbound(admin, 1)
        assert metric("sb_channel_poll_restarts_total", reason="rate_limited") > limited_before
        times = fake.call_times("getUpdates")
        limited = fake.failed_at("getUpdates")[0]
        assert min(t for t in times if t > limited) - limited >= 1.0  # retry_after honoured

        fake.set_webhook("https://someone.example/hook")
        await wait_for("the webhook deleted again", lambda: fake.webhook_url == "")
        fake.push_message("after the webhook")
        got = await wait_inbound(admin, 2)
        assert [m.text for _, m in got] == ["after the limit", "after the webhook"]


async def test_an_update_that_does_not_parse_is_skipped_not_retried_forever(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    async with replica(nats_url, tmp_path, fake, "gw-a") as a:
        await wait_for("a to hold the lease", lambda: a.held)
        bad = fake.push({"message": {"message_id": "not a number", "chat": {}}})
        fake.push_message("after the bad one")
        got = await wait_inbound(admin, 1)
        assert [m.text for _, m in got] == ["after the bad one"]
        await wait_for("the bad update confirmed", lambda: bad not in fake.pending())


async def test_losing_the_lease_stops_polling_at_once(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    async with replica(nats_url, tmp_path, fake, "gw-a", telegram_poll_timeout_s=50) as a:
        await wait_for("a long poll waiting", lambda: a.polls == 0 and fake.polling)
        kv = await admin.jetstream().key_value("sb_channel_leases")
        await kv.put(KEY, b"someone-else")  # the key moved on: a's next renewal is refused
        await wait_for("a to notice", lambda: not a.held, timeout=15.0)
        # The long poll (50 s) was cancelled, not left to end.
        await wait_for("the poll to be gone", lambda: not fake.polling, timeout=15.0)
        await wait_for("the work to end", lambda: a.polling.work.lease is None)
        assert (await kv.get(KEY)).value == b"someone-else"  # a never deletes a key it lost


async def test_the_lease_is_exclusive_renewed_and_keeps_its_state(admin: NATS) -> None:
    js = admin.jetstream()
    kv = await js.create_key_value(KeyValueConfig(bucket="test_short_leases", ttl=1.5))
    first = await acquire(kv, "telegram.x", b"one", ttl_s=1.5)
    assert first is not None
    assert await acquire(kv, "telegram.x", b"two", ttl_s=1.5) is None
    await first.put_state("telegram.x.offset", b"42")
    # Held for several TTLs: renewals keep the key and its state alive.
    start_revision = first.revision
    await wait_for("several renewals", lambda: first.revision >= start_revision + 12, timeout=20)
    assert (await kv.get("telegram.x")).value == b"one"
    assert await first.get_state("telegram.x.offset") == b"42"
    assert await acquire(kv, "telegram.x", b"two", ttl_s=1.5) is None
    await first.release()
    second = await acquire(kv, "telegram.x", b"two", ttl_s=1.5)
    assert second is not None
    assert await second.get_state("telegram.x.offset") == b"42"  # for the next owner
    await second.abandon()
    # Abandoned: the key expires by itself and a third owner gets it.
    third = await wait_for_lease(kv, b"three")
    await third.release()


async def wait_for_lease(kv: Any, owner: bytes) -> Any:
    deadline = time.monotonic() + 20
    while (lease := await acquire(kv, "telegram.x", owner, ttl_s=1.5)) is None:
        assert time.monotonic() < deadline, "the abandoned lease never expired"
        await asyncio.sleep(0.1)
    return lease
