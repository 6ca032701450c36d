"""What a channel lease says, and does, when something goes wrong: the records an operator reads
to learn that a replica took, lost or could not release a channel connection (level, message,
the ``lease`` key), a renewal that fails once only retried, renewals that keep failing given up
before another replica can take the key, a release that never deletes a key written over, and
an acquisition that fails while NATS is away retried. All on a real nats-server's KV bucket
(one server for the module); NATS "away" is a bucket handle on a closed connection."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig
from nats.js.kv import KeyValue

from switchboard import bus
from switchboard_gateway.channels.lease import ChannelLease, LeasedWork, acquire, bucket_ttl

BOUND_S = 30.0  # each wait ends at its event; this only bounds a failure
LOGGER = "switchboard_gateway.channels.lease"


@pytest.fixture
async def nc(module_nats_url: str) -> AsyncIterator[NATS]:
    conn = await nats.connect(module_nats_url)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


async def bucket(nc: NATS, ttl_s: float | None, max_value_size: int | None = None) -> KeyValue:
    config = KeyValueConfig(
        bucket=f"leases_{uuid.uuid4().hex[:12]}", ttl=ttl_s, max_value_size=max_value_size
    )
    return await nc.jetstream().create_key_value(config)


async def away(module_nats_url: str, kv: KeyValue) -> KeyValue:
    """A handle on ``kv``'s bucket whose connection is closed: every call through it fails."""
    conn = await nats.connect(module_nats_url)
    handle = await conn.jetstream().key_value(kv._name)
    await conn.close()
    return handle


async def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def said(logs: pytest.LogCaptureFixture, prefix: str) -> list[logging.LogRecord]:
    return [r for r in logs.records if r.name == LOGGER and r.getMessage().startswith(prefix)]


def one(logs: pytest.LogCaptureFixture, message: str, level: int, lease: str) -> None:
    """Exactly ``message`` was logged, at ``level``, naming the lease's key."""
    [record] = [r for r in logs.records if r.name == LOGGER and r.getMessage() == message]
    assert (record.levelno, record.__dict__.get("lease")) == (level, lease)


async def test_a_bucket_without_a_ttl_gives_the_default_lease_ttl(nc: NATS) -> None:
    assert await bucket_ttl(await bucket(nc, None)) == bus.CHANNEL_LEASE_TTL_S
    assert await bucket_ttl(await bucket(nc, 2.0)) == 2.0


async def test_a_lease_written_over_says_it_was_taken(
    nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 0.6)
    lease = await acquire(kv, "discord.main", b"gw-a", ttl_s=0.6)
    assert lease is not None
    await kv.put("discord.main", b"gw-b")
    await asyncio.wait_for(lease.lost.wait(), BOUND_S)
    one(logs, "channel lease lost: taken by another owner", logging.WARNING, "discord.main")
    await lease.release()


async def test_a_renewal_that_fails_once_is_retried_and_the_lease_kept(
    module_nats_url: str, nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 1.5)
    lease = await acquire(kv, "telegram.main", b"gw-a", ttl_s=1.5)  # renewed every 0.5 s
    assert lease is not None
    first = lease.revision
    await until("a first renewal", lambda: lease.revision > first)
    lease.kv = await away(module_nats_url, kv)  # NATS away for one renewal, no more
    await until("a failed renewal", lambda: bool(said(logs, "channel lease renewal failed")))
    lease.kv = kv
    renewed = lease.revision
    await until("two more renewals", lambda: lease.revision >= renewed + 2 or lease.lost.is_set())
    assert lease.held and not lease.lost.is_set()
    assert (await kv.get("telegram.main")).value == b"gw-a"
    one(logs, "channel lease renewal failed (ConnectionClosedError)", logging.WARNING, lease.key)
    assert not said(logs, "channel lease lost")
    await lease.release()


