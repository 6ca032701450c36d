"""Telegram polling under a lease: one of two replicas polls, a stopped or crashed holder is
replaced, no update is lost or doubled across a takeover, and the adapter starts polling in
polling mode (helpers: telegram_poll_harness.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js.errors import KeyNotFoundError

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard_gateway.channels import telegram
from tests.fakes.telegram_updates import FakeTelegramUpdates
from tests.support.streams import ensure_streams_short_leases

from .telegram_poll_harness import (
    KEY,
    TAKEOVER_S,
    gateway_settings,
    inbound,
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


async def test_one_of_two_replicas_polls_after_deleting_the_webhook(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    fake.set_webhook("https://old.example/hook")  # getUpdates answers 409 until it is deleted
    async with (
        replica(nats_url, tmp_path, fake, "gw-a") as a,
        replica(nats_url, tmp_path, fake, "gw-b") as b,
    ):
        holder = await wait_for("a lease holder", lambda: a if a.held else b if b.held else None)
        other = b if holder is a else a
        for i in range(3):
            fake.push_message(f"hello {i}")
        got = await wait_inbound(admin, 3)

        assert [m.text for _, m in got] == ["hello 0", "hello 1", "hello 2"]
        assert [i for i, _ in got] == [f"telegram:default:4242:{n}" for n in (1, 2, 3)]
        assert all(m.channel == "telegram" and m.account == "default" for _, m in got)
        assert holder.held and not other.held
        assert holder.polls > 0 and other.polls == 0
        assert fake.conflicts == 0  # never two getUpdates at once
        methods = fake.methods_called()
        assert "deleteWebhook" in methods and fake.webhook_url == ""
        assert methods.index("deleteWebhook") < methods.index("getUpdates")
        entry = await (await admin.jetstream().key_value("sb_channel_leases")).get(KEY)
        assert (entry.value or b"").decode().startswith(f"{holder.name}:")
        assert metric("sb_channel_lease_held") == 1  # both replicas share this process
        assert metric("sb_channel_poll_healthy") == 1


async def test_a_clean_stop_hands_the_lease_over_at_once(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    async with replica(nats_url, tmp_path, fake, "gw-a") as a:
        await wait_for("a to hold the lease", lambda: a.held)
        fake.push_message("before")
        await wait_inbound(admin, 1)
        async with replica(nats_url, tmp_path, fake, "gw-b") as b:
            await a.polling.close()  # released: b need not wait for the TTL
            await wait_for("b to take over", lambda: b.held, timeout=10.0)
            fake.push_message("after")
            got = await wait_inbound(admin, 2)
            assert [m.text for _, m in got] == ["before", "after"]
            assert b.polls > 0


async def test_a_crashed_holder_is_replaced_within_the_lease_ttl(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    async with (
        replica(nats_url, tmp_path, fake, "gw-a") as a,
        replica(nats_url, tmp_path, fake, "gw-b") as b,
    ):
        holder = await wait_for("a lease holder", lambda: a if a.held else b if b.held else None)
        other = b if holder is a else a
        await holder.crash()
        fake.push_message("while nobody polls")
        await wait_for("the other replica to take over", lambda: other.held, timeout=TAKEOVER_S)
        got = await wait_inbound(admin, 1)
        assert [m.text for _, m in got] == ["while nobody polls"]
        assert other.polls > 0


async def test_fifty_updates_across_a_takeover_are_each_published_once(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    async with (
        replica(nats_url, tmp_path, fake, "gw-a") as a,
        replica(nats_url, tmp_path, fake, "gw-b") as b,
    ):
        holder = await wait_for("a lease holder", lambda: a if a.held else b if b.held else None)
        other = b if holder is a else a
        for i in range(25):
            fake.push_message(f"m{i}")
        await wait_inbound(admin, 20)
        await holder.crash()  # maybe mid-batch: its last updates may be fetched again
        for i in range(25, 50):
            fake.push_message(f"m{i}")
        await wait_for("the other replica to take over", lambda: other.held, timeout=TAKEOVER_S)
        await wait_inbound(admin, 50)
        await wait_for("every update confirmed", lambda: not fake.pending())
        got = await inbound(admin)
        assert sorted(m.text for _, m in got) == sorted(f"m{i}" for i in range(50))
        assert len({i for i, _ in got}) == len(got) == 50


async def test_the_adapter_polls_in_polling_mode_and_releases_the_lease_on_close(
    admin: NATS, nats_url: str, tmp_path: Path, fake: FakeTelegramUpdates
) -> None:
    settings = gateway_settings(
        nats_url,
        home=tmp_path,
        log_json=False,
        telegram_bot_token=fake.token,
        telegram_api_base=fake.base_url,
        telegram_mode="polling",
    )
    adapter = telegram.from_settings(settings)
    assert isinstance(adapter, telegram.TelegramAdapter)
    heard: list[str] = []  # what the gateway's typing indicator hears of (Typing.follow)
    adapter.on_publish = lambda message: heard.append(message.message_id)
    kv = await admin.jetstream().key_value("sb_channel_leases")
    async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
        await adapter.start(rt)
        try:
            fake.push_message("via the adapter")
            got = await wait_inbound(admin, 1)
            assert [(i, m.text) for i, m in got] == [("telegram:default:4242:1", "via the adapter")]
            await wait_for("the adapter's on_publish", lambda: heard == ["4242:1"])
            assert (await kv.get(KEY)).value
        finally:
            await adapter.close()
        with pytest.raises(KeyNotFoundError):  # released: another replica may take it at once
            await kv.get(KEY)
