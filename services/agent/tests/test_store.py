"""The run commit against a real PostgreSQL: one statement that moves the cursor only from the
expected value, and stores the run, its transcript (in order) and drops its checkpoint with it."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from switchboard_agent.approvals.store import ApprovalStore
from switchboard_agent.sessions.store import CursorMoved, RunRecord, RunStart, SessionStore

from .store_harness import store as store  # the fixture


def record(run_id: str, inbound: str, seq: int, texts: list[str]) -> RunRecord:
    run = RunRecord(run_id, "main:api:s1", "main", inbound, seq, datetime.now(UTC))
    run.messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    return run


async def count(pool: asyncpg.Pool, table: str) -> int:
    return int(await pool.fetchval(f"SELECT count(*) FROM agent.{table}"))


async def test_commit_moves_the_cursor_only_from_the_expected_value(store: SessionStore) -> None:
    await store.commit_run(record("run-1", "m1", 3, ["a", "b", "c", "d"]), expected_cursor=0)
    assert (await store.lane_state("main:api:s1")).cursor == 3
    assert [m["content"][0]["text"] for m in await store.transcript("main:api:s1")] == list("abcd")

    with pytest.raises(CursorMoved):  # another owner committed first: nothing of this run lands
        await store.commit_run(record("run-2", "m2", 5, ["x", "y"]), expected_cursor=0)
    assert await count(store.pool, "runs") == 1
    assert await count(store.pool, "messages") == 4
    assert (await store.lane_state("main:api:s1")).cursor == 3

    with pytest.raises(CursorMoved):  # a fresh session only starts from cursor 0
        run = record("run-3", "m3", 2, ["x"])
        run.session_key = "main:api:s2"
        await store.commit_run(run, expected_cursor=7)
    assert await count(store.pool, "sessions") == 1

    await store.commit_run(record("run-2", "m2", 5, ["x", "y"]), expected_cursor=3)
    assert (await store.run_state("main:api:s1", "m2"))[0] is True
    assert (await store.run_state("main:api:s1", "m9"))[0] is False


async def test_commit_drops_the_runs_checkpoint(store: SessionStore) -> None:
    approvals = ApprovalStore(store.pool)
    await approvals.save_checkpoint("main:api:s1", "m1", "run-1", {"messages": []})
    done, saved = await store.run_state("main:api:s1", "m1")
    assert not done and saved == ("run-1", {"messages": []})
    run = record("run-1", "m1", 1, ["a", "b"])
    run.checkpointed = True
    await store.commit_run(run, expected_cursor=0)
    assert await store.run_state("main:api:s1", "m1") == (True, None)


async def test_run_start_reads_what_run_state_and_transcript_at_read(store: SessionStore) -> None:
    """The run's one read before it starts (run_start) gives exactly the two reads it
    replaces: a session without a row, an answered message, a checkpoint, the transcript."""
    key = "main:api:s1"
    assert await store.run_start(key, "m1") == RunStart(False, None, 0, [])
    await store.commit_run(record("run-1", "m1", 1, ["a", "b"]), expected_cursor=0)
    approvals = ApprovalStore(store.pool)
    await approvals.save_checkpoint(key, "m2", "run-2", {"messages": ["x"]})
    for inbound in ("m1", "m2", "m3"):
        done, saved = await store.run_state(key, inbound)
        epoch, history = await store.transcript_at(key)
        assert await store.run_start(key, inbound) == RunStart(done, saved, epoch, history)
    assert (await store.run_start(key, "m1")).done
    assert (await store.run_start(key, "m2")).checkpoint == ("run-2", {"messages": ["x"]})
    assert [m["content"][0]["text"] for m in (await store.run_start(key, "m3")).history] == [
        "a",
        "b",
    ]
