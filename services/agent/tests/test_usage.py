"""Usage rows and budget checks against a real PostgreSQL: every limit of SB_BUDGET stops the
next call with its own message, per-agent limits replace the common ones, a session's pending
usage write is counted before its check, and Sessions.Usage / Sessions.List report it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any, NoReturn

import grpc
import pytest
from prometheus_client import REGISTRY

from switchboard.v1 import sessions_pb2
from switchboard_agent.api.sessions import SessionsService
from switchboard_agent.providers.base import Usage
from switchboard_agent.runs.budget import Accounting, Budget
from switchboard_agent.sessions.store import RunRecord, SessionStore
from switchboard_agent.usage.store import CallUsage, Price, UsageStore
from switchboard_agent.usage.writer import UsageWriter

from .store_harness import CountingStore
from .store_harness import store as store  # the fixture

PRICES = {"openai:gpt-x": Price(input=2.0, output=8.0), "claude-y": Price(input=3, output=15)}


def run(session: str = "main:api:a", agent: str = "main", run_id: str = "run_1") -> RunRecord:
    return RunRecord(run_id, session, agent, "in-1", 1, datetime.now(UTC))


def accounting(store: SessionStore, **limits: Any) -> Accounting:
    return Accounting(UsageStore(store.pool), Budget.model_validate(limits), PRICES)


async def test_run_limits_stop_without_the_database(store: SessionStore) -> None:
    acc = accounting(store, run_iterations=2, run_tokens=1000)
    record = run()
    record.iterations = 1
    assert await acc.check(record) is None
    record.iterations = 2
    stop = await acc.check(record)
    assert stop is not None and stop.limit == "run_iterations"
    assert "2 model calls of its 2 (SB_BUDGET run_iterations)" in stop.message
    record.iterations, record.input_tokens, record.output_tokens = 1, 900, 100
    stop = await acc.check(record)
    assert stop is not None and stop.limit == "run_tokens"
    assert "1,000 tokens of its 1,000 tokens" in stop.message


async def test_session_and_daily_limits_count_every_call_at_once(store: SessionStore) -> None:
    acc = accounting(store, session_tokens=1000, agents={"spender": {"agent_daily_usd": 0.01}})
    first = run()
    await acc.add(first, "openai:gpt-x", Usage(600, 300))
    assert await acc.check(first) is None  # 900 < 1000
    await acc.add(first, "openai:gpt-x", Usage(50, 50))  # pending write: the check waits for it
    stop = await acc.check(run(run_id="run_2"))
    assert stop is not None and stop.limit == "session_tokens"
    assert "this conversation has used 1,000 tokens of its 1,000 tokens" in stop.message
    assert await acc.check(run(session="main:api:other")) is None  # its own session budget

    # spender: per-agent limits replace the common ones (no session_tokens for it).
    spender = run(session="spender:api:a", agent="spender", run_id="run_s")
    await acc.add(spender, "anthropic:claude-y", Usage(1000, 1000))  # $0.003 + $0.015
    await acc.settled("spender:api:a")
    stop = await acc.check(run(session="spender:api:b", agent="spender"))
    assert stop is not None and stop.limit == "agent_daily_usd"
    assert "agent 'spender' today has used $0.02 of its $0.01" in stop.message


async def test_a_sub_agents_usage_counts_toward_its_root_session(store: SessionStore) -> None:
    """A child's (and grandchild's) calls count in the whole conversation's session budget; a
    session whose key merely starts like the root's does not."""
    usage = UsageStore(store.pool)
    root, child = "main:api:a", "main:api:a:sub:1"
    await usage.add("r1", root, "main", "openai:gpt-x", Usage(100, 0), 0.0)
    await usage.add("r2", child, "main", "openai:gpt-x", Usage(1000, 0), 0.0)
    await usage.add("r3", f"{child}:sub:2", "main", "openai:gpt-x", Usage(10_000, 0), 0.0)
    await usage.add("r4", "main:api:ab", "main", "openai:gpt-x", Usage(5, 0), 0.0)
    assert (await usage.spent(root, "main")).session_tokens == 11_100
    assert (await usage.spent(child, "main")).session_tokens == 11_100
    assert (await usage.spent("main:api:ab", "main")).session_tokens == 5
    acc = accounting(store, session_tokens=11_000)
    stop = await acc.check(run(root))
    assert stop is not None and stop.limit == "session_tokens"


