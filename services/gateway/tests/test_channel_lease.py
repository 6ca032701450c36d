"""Leases on the gateway's channel connections (switchboard_gateway.channels.lease) on a real
nats-server's KV bucket (one server for the module, a bucket per test with a short TTL): one
holder, renewed with its state while held, lost to another owner's write or to renewals that
fail until the key could expire, released at once on a clean stop; and LeasedWork, which runs
the connection only while its replica holds the lease."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig
from nats.js.kv import KeyValue
from prometheus_client import REGISTRY

from switchboard_gateway.channels.lease import (
    ChannelLease,
    LeasedWork,
    acquire,
    bucket_ttl,
    lease_key,
)

BOUND_S = 30.0  # each wait ends at its event; this only bounds a failure


@pytest.fixture
async def nc(module_nats_url: str) -> AsyncIterator[NATS]:
    conn = await nats.connect(module_nats_url)
    try:
        yield conn
    finally:
        await conn.close()


async def bucket(nc: NATS, ttl_s: float) -> KeyValue:
    config = KeyValueConfig(bucket=f"leases_{uuid.uuid4().hex[:12]}", ttl=ttl_s)
    return await nc.jetstream().create_key_value(config)


async def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def held_gauge(channel: str, account: str) -> float:
    labels = {"channel": channel, "account": account}
    return REGISTRY.get_sample_value("sb_channel_lease_held", labels) or 0.0


def test_lease_keys_hold_only_safe_characters() -> None:
    assert lease_key("telegram", "main") == "telegram.main"
    assert lease_key("tele.gram", "a b/c*") == "tele_gram.a_b_c_"
    assert lease_key("discord", "") == "discord._"
    assert lease_key("x-y_z", "A=1") == "x-y_z.A=1"


async def test_one_holder_until_it_releases(nc: NATS) -> None:
    kv = await bucket(nc, 30)
    assert await bucket_ttl(kv) == 30
    a = await acquire(kv, "telegram.main", b"gw-a", ttl_s=30)
    assert a is not None and a.held
    assert (a.key, a.owner, a.interval_s) == ("telegram.main", b"gw-a", 10)
    assert (await kv.get("telegram.main")).value == b"gw-a"
    assert await acquire(kv, "telegram.main", b"gw-b", ttl_s=30) is None
    await a.release()
    assert not a.held
    b = await acquire(kv, "telegram.main", b"gw-b", ttl_s=30)  # at once: deleted, not expired
    assert b is not None
    await b.release()


async def test_renewals_keep_the_key_and_the_state_alive(nc: NATS) -> None:
    kv = await bucket(nc, 1.5)
    lease = await acquire(kv, "telegram.main", b"gw-a", ttl_s=1.5)
    assert lease is not None
    await lease.put_state("telegram.main.offset", b"42")
    assert await lease.get_state("telegram.main.offset") == b"42"
    assert await lease.get_state("telegram.main.nothing") is None
    first = lease.revision
    # Past the bucket's TTL (four renewals, half a second apart, each rewriting the state too):
    # the key and the state are still there.
    await until("four renewals", lambda: lease.revision >= first + 8)
    assert (await kv.get("telegram.main")).value == b"gw-a"
    assert await lease.get_state("telegram.main.offset") == b"42"
    assert lease.held
    await lease.release()
    await lease.put_state("telegram.main.late", b"x")  # not held: nothing written
    assert await lease.get_state("telegram.main.late") is None


async def test_a_lease_written_over_is_lost_and_left_to_its_new_owner(nc: NATS) -> None:
    kv = await bucket(nc, 0.6)
    lease = await acquire(kv, "discord.main", b"gw-a", ttl_s=0.6)
    assert lease is not None
    await kv.put("discord.main", b"gw-b")
    await asyncio.wait_for(lease.lost.wait(), BOUND_S)
    assert not lease.held
    await lease.release()
    assert (await kv.get("discord.main")).value == b"gw-b"


async def test_renewals_failing_until_the_key_could_expire_lose_the_lease(
    module_nats_url: str, nc: NATS
) -> None:
    kv = await bucket(nc, 0.6)
    own = await nats.connect(module_nats_url)
    own_kv = await own.jetstream().key_value(kv._name)
    lease = await acquire(own_kv, "telegram.main", b"gw-a", ttl_s=0.6)
    assert lease is not None
    await own.close()  # NATS away for this replica: renewals fail
    await asyncio.wait_for(lease.lost.wait(), BOUND_S)
    assert not lease.held
    await lease.release()


async def test_an_abandoned_lease_expires_after_its_ttl(nc: NATS) -> None:
    kv = await bucket(nc, 0.5)
    lease = await acquire(kv, "telegram.main", b"gw-a", ttl_s=0.5)
    assert lease is not None
    await lease.abandon()
    assert (await kv.get("telegram.main")).value == b"gw-a"  # not deleted
    deadline = time.monotonic() + BOUND_S
    while (taken := await acquire(kv, "telegram.main", b"gw-b", ttl_s=0.5)) is None:
        assert time.monotonic() < deadline, "the abandoned lease never expired"
        await asyncio.sleep(0.05)
    await taken.release()


async def test_leased_work_runs_on_one_replica_and_moves_when_it_stops(nc: NATS) -> None:
    kv = await bucket(nc, 30)
    running: list[str] = []

    def work_of(name: str) -> Callable[[ChannelLease], Any]:
        async def work(lease: ChannelLease) -> None:
            running.append(name)
            try:
                await asyncio.Event().wait()
            finally:
                running.remove(name)

        return work

    def leased(owner: str, name: str) -> LeasedWork:
        return LeasedWork(
            kv,
            "telegram.lw",
            owner,
            work_of(name),
            channel="telegram",
            account="lw",
            ttl_s=30.0,
            retry_s=0.05,
        )

    a, b = leased("gw-a", "a"), leased("gw-b", "b")
    gauge = held_gauge("telegram", "lw")
    a.start()
    await until("a to hold the lease", lambda: a.held and running == ["a"])
    assert held_gauge("telegram", "lw") == gauge + 1
    b.start()
    b.start()  # a second start does nothing
    await asyncio.sleep(0.2)  # b retries meanwhile, and must not run
    assert (running, b.held) == (["a"], False)
    await a.stop()
    await until("b to take over", lambda: b.held and running == ["b"])
    await b.stop(release=False)  # a crash: the key stays until it expires
    assert (await kv.get("telegram.lw")).value == b"gw-b"
    assert running == [] and held_gauge("telegram", "lw") == gauge
    await a.stop()  # stopped already: nothing to do


async def test_work_that_ends_gives_the_lease_up_and_is_tried_again(nc: NATS) -> None:
    kv = await bucket(nc, 30)
    runs: list[int] = []

    async def work(lease: ChannelLease) -> None:
        runs.append(lease.revision)
        raise RuntimeError("the connection broke")

    w = LeasedWork(
        kv, "discord.x", "gw-a", work, channel="discord", account="x", ttl_s=30, retry_s=0.05
    )
    w.start()
    await until("three runs", lambda: len(runs) >= 3)
    await w.stop()
    assert len(set(runs)) == len(runs)  # each run under a lease of its own
