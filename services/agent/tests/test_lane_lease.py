"""Lane leases (docs/architecture.md) on a real nats-server's KV bucket (one server for the
module, a bucket per test): one owner at a time, renewed while held, lost (and said so) when
someone else's write took the key, released at once on a clean stop without touching a key
that is no longer ours, a key released here taken again in one write (never one held by someone
else since), and a renewal that fails while NATS is away only retried."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import KeyValueConfig
from nats.js.kv import KeyValue
from prometheus_client import REGISTRY

from switchboard_agent.runs.lease import Leases

BOUND_S = 30.0  # generous: each wait below ends at its event, this only bounds a failure


@pytest.fixture
async def nc(module_nats_url: str) -> AsyncIterator[NATS]:
    conn = await nats.connect(module_nats_url)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def kv(nc: NATS) -> KeyValue:
    return await nc.jetstream().create_key_value(bucket=f"leases_{uuid.uuid4().hex[:12]}")


def counted(outcome: str) -> float:
    value = REGISTRY.get_sample_value("sb_lane_leases_total", {"outcome": outcome})
    return value or 0.0


async def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_one_owner_at_a_time_and_released_at_once(kv: KeyValue) -> None:
    a, b = Leases(kv, "agent-a", ttl_s=30), Leases(kv, "agent-b", ttl_s=30)
    taken, busy, released = counted("taken"), counted("busy"), counted("released")
    lease = await a.acquire("s1")
    assert lease is not None
    assert (lease.key, lease.owner, lease.ttl_s) == ("s1", b"agent-a", 30)
    assert (await kv.get("s1")).value == b"agent-a"
    assert await b.acquire("s1") is None
    assert await b.acquire("s2") is not None  # another session is free
    await lease.release()
    assert counted("released") == released + 1
    again = await b.acquire("s1")  # at once: no wait for an expiry
    assert again is not None and (await kv.get("s1")).value == b"agent-b"
    assert (counted("taken"), counted("busy")) == (taken + 3, busy + 1)
    await again.release()


async def writes_to(nc: NATS, kv: KeyValue, key: str) -> list[bytes]:
    """A core subscription to the key's subject: every write attempt lands there, refused
    ones included (the stream checks the expected revision after)."""
    seen: list[bytes] = []

    async def on(msg: Msg) -> None:
        seen.append(msg.headers.get("KV-Operation", "PUT").encode() if msg.headers else b"PUT")

    await nc.subscribe(f"$KV.{kv._name}.{key}", cb=on)
    await nc.flush()
    return seen


async def test_a_key_released_here_is_taken_again_in_one_write(nc: NATS, kv: KeyValue) -> None:
    """The released key is taken back at its delete marker's revision: one write, where a
    create of a deleted key costs a refused write, a read and a second write."""
    a = Leases(kv, "agent-a", ttl_s=30)
    first = await a.acquire("s1")
    assert first is not None
    await first.release()
    seen = await writes_to(nc, kv, "s1")
    again = await a.acquire("s1")
    assert again is not None and (await kv.get("s1")).value == b"agent-a"
    await nc.flush()
    await until("the write seen", lambda: len(seen) >= 1)
    assert seen == [b"PUT"]
    await again.release()


async def test_a_remembered_release_never_takes_a_key_held_since(kv: KeyValue) -> None:
    """Another replica took the key after this one released it: the remembered revision is
    stale, so this replica's acquire is refused while the other holds it, and succeeds (by
    create) once the other released it in turn."""
    a, b = Leases(kv, "agent-a", ttl_s=30), Leases(kv, "agent-b", ttl_s=30)
    mine = await a.acquire("s1")
    assert mine is not None
    await mine.release()
    theirs = await b.acquire("s1")
    assert theirs is not None
    assert await a.acquire("s1") is None
    assert (await kv.get("s1")).value == b"agent-b"
    await theirs.release()
    back = await a.acquire("s1")
    assert back is not None and (await kv.get("s1")).value == b"agent-a"
    await back.release()


async def test_a_held_lease_is_renewed_at_its_revision(kv: KeyValue) -> None:
    lease = await Leases(kv, "agent-a", ttl_s=0.3).acquire("s1")
    assert lease is not None
    first = lease.revision
    await until("two renewals", lambda: lease.revision >= first + 2)
    entry = await kv.get("s1")
    assert (entry.value, entry.revision) == (b"agent-a", lease.revision)
    assert not lease.lost.is_set()
    await lease.release()


async def test_renewals_keep_the_key_past_the_buckets_ttl(nc: NATS) -> None:
    short = await nc.jetstream().create_key_value(
        KeyValueConfig(bucket=f"leases_{uuid.uuid4().hex[:12]}", ttl=3.0)
    )
    lease = await Leases(short, "agent-a", ttl_s=3.0).acquire("s1")
    assert lease is not None
    first = lease.revision
    # Renewed every TTL/3: four renewals span more than the TTL and the key never lapsed.
    await until("four renewals", lambda: lease.revision >= first + 4 or lease.lost.is_set())
    assert not lease.lost.is_set()
    await lease.release()


async def test_release_never_deletes_a_key_someone_else_wrote_since(kv: KeyValue) -> None:
    lease = await Leases(kv, "agent-a", ttl_s=30).acquire("s1")  # next renewal in 10 s
    assert lease is not None
    await kv.put("s1", b"agent-b")
    await lease.release()  # not noticed yet: the delete at our revision is refused
    assert (await kv.get("s1")).value == b"agent-b"


async def test_a_lease_taken_by_another_write_is_lost_and_left_alone(
    kv: KeyValue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="switchboard_agent.runs.lease")
    lost = counted("lost")
    lease = await Leases(kv, "agent-a", ttl_s=0.3).acquire("s1")
    assert lease is not None
    await kv.put("s1", b"agent-b")  # e.g. the key expired and another replica took it
    await asyncio.wait_for(lease.lost.wait(), BOUND_S)
    assert counted("lost") == lost + 1
    [said] = [r for r in caplog.records if r.getMessage() == "lane lease lost"]
    assert said.__dict__["lease"] == "s1"
    released = counted("released")
    await lease.release()
    assert (await kv.get("s1")).value == b"agent-b"  # still the other owner's
    assert counted("released") == released


async def test_a_failed_renewal_is_retried_not_lost(
    module_nats_url: str, kv: KeyValue, caplog: pytest.LogCaptureFixture
) -> None:
    own = await nats.connect(module_nats_url)
    own_kv = await own.jetstream().key_value(kv._name)
    lease = await Leases(own_kv, "agent-a", ttl_s=0.3).acquire("s1")
    assert lease is not None
    caplog.set_level(logging.WARNING, logger="switchboard_agent.runs.lease")
    await own.close()  # NATS away for this replica

    said = re.compile(r"^lane lease renewal failed \((\w+)\)$")

    def failed_twice() -> bool:
        return sum(bool(said.match(r.getMessage())) for r in caplog.records) >= 2

    await until("two failed renewals", failed_twice)
    names = {m.group(1) for r in caplog.records if (m := said.match(r.getMessage()))}
    assert names and "NoneType" not in names  # the kind of error that stopped the renewal
    assert not lease.lost.is_set()
    await lease.release()  # cannot delete: the key expires by itself
    assert (await kv.get("s1")).value == b"agent-a"
