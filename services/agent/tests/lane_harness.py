"""What the lane owner's tests share (test_lane_interrupt.py, test_lane_cursor.py,
test_lane_acks.py): a lane manager on real NATS and PostgreSQL whose runner calls a scripted
stand-in for the LLM API (the one third-party part), and helpers to enqueue, deliver and read
back runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

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
from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.runs.lanes import LaneManager, LaneReader
from switchboard_agent.runs.lease import Leases
from switchboard_agent.runs.runner import Runner
from switchboard_agent.sessions.store import SessionStore
from switchboard_agent.tools.client import ToolDispatcher

BOUND_S = 30.0  # each wait ends at its event; this only bounds a failure


class HeldModel:
    """Answers at once, except to a request whose newest text is "first": that answer waits
    until :attr:`release` is set or the run is cancelled, so the run is known to be in
    progress meanwhile."""

    provider = "test"
    model = "held"

    def __init__(self) -> None:
        self.asked: list[str] = []  # each call's newest user text
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        text = newest_text(request)
        self.asked.append(text)
        if text == "first":
            self.holding.set()
            await self.release.wait()
        yield ModelResponse([{"type": "text", "text": f"re: {text}"}], "end_turn", Usage(1, 1), "m")


def newest_text(request: ModelRequest) -> str:
    content = [m for m in request.messages if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    texts = [b["text"] for b in content if b.get("type") == "text"]
    return texts[-1] if texts else json.dumps(content)


@dataclass
class Env:
    nc: NATS
    js: JetStreamContext
    subjects: bus.Subjects
    store: SessionStore
    model: HeldModel
    runner: Runner
    lanes: LaneManager


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
    model = HeldModel()
    runner = Runner(nc, subjects, store, tools, model, "", tmp_path, 4, 100)
    leases = Leases(await js.key_value(subjects.lease_bucket), "test-owner", bus.LEASE_TTL_S)
    lanes = LaneManager(
        nc,
        LaneReader(js, subjects.stream("LANES")),
        leases,
        store,
        runner,
        default_mode=QueueMode.QUEUE,
        collect_debounce_s=0.3,
    )
    yield Env(nc, js, subjects, store, model, runner, lanes)
    await pool.close()
    await nc.close()


def lane_subject(env: Env, key: str) -> str:
    return env.subjects.lane("main", session_token(key))


async def enqueue(env: Env, key: str, text: str, **fields: object) -> int:
    item = messages_pb2.LaneItem(
        session_key=key,
        agent="main",
        message=messages_pb2.InboundMessage(channel="api", text=text, message_id=f"m-{text}"),
        **fields,  # type: ignore[arg-type]
    )
    return await bus.js_publish(env.js, lane_subject(env, key), item)


async def fetch(env: Env, durable: str) -> Msg:
    """The next dispatch delivery of the consumer ``durable``."""
    sub = await bus.durable_pull(
        env.js, env.subjects.stream("LANES"), durable, env.subjects.lanes()
    )
    [msg] = await sub.fetch(1, timeout=5)
    return msg


async def handle(env: Env, msg: Msg) -> None:
    await env.lanes.handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))


async def handle_next(env: Env, durable: str) -> asyncio.Task[None]:
    """The next dispatch delivery, handled in the background as the agent's worker does."""
    return asyncio.create_task(handle(env, await fetch(env, durable)))


async def runs(env: Env, key: str) -> list[tuple[int, str]]:
    rows = await env.store.pool.fetch(
        "SELECT lane_seq, status FROM agent.runs WHERE session_key = $1 ORDER BY lane_seq", key
    )
    return [(r["lane_seq"], r["status"]) for r in rows]


def watching(env: Env, key: str) -> int:
    """This connection's subscriptions to the lane's subject (the owner's watch for newer items:
    it ends with the run)."""
    lane = lane_subject(env, key)
    return sum(sub.subject == lane for sub in env.nc._subs.values())


async def all_acked(env: Env, durable: str) -> bool:
    """Whether the consumer ``durable`` gets every delivery acknowledged (acks are not
    confirmed: the server may count one a moment later) and none of them redelivered."""
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while True:
        info = await env.js.consumer_info(env.subjects.stream("LANES"), durable)
        if info.num_ack_pending == 0 or asyncio.get_running_loop().time() > deadline:
            return (info.num_ack_pending, info.num_redelivered) == (0, 0)
        await asyncio.sleep(0.02)
