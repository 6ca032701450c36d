"""A run's usage rows held for its commit (usage/writer.py, runs/commit.py) against a real
PostgreSQL: the commit statement writes them, in call order, with no statement of their own;
rows the commit does not write (it failed, the run outlived the hold, the agent stops) are
still written once; a budget that reads stored usage keeps each call's row written at once;
and a run whose cursor moved under it still has its calls counted."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from switchboard_agent.providers.base import Usage
from switchboard_agent.runs.budget import Accounting, Budget
from switchboard_agent.runs.commit import commit_run, hold_usage, holds_usage
from switchboard_agent.sessions.store import CursorMoved, RunRecord, SessionStore
from switchboard_agent.usage.store import Price

from .store_harness import CountingStore
from .store_harness import store as store  # the fixture

PRICES = {"openai:gpt-x": Price(input=2.0, output=8.0)}
BOUND_S = 30.0


def run(run_id: str, seq: int = 1, session: str = "main:api:h") -> RunRecord:
    record = RunRecord(run_id, session, "main", f"in-{run_id}", seq, datetime.now(UTC))
    record.messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    return record


async def rows(store: SessionStore, run_id: str) -> list[int]:
    found = await store.pool.fetch(
        "SELECT input_tokens FROM agent.usage WHERE run_id = $1 ORDER BY id", run_id
    )
    return [r["input_tokens"] for r in found]


def accounting(store: SessionStore, budget: Budget | None = None) -> Accounting:
    return Accounting(CountingStore(store.pool), budget, PRICES)


async def test_the_commit_writes_the_runs_usage_in_call_order(store: SessionStore) -> None:
    acc = accounting(store)
    record = run("run_h1")
    hold_usage(acc, record.run_id)
    await acc.add(record, "openai:gpt-x", Usage(3, 1))
    await acc.add(record, "openai:gpt-x", Usage(5, 1))
    await asyncio.sleep(0.05)  # a writer that wrote them at once would have done so by now
    assert await rows(store, "run_h1") == []
    await commit_run(store, acc, record, expected_cursor=0)
    assert await rows(store, "run_h1") == [3, 5]
    await asyncio.wait_for(acc.settled(record.session_key), BOUND_S)  # resolved by the commit
    later = run("run_h1b", seq=2)  # a run without a hold: its row is written at once
    await acc.add(later, "openai:gpt-x", Usage(7, 1))
    await asyncio.wait_for(acc.settled(later.session_key), BOUND_S)
    assert await rows(store, "run_h1b") == [7]
    assert isinstance(acc.usage, CountingStore) and acc.usage.statements == [1]
    await acc.close()


async def test_rows_held_past_the_hold_are_written_by_the_writer(store: SessionStore) -> None:
    acc = accounting(store)
    acc.writer.hold_s = 0.05  # e.g. a long tool call, an approval wait, an owner that died
    record = run("run_h2")
    hold_usage(acc, record.run_id)
    await acc.add(record, "openai:gpt-x", Usage(2, 1))
    await asyncio.wait_for(acc.settled(record.session_key), BOUND_S)
    assert await rows(store, "run_h2") == [2]
    await acc.add(record, "openai:gpt-x", Usage(4, 1))  # after the hold: written at once
    await asyncio.wait_for(acc.settled(record.session_key), BOUND_S)
    await commit_run(store, acc, record, expected_cursor=0)
    assert await rows(store, "run_h2") == [2, 4]  # each once
    await acc.close()


async def test_a_failed_commit_hands_its_rows_to_the_writer(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = accounting(store)
    record = run("run_h3")
    hold_usage(acc, record.run_id)
    await acc.add(record, "openai:gpt-x", Usage(6, 1))

    async def away(*args: Any) -> None:
        raise ConnectionError("database away")

    monkeypatch.setattr(store, "commit_run", away)
    with pytest.raises(ConnectionError):
        await commit_run(store, acc, record, expected_cursor=0)
    await asyncio.wait_for(acc.settled(record.session_key), BOUND_S)
    assert await rows(store, "run_h3") == [6]
    await acc.close()


async def test_a_run_whose_cursor_moved_still_counts_its_calls(store: SessionStore) -> None:
    acc = accounting(store)
    await store.commit_run(run("run_h4a", seq=3), expected_cursor=0)  # another owner's
    record = run("run_h4", seq=4)
    hold_usage(acc, record.run_id)
    await acc.add(record, "openai:gpt-x", Usage(8, 1))
    with pytest.raises(CursorMoved):
        await commit_run(store, acc, record, expected_cursor=0)
    assert await rows(store, "run_h4") == [8]
    assert await store.pool.fetchval("SELECT count(*) FROM agent.runs WHERE run_id = 'run_h4'") == 0
    await asyncio.wait_for(acc.settled(record.session_key), BOUND_S)
    await acc.close()


async def test_close_writes_the_rows_still_held(store: SessionStore) -> None:
    acc = accounting(store)
    record = run("run_h5")
    hold_usage(acc, record.run_id)
    await acc.add(record, "openai:gpt-x", Usage(9, 1))
    await acc.close()  # the agent stops before the run's commit
    assert await rows(store, "run_h5") == [9]


async def test_a_budget_that_reads_stored_usage_gets_each_row_at_once(store: SessionStore) -> None:
    """Session and agent-day limits sum agent.usage before each call, on every replica: there
    a run holds nothing. Run-only limits read nothing stored: a run holds its rows."""
    assert holds_usage(accounting(store, Budget.model_validate({"run_tokens": 10})))
    for limits in ({"session_tokens": 10}, {"agents": {"other": {"agent_daily_usd": 1}}}):
        acc = accounting(store, Budget.model_validate(limits))
        assert not holds_usage(acc)
        record = run(f"run_h6_{len(limits)}{next(iter(limits))}")
        hold_usage(acc, record.run_id)
        await acc.add(record, "openai:gpt-x", Usage(10, 1))
        await asyncio.wait_for(acc.settled(record.session_key), BOUND_S)
        assert await rows(store, record.run_id) == [10]  # before any commit
        await acc.close()
    assert not holds_usage(None)
