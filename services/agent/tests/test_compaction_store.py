"""Compactions against a real PostgreSQL: the history loader returns the summary first and
only the messages after it, the compacted messages stay stored, a reset takes the summary
with it; and the memory flush's file fallback cannot be sent outside the workspace."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import nats
import pytest

from switchboard import bus
from switchboard.store import create_pool, migrate
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2
from switchboard_agent.compaction.memory_flush import MemoryFileStore
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.sessions.admin import SessionAdmin
from switchboard_agent.sessions.compactions import SUMMARY_HEAD, Compaction, CompactionStore
from switchboard_agent.sessions.store import RunRecord, SessionStore
from switchboard_agent.tools.client import CallRequest
from switchboard_agent.tools.local import LocalContext

KEY = "main:api:comp"


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, max_size=2)
    await migrate(pool, SCHEMA, MIGRATIONS)
    await pool.execute("DELETE FROM agent.sessions WHERE session_key = $1", KEY)
    try:
        yield pool
    finally:
        await pool.close()


async def commit(store: SessionStore, n: int, texts: list[str]) -> None:
    run = RunRecord(f"run-{n}-{os.urandom(4).hex()}", KEY, "main", f"m{n}", n, datetime.now(UTC))
    run.messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    run.epoch, _ = await store.transcript_at(KEY)
    await store.commit_run(run, expected_cursor=n - 1)


def texts(messages: list[dict[str, object]]) -> list[str]:
    return [m["content"][0]["text"] for m in messages]  # type: ignore[index]


async def test_the_loader_returns_the_summary_then_the_tail(
    pool: asyncpg.Pool, nats_url: str
) -> None:
    store, compactions = SessionStore(pool), CompactionStore(pool)
    for n, pair in enumerate([["a", "A"], ["b", "B"], ["c", "C"]], 1):
        await commit(store, n, pair)
    live = await compactions.live(KEY)
    assert live is not None and live.summary == "" and texts(live.messages) == list("aAbBcC")
    epoch = live.epoch
    saved = await compactions.save(
        Compaction(KEY, epoch, live.ids[3], "a and b happened", "manual", 4, 10, 5, 0)
    )
    assert saved
    _, view = await store.transcript_at(KEY)
    assert texts(view) == [f"{SUMMARY_HEAD}\na and b happened", "c", "C"]
    assert (await store.run_start(KEY, "m9")).history == view  # the run's own read: the same
    assert [m.content[0]["text"] for m in await store.history(KEY)] == list("aAbBcC")  # kept
    await commit(store, 4, ["d", "D"])
    _, view = await store.transcript_at(KEY)
    assert texts(view)[1:] == ["c", "C", "d", "D"]  # later runs follow the summary

    # A summary of a transcript that was reset meanwhile is not stored; a reset removes the
    # summary with the messages it summarised.
    nc = await nats.connect(nats_url)
    try:
        assert await SessionAdmin(pool, nc, bus.Subjects()).reset(KEY) == 8
    finally:
        await nc.close()
    stale = Compaction(KEY, epoch, live.ids[5], "stale", "manual", 6, 10, 5, 0)
    assert not await compactions.save(stale)
    assert (
        await pool.fetchval("SELECT count(*) FROM agent.compactions WHERE session_key = $1", KEY)
        == 0
    )
    assert (await store.transcript_at(KEY))[1] == []
    assert (await store.run_start(KEY, "m9")).history == []


async def test_the_file_fallback_appends_beneath_the_workspace(tmp_path: Path) -> None:
    tool = MemoryFileStore(tmp_path, lambda agent: ZoneInfo("UTC"))
    ctx = LocalContext("run-1", KEY, "main", messages_pb2.LaneItem(), Standing.OWNER)
    done = await tool.run(ctx, CallRequest("c1", "memory_store", {"text": "Locker  4817"}))
    assert not done.is_error, done.content
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    written = (tmp_path / "main" / "memory" / f"{day}.md").read_text()
    assert written.startswith("- Locker 4817 (") and KEY in written

    # memory/ swapped for a symlink to a directory outside the workspace: refused.
    outside = tmp_path / "outside"
    outside.mkdir()
    other = tmp_path / "w2"
    (other / "main").mkdir(parents=True)
    (other / "main" / "memory").symlink_to(outside)
    refused = await MemoryFileStore(other, lambda a: ZoneInfo("UTC")).run(
        ctx, CallRequest("c2", "memory_store", {"text": "secret"})
    )
    assert refused.is_error and "symbolic link" in refused.content
    assert list(outside.iterdir()) == []
    # ... and to a directory inside that others read (a group's workspace): refused too.
    group = other / "main" / "sessions" / "group-dir"
    group.mkdir(parents=True)
    (other / "main" / "memory").unlink()
    (other / "main" / "memory").symlink_to("sessions/group-dir")
    refused = await MemoryFileStore(other, lambda a: ZoneInfo("UTC")).run(
        ctx, CallRequest("c3", "memory_store", {"text": "the owner's fact"})
    )
    assert refused.is_error and "symbolic link" in refused.content
    assert list(group.iterdir()) == []
