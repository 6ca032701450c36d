"""The lane owner and the cursor (switchboard_agent.runs.lanes), against real NATS and PostgreSQL:
an owner whose cursor another writer moved stops (and says so) instead of running an item
twice, whether the cursor moved between two runs or during one; a session's settings are read
again before each run; a delivery of an item another owner already ran is acknowledged and its
reply published again, whether this replica takes the lane or another holds it. The runner's
``after_commit`` hook (what the agent's outbound side uses) shows what was committed and
republished."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import REGISTRY

from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2

from .lane_harness import BOUND_S, Env, all_acked, enqueue, fetch, handle, handle_next, runs
from .lane_harness import env as env  # the fixture

MOVED = "lane cursor moved under this owner"


def active_lanes() -> float:
    return REGISTRY.get_sample_value("sb_agent_active_lanes") or 0.0


def moved(caplog: pytest.LogCaptureFixture) -> list[tuple[int, object]]:
    return [
        (r.levelno, r.__dict__.get("session"))
        for r in caplog.records
        if r.name == "switchboard_agent.runs.lanes" and r.getMessage() == MOVED
    ]


async def test_a_cursor_moved_between_two_runs_stops_the_owner(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="switchboard_agent.runs.lanes")
    a = await enqueue(env, "s:m", "a")
    b = await enqueue(env, "s:m", "b")

    async def another_owner_ran_b(item: messages_pb2.LaneItem, text: str | None, _: str) -> None:
        if item.message.text == "a":  # a is committed; meanwhile another owner ran b
            await env.store.advance_cursor("s:m", "main", b, a)

    env.runner.after_commit = another_owner_ran_b
    lanes_before = active_lanes()
    await asyncio.wait_for(await handle_next(env, "m"), BOUND_S)
    assert await runs(env, "s:m") == [(a, "completed")]  # b not run a second time here
    assert env.model.asked == ["a"]
    assert moved(caplog) == [(logging.WARNING, "s:m")]
    assert active_lanes() == lanes_before  # owned while it ran, not after


async def test_a_cursor_moved_during_a_run_leaves_the_run_uncommitted(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="switchboard_agent.runs.lanes")
    first = await enqueue(env, "s:d", "first")
    handling = await handle_next(env, "d")
    await asyncio.wait_for(env.model.holding.wait(), BOUND_S)
    await env.store.advance_cursor("s:d", "main", first, 0)  # another owner ran it meanwhile
    env.model.release.set()
    await asyncio.wait_for(handling, BOUND_S)
    assert await runs(env, "s:d") == []  # its commit was refused
    assert moved(caplog) == [(logging.WARNING, "s:d")]
    assert (await env.store.lane_state("s:d")).cursor == first


async def test_settings_are_read_again_before_each_run(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="switchboard_agent.runs.lanes")
    first = await enqueue(env, "s:s", "first")
    later = [await enqueue(env, "s:s", f"later{i}") for i in range(2)]
    handling = await handle_next(env, "s")
    await asyncio.wait_for(env.model.holding.wait(), BOUND_S)
    await env.store.set_queue_mode("s:s", "main", "collect")  # /queue collect, meanwhile
    env.model.release.set()
    await asyncio.wait_for(handling, BOUND_S)
    # The first run in queue mode; the two later items in one collect run.
    assert await runs(env, "s:s") == [(first, "completed"), (later[1], "completed")]
    assert moved(caplog) == []  # the owner went on: nobody else moved the cursor


async def test_a_delivery_another_owner_ran_is_acked_and_its_reply_published_again(
    env: Env,
) -> None:
    done = await enqueue(env, "s:r", "done")
    await env.store.advance_cursor("s:r", "main", done, 0)  # its run committed elsewhere
    seen: list[tuple[str, str | None]] = []

    async def after_commit(item: messages_pb2.LaneItem, text: str | None, _: str) -> None:
        seen.append((item.message.text, text))

    env.runner.after_commit = after_commit
    await handle(env, await fetch(env, "r"))
    assert seen == [("done", None)]  # republished (None: the stored reply), not run
    assert env.model.asked == [] and await runs(env, "s:r") == []
    assert await all_acked(env, "r")


async def test_a_covered_delivery_is_acked_even_while_another_replica_holds_the_lane(
    env: Env,
) -> None:
    done = await enqueue(env, "s:h", "done")
    await env.store.advance_cursor("s:h", "main", done, 0)
    await env.lanes.leases.kv.create(session_token("s:h"), b"another-replica")
    await handle(env, await fetch(env, "h"))
    assert await all_acked(env, "h")  # acked, not NAKed for a redelivery
    assert env.model.asked == []