async def test_sessions_usage_and_list(store: SessionStore) -> None:
    acc = accounting(store)
    await acc.add(run(), "openai:gpt-x", Usage(1000, 500))  # $0.002 + $0.004
    await acc.add(run(run_id="run_2"), "openai:unpriced", Usage(10, 5))
    await acc.settled("main:api:a")
    await store.pool.execute(
        "INSERT INTO agent.sessions (session_key, agent) VALUES ('main:api:a', 'main')"
    )
    service = SessionsService(store)
    today = datetime.now(UTC).date().isoformat()
    reply = await service.Usage(sessions_pb2.UsageRequest(agent="main", day=today), Context())
    assert (reply.total.input_tokens, reply.total.output_tokens, reply.total.calls) == (
        1010,
        505,
        2,
    )
    assert reply.total.cost_usd == pytest.approx(0.006)
    assert sorted((r.model, r.day, r.totals.calls) for r in reply.rows) == [
        ("openai:gpt-x", today, 1),
        ("openai:unpriced", today, 1),
    ]
    one = await service.Usage(sessions_pb2.UsageRequest(run_id="run_2"), Context())
    assert one.total.input_tokens == 10
    listed = await service.List(sessions_pb2.ListSessionsRequest(), Context())
    [info] = listed.sessions
    assert (info.usage.input_tokens, info.usage.calls) == (1010, 2)
    with pytest.raises(Aborted) as caught:
        await service.Usage(sessions_pb2.UsageRequest(day="31/01/2026"), Context())
    assert caught.value.args[0] == grpc.StatusCode.INVALID_ARGUMENT


async def test_sessions_usage_answers_the_budget_limits(store: SessionStore) -> None:
    """The limits beside the usage (the Control UI's charts draw them); none without a budget."""
    request = sessions_pb2.UsageRequest(agent="main")
    assert (await SessionsService(store).Usage(request, Context())).budget_json == ""
    budget = Budget.model_validate(
        {"agent_daily_tokens": 5000, "session_usd": 0.5, "agents": {"ops": {"run_tokens": 9}}}
    )
    reply = await SessionsService(store, budget=budget).Usage(request, Context())
    assert json.loads(reply.budget_json) == {
        "agent_daily_tokens": 5000,
        "session_usd": 0.5,
        "agents": {"ops": {"run_tokens": 9}},
    }


class Aborted(Exception):
    pass


class Context:
    """The part of grpc.aio.ServicerContext the servicer uses."""

    async def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise Aborted(code, details)


async def test_calls_queued_together_share_one_statement_in_order(store: SessionStore) -> None:
    counting = CountingStore(store.pool)
    acc = Accounting(counting, None, PRICES)
    records = [run(session=f"main:api:s{i % 3}", run_id=f"run_b{i}") for i in range(30)]
    for i, record in enumerate(records):  # thirty calls finish before the writer runs
        await acc.add(record, "openai:gpt-x", Usage(i + 1, 0))
    for key in {r.session_key for r in records}:
        await acc.settled(key)
    assert sum(counting.statements) == 30
    assert len(counting.statements) <= 2, counting.statements  # not one statement per call
    rows = await store.pool.fetch(
        "SELECT run_id, input_tokens FROM agent.usage WHERE run_id LIKE 'run_b%' ORDER BY id"
    )
    assert [(r["run_id"], r["input_tokens"]) for r in rows] == [
        (f"run_b{i}", i + 1) for i in range(30)
    ]
    # A call after close() is still written.
    await acc.close()
    await acc.add(run(run_id="run_late"), "openai:gpt-x", Usage(7, 0))
    await acc.settled("main:api:a")
    await acc.close()
    assert await store.pool.fetchval("SELECT count(*) FROM agent.usage WHERE run_id = 'run_late'")


async def test_a_failed_write_is_counted_and_the_writer_goes_on(store: SessionStore) -> None:
    class Failing(UsageStore):
        fail = True

        async def add_many(self, calls: Any) -> None:
            if self.fail:
                self.fail = False
                raise ConnectionError("database away")
            await super().add_many(calls)

    acc = Accounting(Failing(store.pool), None, PRICES)
    errors = REGISTRY.get_sample_value("sb_agent_usage_write_errors_total") or 0.0
    await acc.add(run(run_id="run_lost"), "openai:gpt-x", Usage(1, 0))
    await acc.settled("main:api:a")  # done, not raising
    assert REGISTRY.get_sample_value("sb_agent_usage_write_errors_total") == errors + 1
    await acc.add(run(run_id="run_kept"), "openai:gpt-x", Usage(2, 0))
    await acc.settled("main:api:a")
    kept = await store.pool.fetch(
        "SELECT run_id FROM agent.usage WHERE run_id IN ('run_lost', 'run_kept')"
    )
    assert [r["run_id"] for r in kept] == ["run_kept"]
    await acc.close()


async def test_a_batch_cut_short_at_shutdown_does_not_leave_its_waiters_hanging(
    store: SessionStore,
) -> None:
    class Stuck(UsageStore):
        async def add_many(self, calls: Any) -> None:
            await asyncio.Event().wait()  # a write that never finishes, until cancelled

    writer = UsageWriter(Stuck(store.pool))
    row = CallUsage("run_stuck", "main:api:a", "main", "openai:gpt-x", 1, 0, 0.0)
    done = writer.add(row)
    await asyncio.sleep(0)  # the writer task takes the batch
    assert writer._task is not None and not done.done()
    writer._task.cancel()  # as the process's tasks are cancelled at shutdown
    await asyncio.wait_for(asyncio.shield(done), 10)  # resolved, not hanging
