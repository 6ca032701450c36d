"""The ``interrupt`` queue mode at the lane owner (switchboard_agent.runs.lanes), against real NATS
and PostgreSQL: a newer item on the lane aborts the run in progress (its record says
``interrupted``) and the owner goes on with the newest; an item that reached the lane just
before the owner started watching it counts too; a run nobody interrupts completes; and the
owner stops watching the lane once the run is over. The model is a scripted stand-in for the
LLM API (the one third-party part): it holds its answer to "first" until the run is cancelled,
so nothing here races the clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from switchboard.sessions import session_token

from .lane_harness import BOUND_S, Env, enqueue, handle_next, runs, watching
from .lane_harness import env as env  # the fixture


def interrupts() -> float:
    return REGISTRY.get_sample_value("sb_agent_interrupted_runs_total") or 0.0


async def test_a_newer_item_interrupts_the_run_and_the_newest_runs(env: Env) -> None:
    await env.store.set_queue_mode("s:i", "main", "interrupt")
    before = interrupts()
    first = await enqueue(env, "s:i", "first")
    handling = await handle_next(env, "i")
    await asyncio.wait_for(env.model.holding.wait(), BOUND_S)  # the run is in progress
    second = await enqueue(env, "s:i", "second")
    await asyncio.wait_for(handling, BOUND_S)
    assert await runs(env, "s:i") == [(first, "interrupted"), (second, "completed")]
    assert env.model.asked == ["first", "second"]
    assert interrupts() == before + 1
    assert (await env.store.lane_state("s:i")).cursor == second
    assert env.lanes.owned == {}
    assert watching(env, "s:i") == 0  # a subscription left per run would pile up


async def test_an_item_that_came_before_the_owner_watched_the_lane_interrupts_too(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newer item lands after the owner read the lane and before it subscribed to it:
    only reading the lane again after subscribing sees it. The run it interrupts has not
    started (its first database read hangs): that interrupt used to cancel the lane's handler
    itself, leaving the delivery unanswered; the owner now goes on with the newest item."""
    await env.store.set_queue_mode("s:e", "main", "interrupt")
    first = await enqueue(env, "s:e", "first")
    seqs: list[int] = []
    subscribe: Callable[..., Awaitable[Any]] = env.nc.subscribe
    run_start: Callable[..., Awaitable[Any]] = env.store.run_start

    async def late(subject: str, **kwargs: Any) -> Any:
        if subject == env.subjects.lane("main", session_token("s:e")) and not seqs:
            seqs.append(await enqueue(env, "s:e", "second"))  # the first run's watch only
        return await subscribe(subject, **kwargs)

    async def not_started(*args: Any) -> Any:
        if not started:  # the first run: it has not started when the interrupt lands
            started.append(True)
            await asyncio.Event().wait()  # cancelled by the interrupt
        return await run_start(*args)

    started: list[bool] = []
    monkeypatch.setattr(env.nc, "subscribe", late)
    monkeypatch.setattr(env.store, "run_start", not_started)
    before = interrupts()
    await asyncio.wait_for(await handle_next(env, "e"), BOUND_S)
    # One run for both (interrupt mode: all pending, the newest leading), completed.
    assert await runs(env, "s:e") == [(seqs[0], "completed")]
    assert env.model.asked == ["second"] and first < seqs[0]
    assert interrupts() == before + 1
    assert (await env.store.lane_state("s:e")).cursor == seqs[0]
    assert watching(env, "s:e") == 0


async def test_a_run_nobody_interrupts_completes(env: Env) -> None:
    await env.store.set_queue_mode("s:n", "main", "interrupt")
    before = interrupts()
    only = await enqueue(env, "s:n", "hello")
    await enqueue(env, "s:other", "elsewhere")  # newer, but another session's: no interrupt
    await asyncio.wait_for(await handle_next(env, "n"), BOUND_S)
    assert await runs(env, "s:n") == [(only, "completed")]
    assert env.model.asked == ["hello"]
    assert interrupts() == before
    assert watching(env, "s:n") == 0
    replies = [m for m in await env.store.transcript("s:n") if m["role"] == "assistant"]
    assert [m["content"][0]["text"] for m in replies] == ["re: hello"]


async def test_an_abort_ends_the_run_and_the_lane_goes_on(env: Env) -> None:
    """/stop (RunningRuns.abort) on a queue-mode run: the run ends ``interrupted``, the next
    item runs, and the lane's handler is not cancelled with it."""
    first = await enqueue(env, "s:a", "first")
    then = await enqueue(env, "s:a", "then")
    handling = await handle_next(env, "a")
    await asyncio.wait_for(env.model.holding.wait(), BOUND_S)
    assert env.lanes.running.abort("s:a")
    await asyncio.wait_for(handling, BOUND_S)
    assert await runs(env, "s:a") == [(first, "interrupted"), (then, "completed")]
    assert not env.lanes.running.abort("s:a")  # nothing runs there any more


async def test_an_abort_before_the_run_started_ends_it_not_the_lane(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The abort lands while the run has not reached the part that handles it (its first
    database read hangs): the run ends there, and the lane's handler ends normally instead of
    being cancelled with it. Nothing ran and nothing was recorded."""
    await enqueue(env, "s:b", "hello")
    run_start: Callable[..., Awaitable[Any]] = env.store.run_start
    started = asyncio.Event()

    async def not_started(*args: Any) -> Any:
        if not started.is_set():  # the first run: held here until the abort cancels it
            started.set()
            await asyncio.Event().wait()
        return await run_start(*args)

    monkeypatch.setattr(env.store, "run_start", not_started)
    handling = await handle_next(env, "b")
    await asyncio.wait_for(started.wait(), BOUND_S)
    assert env.lanes.running.abort("s:b")
    await asyncio.wait_for(handling, BOUND_S)  # not CancelledError
    assert await runs(env, "s:b") == []
    assert env.model.asked == []
