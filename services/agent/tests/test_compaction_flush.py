"""The memory flush before a compaction obeys the run's standing (docs/trust.md), against a
real PostgreSQL and nats-server and a stand-in for the model provider's API: without the memory
service, only a run of the owner's standing appends its facts to the agent's memory files; a
session of anyone else stores nothing there (its facts would go to its own memory scope through
the memory service). The manual compaction takes the standing its root session remembers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NATS

from switchboard import bus
from switchboard.store import create_pool, migrate
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2
from switchboard_agent.approvals.toolgate import ToolRules
from switchboard_agent.compaction.compactor import Compactor, Job
from switchboard_agent.compaction.config import CompactionSettings
from switchboard_agent.compaction.memory_flush import MemoryFileStore
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.outbound.events import RunEvents
from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.sessions.compactions import CompactionStore
from switchboard_agent.sessions.store import RunRecord, SessionStore
from switchboard_agent.tools.client import CallRequest
from switchboard_agent.tools.local import LocalContext, LocalTools

SUBJECTS = bus.Subjects()
KEY = "main:telegram:42"


class FlushingModel:
    """Stands in for the provider: stores one fact when offered memory_store, else summarises."""

    provider = "fake"
    model = "flusher"

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        if request.tools:
            use = {"type": "tool_use", "id": "t1", "name": "memory_store",
                   "input": {"text": "The locker code is 4817"}}  # fmt: skip
            yield ModelResponse([use], "tool_use", Usage(1, 1), self.model)
        else:
            yield ModelResponse([{"type": "text", "text": "a summary"}], "end_turn", Usage(1, 1),
                                self.model)  # fmt: skip


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, max_size=2)
    await migrate(pool, SCHEMA, MIGRATIONS)
    store = SessionStore(pool)
    for n in range(1, 4):
        run = RunRecord(f"run-{n}", KEY, "main", f"m{n}", n, datetime.now(UTC))
        run.messages = [
            {"role": "user", "content": [{"type": "text", "text": f"my locker is 4817 ({n})"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
        ]
        await store.commit_run(run, expected_cursor=n - 1)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.mark.parametrize(
    ("standing", "to"), [(Standing.OWNER, "file"), (Standing.PERSONAL, "none")]
)
async def test_only_the_owners_standing_flushes_into_the_agents_files(
    pool: asyncpg.Pool, nats_url: str, tmp_path: Path, standing: Standing, to: str
) -> None:
    nc: NATS = await nats.connect(nats_url)
    try:
        rules = ToolRules()
        compactor = Compactor(
            CompactionSettings(),
            CompactionStore(pool),
            rules,
            LocalTools(),  # no memory service: the file fallback is the only store
            "agent",
            tmp_path,
            lambda agent: ZoneInfo("UTC"),
            1000,
        )
        record = RunRecord("run-c", KEY, "main", "", 0, datetime.now(UTC))
        events = RunEvents(nc, SUBJECTS.events("t"), "run-c", KEY, "", [])
        policy = rules.policy("main", KEY, None, standing=standing)
        job = Job(KEY, "main", FlushingModel(), policy, "manual", 1, events, record)
        job.standing = standing
        outcome = await compactor.compact(job)
    finally:
        await nc.close()
    assert outcome.compacted and outcome.flush.to == to
    memory = tmp_path / "main" / "memory"
    written = [p.read_text() for p in memory.iterdir()] if memory.exists() else []
    if standing is Standing.OWNER:
        assert len(written) == 1 and "The locker code is 4817" in written[0]
    else:
        assert written == []


async def test_the_file_store_refuses_anyone_but_the_owner(tmp_path: Path) -> None:
    tool = MemoryFileStore(tmp_path, lambda agent: ZoneInfo("UTC"))
    call = CallRequest("c1", "memory_store", {"text": "a group's fact"})
    for standing in (Standing.PERSONAL, Standing.GROUP):
        ctx = LocalContext("run-1", KEY, "main", messages_pb2.LaneItem(), standing)
        refused = await tool.run(ctx, call)
        assert refused.is_error and refused.details == {"error": "not_allowed"}
    assert not (tmp_path / "main").exists()


async def test_the_live_transcript_carries_the_root_sessions_standing(pool: asyncpg.Pool) -> None:
    store, compactions = SessionStore(pool), CompactionStore(pool)
    await store.remember_standing(KEY, "main", "personal")
    child = f"{KEY}:sub:{os.urandom(3).hex()}"
    run = RunRecord("run-s", child, "main", "s1", 1, datetime.now(UTC))
    run.messages = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    await store.commit_run(run, expected_cursor=0)
    for key in (KEY, child):
        live = await compactions.live(key)
        assert live is not None and live.root_standing == "personal"
