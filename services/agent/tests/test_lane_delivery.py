"""The lane protocol's parts around a run (docs/architecture.md), against real NATS and
PostgreSQL: the reader gives a lane's items after the cursor in order, one lane only, up to its
limit; a replica already working on a lane takes a new delivery of it into that work instead of
NAKing it; a busy replica stops at the items it was handed; NAK delays grow with each delivery
up to their cap; the reader keeps an item's headers (its trace context); the lane wait is
measured from the item's enqueue time; the queue mode comes from the session, the item or the
agent; collect takes only its own lane's items."""

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
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard.queue_modes import QueueMode
from switchboard.sessions import session_token
from switchboard.store import create_pool, migrate
from switchboard.v1 import messages_pb2
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.runs.lanes import LaneManager, LaneReader
from switchboard_agent.runs.lease import Leases
from switchboard_agent.runs.queueing import PendingItem
from switchboard_agent.runs.runner import Runner
from switchboard_agent.sessions.store import SessionStore
from switchboard_agent.tools.client import ToolDispatcher


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
    # Acked, none NAKed. The server applies acks apart from its answers to consumer info: a
    # look right after the acks were sent could still count them pending (seen once in CI).
    deadline = time.monotonic() + 10
    info = await env.js.consumer_info(env.subjects.stream("LANES"), "j")
    while info.num_ack_pending and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        info = await env.js.consumer_info(env.subjects.stream("LANES"), "j")
    assert (info.num_ack_pending, info.num_redelivered) == (0, 0)


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


def test_nak_delays_default_to_a_twentieth_of_a_second_capped_at_two(env: Env) -> None:
    lanes = LaneManager(
        env.nc,
        env.reader,
        env.leases,
        env.store,
        env.runner,
        default_mode=QueueMode.QUEUE,
        collect_debounce_s=0.3,
    )
    assert [lanes._nak_delay(n) for n in (1, 2, 1000)] == pytest.approx([0.05, 0.1, 2.0])


async def test_the_reader_keeps_an_items_headers(env: Env) -> None:
    """The trace context rides in the headers: a run's span continues the sender's trace."""
    item = messages_pb2.LaneItem(session_key="s:h", agent="main")
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    await env.js.publish(subject(env, "s:h"), item.SerializeToString(), headers=headers)
    [pending] = await env.reader.pending(subject(env, "s:h"), 0)
    assert pending.headers["traceparent"] == headers["traceparent"]


def lane_wait(suffix: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(f"sb_lane_wait_seconds{suffix}", labels) or 0.0


async def test_the_lane_wait_is_measured_from_the_items_enqueue_time(env: Env) -> None:
    """sb_lane_wait_seconds: a minute for an item enqueued a minute ago; 0 (not negative) for
    one stamped ahead of this replica's clock."""
    now_ms = int(time.time() * 1000)
    stamps = {"old": now_ms - 60_000, "ahead": now_ms + 3_600_000}
    for text, stamp in stamps.items():
        item = messages_pb2.LaneItem(
            session_key="s:w",
            agent="main",
            message=messages_pb2.InboundMessage(channel="api", text=text, message_id=text),
            enqueued_at_ms=stamp,
        )
        await bus.js_publish(env.js, subject(env, "s:w"), item)
    total, count, first_bucket = (
        lane_wait("_sum"),
        lane_wait("_count"),
        lane_wait("_bucket", le="0.005"),
    )
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "w", env.subjects.lanes())
    [msg] = await sub.fetch(1, timeout=5)
    await manager(env).handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))  # runs both
    assert user_texts(await env.store.transcript("s:w")) == ["old", "ahead"]
    assert lane_wait("_count") == count + 2
    assert lane_wait("_bucket", le="0.005") == first_bucket + 1  # "ahead": 0
    assert 60 <= lane_wait("_sum") - total < 60 + 30  # "old": a minute, and what it took


@pytest.mark.parametrize("where", ["agent", "item"])
async def test_a_lanes_queue_mode_comes_from_the_agent_or_the_item(env: Env, where: str) -> None:
    """No session override: the item's mode (its channel's), else the agent's default."""
    fields = {"queue_mode": "collect"} if where == "item" else {}
    for i in range(3):
        item = messages_pb2.LaneItem(
            session_key="s:q",
            agent="main",
            message=messages_pb2.InboundMessage(channel="api", text=f"q{i}", message_id=f"q{i}"),
            **fields,  # type: ignore[arg-type]
        )
        await bus.js_publish(env.js, subject(env, "s:q"), item)
    lanes = LaneManager(
        env.nc,
        env.reader,
        env.leases,
        env.store,
        env.runner,
        default_mode=QueueMode.COLLECT if where == "agent" else QueueMode.QUEUE,
        collect_debounce_s=0.3,
    )
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "q", env.subjects.lanes())
    [msg] = await sub.fetch(1, timeout=5)
    await lanes.handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))
    transcript = await env.store.transcript("s:q")
    assert [m["role"] for m in transcript] == ["user", "assistant"]  # one run for the three
    assert [b["text"] for b in transcript[0]["content"]] == ["q0", "q1", "q2"]


async def test_collect_takes_only_its_own_lanes_items(env: Env) -> None:
    await env.store.set_queue_mode("s:c", "main", "collect")
    await enqueue(env, "s:c", "c0")
    await enqueue(env, "s:other", "o0")  # another session's item in between
    await enqueue(env, "s:c", "c1")
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "c", env.subjects.lanes())
    [msg] = await sub.fetch(1, timeout=5)
    await manager(env).handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))
    transcript = await env.store.transcript("s:c")
    assert [b["text"] for b in transcript[0]["content"]] == ["c0", "c1"]


async def test_collect_waits_for_a_quiet_window_and_takes_what_arrived_in_it(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """c1 is enqueued only once the owner has read the lane (and found c0 alone): the debounce
    window, counted from c0's arrival, is still open, so c1 joins c0's run."""
    await env.store.set_queue_mode("s:w", "main", "collect")
    await enqueue(env, "s:w", "c0")
    lanes = manager(env)
    lanes.collect_debounce_s = 1.0
    read = asyncio.Event()
    pending = env.reader.pending

    async def reading(subject: str, after: int, limit: int = 100) -> list[PendingItem]:
        items = await pending(subject, after, limit)
        if limit > 1:  # the read of everything pending (not the look at the lane's head)
            read.set()
        return items

    monkeypatch.setattr(env.reader, "pending", reading)
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "w", env.subjects.lanes())
    [msg] = await sub.fetch(1, timeout=5)
    handling = asyncio.create_task(lanes.handle(msg, bus.decode(messages_pb2.LaneItem, msg.data)))
    await asyncio.wait_for(read.wait(), 30)
    await enqueue(env, "s:w", "c1")
    await asyncio.wait_for(handling, 30)
    transcript = await env.store.transcript("s:w")
    assert [m["role"] for m in transcript] == ["user", "assistant"]
    assert [b["text"] for b in transcript[0]["content"]] == ["c0", "c1"]
