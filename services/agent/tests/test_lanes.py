"""The lane cursor against real NATS and PostgreSQL: order per session, replays dropped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.queue_modes import QueueMode
from switchboard.sessions import session_token
from switchboard.store import create_pool, migrate
from switchboard.v1 import messages_pb2
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.runs.lanes import LaneManager, LaneReader
from switchboard_agent.runs.lease import Leases
from switchboard_agent.runs.runner import Runner
from switchboard_agent.sessions.store import SessionStore
from switchboard_agent.tools.client import ToolDispatcher


@dataclass
class Env:
    nc: NATS
    js: JetStreamContext
    subjects: bus.Subjects
    pool: asyncpg.Pool
    store: SessionStore
    consumer: LaneManager
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
    kv = await js.key_value(subjects.lease_bucket)
    leases = Leases(kv, "test-owner", bus.LEASE_TTL_S)
    reader = LaneReader(js, subjects.stream("LANES"))
    manager = LaneManager(
        nc,
        reader,
        leases,
        store,
        runner,
        default_mode=QueueMode.QUEUE,
        collect_debounce_s=0.3,
        nak_delay_s=0.1,
    )
    yield Env(nc, js, subjects, pool, store, manager, leases)
    await pool.close()
    await nc.close()


async def enqueue(env: Env, key: str, text: str, message_id: str) -> int:
    item = messages_pb2.LaneItem(
        session_key=key,
        agent="main",
        message=messages_pb2.InboundMessage(channel="api", text=text, message_id=message_id),
    )
    return await bus.js_publish(env.js, env.subjects.lane("main", session_token(key)), item)


async def drain(env: Env, durable: str, n: int) -> None:
    sub = await bus.durable_pull(
        env.js, env.subjects.stream("LANES"), durable, env.subjects.lanes()
    )
    msgs = await sub.fetch(n, timeout=5)
    assert len(msgs) == n
    await asyncio.gather(*(deliver(env, m) for m in msgs))  # concurrently, like replicas


async def deliver(env: Env, msg: Msg) -> None:
    """One dispatch delivery, decoded as the agent's consumer does."""
    await env.consumer.handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))


def user_texts(transcript: list[dict]) -> list[str]:
    return [m["content"][0]["text"] for m in transcript if m["role"] == "user"]


async def test_items_run_in_lane_order_and_cursor_follows(env: Env) -> None:
    seqs = [await enqueue(env, "s:a", f"a{i}", f"ma{i}") for i in range(5)]
    await enqueue(env, "s:b", "b0", "mb0")
    await drain(env, "d1", 6)
    assert user_texts(await env.store.transcript("s:a")) == [f"a{i}" for i in range(5)]
    assert user_texts(await env.store.transcript("s:b")) == ["b0"]
    assert (await env.store.lane_state("s:a")).cursor == seqs[-1]
    replies = [m for m in await env.store.transcript("s:a") if m["role"] == "assistant"]
    assert all(m["content"][0]["text"] == "configure a model" for m in replies)


async def test_replayed_items_are_dropped(env: Env) -> None:
    for i in range(3):
        await enqueue(env, "s:r", f"r{i}", f"mr{i}")
    await drain(env, "first", 3)
    runs = await env.pool.fetchval("SELECT count(*) FROM agent.runs")
    # a second consumer sees the whole lane again, as after a crash before the ack
    await drain(env, "second", 3)
    assert await env.pool.fetchval("SELECT count(*) FROM agent.runs") == runs == 3
    assert user_texts(await env.store.transcript("s:r")) == ["r0", "r1", "r2"]


async def test_same_inbound_message_runs_once(env: Env) -> None:
    await enqueue(env, "s:d", "hello", "same-id")
    await enqueue(env, "s:d", "hello", "same-id")  # a retransmit past the dedupe window
    await drain(env, "d", 2)
    assert user_texts(await env.store.transcript("s:d")) == ["hello"]


async def test_lane_owned_elsewhere_is_nak_and_later_taken(env: Env) -> None:
    await enqueue(env, "s:busy", "x", "mx")
    other = await env.leases.kv.create(session_token("s:busy"), b"another-replica")
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "n", env.subjects.lanes())
    [msg] = await sub.fetch(1, timeout=5)
    await deliver(env, msg)  # another owner: NAKed, nothing run
    assert await env.store.transcript("s:busy") == []
    await env.leases.kv.delete(session_token("s:busy"), last=other)
    [again] = await sub.fetch(1, timeout=5)  # the NAK brings it back
    assert again.metadata.num_delivered == 2
    await deliver(env, again)
    assert user_texts(await env.store.transcript("s:busy")) == ["x"]


async def test_collect_merges_pending_items_into_one_run(env: Env) -> None:
    await env.store.set_queue_mode("s:c", "main", "collect")
    for i in range(3):
        await enqueue(env, "s:c", f"c{i}", f"mc{i}")
    await drain(env, "c", 3)
    transcript = await env.store.transcript("s:c")
    assert [m["role"] for m in transcript] == ["user", "assistant"]
    assert [b["text"] for b in transcript[0]["content"]] == ["c0", "c1", "c2"]
    assert await env.pool.fetchval("SELECT count(*) FROM agent.runs") == 1


async def test_a_database_error_after_taking_the_lease_lets_it_go(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL away just after the lease was taken: the delivery fails (NAKed), and the
    lease is released, so the redelivery runs the item (a leaked lease renews itself and
    locks the session out for good)."""
    await enqueue(env, "s:pg", "still here", "mpg")
    real = env.store.lane_state
    failures = [ConnectionError("PostgreSQL is restarting")]

    async def lane_state(key: str) -> Any:
        if failures:
            raise failures.pop()
        return await real(key)

    monkeypatch.setattr(env.store, "lane_state", lane_state)
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "pg", env.subjects.lanes())
    [msg] = await sub.fetch(1, timeout=5)
    with pytest.raises(ConnectionError):
        await deliver(env, msg)
    await msg.nak()  # as the PullWorker does when the handler raises
    [again] = await sub.fetch(1, timeout=5)
    await deliver(env, again)
    assert user_texts(await env.store.transcript("s:pg")) == ["still here"]
    with pytest.raises(nats.js.errors.KeyNotFoundError):  # released, not left renewing
        await env.leases.kv.get(session_token("s:pg"))
