"""The lane protocol's parts around a run (DESIGN.md section 4), against real NATS and
PostgreSQL: the reader gives a lane's items after the cursor in order, one lane only, up to its
limit; a replica already working on a lane takes a new delivery of it into that work instead of
NAKing it; a busy replica stops at the items it was handed; NAK delays grow with each delivery
up to their cap."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.queue_modes import QueueMode
from switchboard.sessions import session_token
from switchboard.store import create_pool, migrate
from switchboard.v1 import messages_pb2
from switchboard_agent.lanes import LaneManager, LaneReader
from switchboard_agent.lease import Leases
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.runner import Runner
from switchboard_agent.store import SessionStore
from switchboard_agent.tools_client import ToolDispatcher


@dataclass
class Env:
    nc: NATS
    js: JetStreamContext
    subjects: bus.Subjects
    store: SessionStore
    reader: LaneReader
    runner: Runner
    leases: Leases


@pytest.fixture
async def env(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    subjects = bus.Subjects()
    await bus.ensure_streams(js, subjects)
    pool = await create_pool(database_url)
    await migrate(pool, SCHEMA, MIGRATIONS)
    store = SessionStore(pool)
    tools = ToolDispatcher(nc, js, subjects, 5.0)
    runner = Runner(nc, subjects, store, tools, None, "configure a model", tmp_path, 4, 100)
    leases = Leases(await js.key_value(subjects.lease_bucket), "test-owner", bus.LEASE_TTL_S)
    yield Env(nc, js, subjects, store, LaneReader(js, subjects.stream("LANES")), runner, leases)
    await pool.close()
    await nc.close()


def manager(env: Env, **options: object) -> LaneManager:
    return LaneManager(
        env.nc,
        env.reader,
        env.leases,
        env.store,
        env.runner,
        default_mode=QueueMode.QUEUE,
        collect_debounce_s=0.3,
        **options,  # type: ignore[arg-type]
    )


def subject(env: Env, key: str) -> str:
    return env.subjects.lane("main", session_token(key))


async def enqueue(env: Env, key: str, text: str) -> int:
    item = messages_pb2.LaneItem(
        session_key=key,
        agent="main",
        message=messages_pb2.InboundMessage(channel="api", text=text, message_id=f"m-{text}"),
    )
    return await bus.js_publish(env.js, subject(env, key), item)


def user_texts(transcript: list[dict]) -> list[str]:
    return [m["content"][0]["text"] for m in transcript if m["role"] == "user"]


async def test_the_reader_gives_a_lanes_items_after_the_cursor_in_order(env: Env) -> None:
    before = time.time()
    seqs = [await enqueue(env, "s:r", f"r{i}") for i in range(4)]
    await enqueue(env, "s:other", "o0")
    items = await env.reader.pending(subject(env, "s:r"), seqs[0])
    assert [p.seq for p in items] == seqs[1:]
    assert [p.item.message.text for p in items] == ["r1", "r2", "r3"]
    assert all(before - 5 <= p.arrived_at <= time.time() + 5 for p in items)
    limited = await env.reader.pending(subject(env, "s:r"), 0, limit=2)
    assert [p.seq for p in limited] == seqs[:2]
    assert await env.reader.pending(subject(env, "s:r"), seqs[-1]) == []


async def test_a_delivery_of_a_lane_in_work_joins_that_work(env: Env) -> None:
    lanes = manager(env)
    for i in range(3):
        await enqueue(env, "s:j", f"j{i}")
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "j", env.subjects.lanes())
    msgs = await sub.fetch(3, timeout=5)
    items = [bus.decode(messages_pb2.LaneItem, m.data) for m in msgs]
    # All three at once on one replica: the first takes the lane, the others join it.
    await asyncio.gather(*(lanes.handle(m, i) for m, i in zip(msgs, items, strict=True)))
    assert user_texts(await env.store.transcript("s:j")) == ["j0", "j1", "j2"]
    assert lanes.owned == {}
    info = await env.js.consumer_info(env.subjects.stream("LANES"), "j")
    assert (info.num_ack_pending, info.num_redelivered) == (0, 0)  # acked, none NAKed


async def test_a_busy_replica_stops_at_the_items_it_was_handed(env: Env) -> None:
    lanes = manager(env, saturated=lambda: True)
    seqs = [await enqueue(env, "s:b", f"b{i}") for i in range(3)]
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "b", env.subjects.lanes())
    [first] = await sub.fetch(1, timeout=5)
    await lanes.handle(first, bus.decode(messages_pb2.LaneItem, first.data))
    # Handed the first item only, with every slot taken: b1 and b2 wait for their deliveries.
    assert user_texts(await env.store.transcript("s:b")) == ["b0"]
    assert (await env.store.lane_state("s:b")).cursor == seqs[0]
    free = manager(env)
    [second] = await sub.fetch(1, timeout=5)
    await free.handle(second, bus.decode(messages_pb2.LaneItem, second.data))
    assert user_texts(await env.store.transcript("s:b")) == ["b0", "b1", "b2"]


def test_nak_delays_grow_with_each_delivery_up_to_the_cap(env: Env) -> None:
    lanes = manager(env, nak_delay_s=0.05, nak_delay_max_s=0.2)
    delays = [lanes._nak_delay(n) for n in (1, 2, 3, 4, 10)]
    assert delays == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.2])
    assert lanes.nak_delay_s == 0.05 and lanes.keepalive_s == 5.0