async def test_failing_renewals_give_the_lease_up_before_another_replica_can_take_it(
    module_nats_url: str, nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 1.5)
    lease = await acquire(kv, "telegram.main", b"gw-a", ttl_s=1.5)  # renewed every 0.5 s
    assert lease is not None
    lease.kv = await away(module_nats_url, kv)  # NATS away for this replica from now on
    # The key expires 1.5 s after its last write; this replica must have stopped by then.
    deadline = time.monotonic() + BOUND_S
    while (other := await acquire(kv, "telegram.main", b"gw-b", ttl_s=1.5)) is None:
        assert time.monotonic() < deadline, "the lease's key never expired"
        await asyncio.sleep(0.02)
    assert lease.lost.is_set(), "the key expired while its holder still thought it held it"
    await other.release()
    one(
        logs,
        "channel lease lost: renewals failed until the key could expire",
        logging.WARNING,
        "telegram.main",
    )
    await lease.release()


async def test_a_release_never_deletes_a_key_written_over_and_says_so(
    nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 30)
    lease = await acquire(kv, "telegram.main", b"gw-a", ttl_s=30)  # next renewal in 10 s
    assert lease is not None
    await kv.put("telegram.main", b"gw-b")
    await lease.release()  # not noticed yet: the delete at our revision is refused
    assert (await kv.get("telegram.main")).value == b"gw-b"
    # The server's refusal of a delete at a revision that is no longer the key's.
    one(logs, "channel lease not released (BadRequestError)", logging.WARNING, "telegram.main")


async def test_state_the_bucket_refuses_is_tried_again_at_each_renewal_and_said_so(
    nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 0.6, max_value_size=64)
    lease = await acquire(kv, "telegram.main", b"gw-a", ttl_s=0.6)
    assert lease is not None
    with pytest.raises(Exception):  # noqa: B017 - the server's refusal, whatever its type
        await lease.put_state("telegram.main.offset", b"9" * 100)
    await until("two refused rewrites", lambda: len(said(logs, "channel lease state")) >= 2)
    records = said(logs, "channel lease state")
    assert {r.levelno for r in records} == {logging.WARNING}
    # The server's refusal of a value over the bucket's size limit, each time.
    assert {r.getMessage() for r in records} == {
        "channel lease state not rewritten (BadRequestError)"
    }
    assert lease.held
    await lease.release()


async def test_leased_work_says_when_it_takes_the_lease_and_when_its_work_fails(
    nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 30)
    runs: list[str] = []

    async def work(lease: ChannelLease) -> None:
        runs.append("run")
        tasks = {t.get_name() for t in asyncio.all_tasks()}
        # A task dump names what each task does, and for which channel account.
        assert {"leased-discord.x", "work-discord.x", "lease-discord.x"} <= tasks
        if len(runs) == 1:
            return  # a clean end: the lease is given up, no error
        raise RuntimeError("the connection broke")

    w = LeasedWork(
        kv, "discord.x", "gw-a", work, channel="discord", account="x", ttl_s=30, retry_s=0.05
    )
    w.start()
    await until("two runs", lambda: len(runs) >= 2 and not w.held)
    await w.stop()
    taken = [r for r in logs.records if r.getMessage() == "channel lease taken"]
    assert len(taken) >= 2
    assert {(r.levelno, r.__dict__.get("lease")) for r in taken} == {(logging.INFO, "discord.x")}
    one(logs, "channel work failed (RuntimeError)", logging.ERROR, "discord.x")


async def test_an_acquisition_that_fails_while_nats_is_away_is_retried(
    module_nats_url: str, nc: NATS, logs: pytest.LogCaptureFixture
) -> None:
    kv = await bucket(nc, 30)
    running = asyncio.Event()

    async def work(lease: ChannelLease) -> None:
        running.set()
        await asyncio.Event().wait()

    w = LeasedWork(
        await away(module_nats_url, kv),
        "telegram.x",
        "gw-a",
        work,
        channel="telegram",
        account="x",
        ttl_s=30,
        retry_s=0.05,
    )
    w.start()
    await until("a failed acquisition", lambda: bool(said(logs, "channel lease: acquire failed")))
    assert not w.held
    w.kv = kv  # NATS back
    await asyncio.wait_for(running.wait(), BOUND_S)
    assert w.held
    await w.stop()
    failed = said(logs, "channel lease: acquire failed")
    assert {r.levelno for r in failed} == {logging.WARNING}
    assert {r.getMessage() for r in failed} == {
        "channel lease: acquire failed (ConnectionClosedError)"
    }
