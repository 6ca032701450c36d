"""How the lane owner answers dispatch deliveries (switchboard_agent.runs.lanes), against real NATS
and PostgreSQL: a delivery of a lane another replica holds is NAKed with its delay (it does not come
straight back), a redelivery is counted, and when NATS is away for the delivery's connection a
failed NAK or in-progress ack is logged and retried by NATS's own ack wait instead of failing
the lane (a delivery whose connection is closed stands for NATS away)."""

from __future__ import annotations

import asyncio
import logging

import nats
import pytest
from nats.aio.msg import Msg
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard.sessions import session_token

from .lane_harness import BOUND_S, Env, enqueue, fetch, handle
from .lane_harness import env as env  # the fixture

LOGGER = "switchboard_agent.runs.lanes"


def redeliveries() -> float:
    return REGISTRY.get_sample_value("sb_lane_redeliveries_total") or 0.0


async def held_elsewhere(env: Env, key: str) -> None:
    await env.lanes.leases.kv.create(session_token(key), b"another-replica")


async def fetched_then_away(env: Env, nats_url: str, durable: str) -> Msg:
    """A delivery fetched on a connection that then closes: acking it fails."""
    nc = await nats.connect(nats_url)
    sub = await bus.durable_pull(
        nc.jetstream(), env.subjects.stream("LANES"), durable, env.subjects.lanes()
    )
    [msg] = await sub.fetch(1, timeout=5)
    await nc.close()
    return msg


def said(caplog: pytest.LogCaptureFixture, prefix: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.getMessage().startswith(prefix)]


async def test_a_nak_waits_its_delay_before_the_delivery_comes_back(env: Env) -> None:
    await enqueue(env, "s:n", "x")
    await held_elsewhere(env, "s:n")
    env.lanes.nak_delay_s = 30.0  # far longer than the wait below
    await handle(env, await fetch(env, "n"))
    sub = await bus.durable_pull(env.js, env.subjects.stream("LANES"), "n", env.subjects.lanes())
    with pytest.raises(nats.errors.TimeoutError):  # NAKed with a delay: not back at once
        await sub.fetch(1, timeout=1.0)


async def test_a_redelivery_is_counted_and_a_first_delivery_is_not(env: Env) -> None:
    await enqueue(env, "s:c", "x")
    await held_elsewhere(env, "s:c")
    env.lanes.nak_delay_s = 0.01
    before = redeliveries()
    first = await fetch(env, "c")
    await handle(env, first)
    assert redeliveries() == before
    again = await fetch(env, "c")
    assert again.metadata.num_delivered == 2
    await handle(env, again)
    assert redeliveries() == before + 1


async def test_a_nak_that_fails_is_logged_and_the_handler_ends_normally(
    env: Env, nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    await enqueue(env, "s:f", "x")
    await held_elsewhere(env, "s:f")
    await handle(env, await fetched_then_away(env, nats_url, "f"))  # does not raise
    [record] = said(caplog, "lane NAK failed")
    assert (record.levelno, record.getMessage()) == (
        logging.WARNING,
        "lane NAK failed (ConnectionClosedError)",
    )


async def test_in_progress_acks_that_fail_are_logged_and_do_not_stop_the_run(
    env: Env, nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    await enqueue(env, "s:k", "first")
    env.lanes.keepalive_s = 0.05
    msg = await fetched_then_away(env, nats_url, "k")
    handling = asyncio.create_task(handle(env, msg))
    await asyncio.wait_for(env.model.holding.wait(), BOUND_S)
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while len(said(caplog, "lane in-progress ack failed")) < 2:  # tried again at each tick
        assert asyncio.get_running_loop().time() < deadline, "no in-progress ack was tried"
        await asyncio.sleep(0.02)
    env.model.release.set()
    with pytest.raises(nats.errors.ConnectionClosedError):  # the final ack: the worker NAKs
        await asyncio.wait_for(handling, BOUND_S)
    assert env.model.asked == ["first"]  # the run went on meanwhile
    records = said(caplog, "lane in-progress ack failed")
    assert {(r.levelno, r.getMessage()) for r in records} == {
        (logging.WARNING, "lane in-progress ack failed (ConnectionClosedError)")
    }
