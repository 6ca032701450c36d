"""What a claimed job's run does (switchboard_scheduler.firing), decided from the job and the
clock alone: a run due past the misfire grace is skipped or run once as the job's policy says, a
proactive job in its agent's quiet hours is held until they end (an urgent one, or a webhook, is
not), a one-shot is disabled once done, and what each run writes on the job and counts in the
metrics. No database or bus: these steps do not reach them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from switchboard.v1 import messages_pb2
from switchboard_scheduler.actions import Outcome
from switchboard_scheduler.config import QuietHours
from switchboard_scheduler.firing import Firing, Plan, finish, record
from switchboard_scheduler.jobs import Job

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUIET = {"night": QuietHours(start="11:00", end="13:00", tz="UTC")}


def firing(quiet: dict[str, QuietHours] | None = None, grace_s: float = 60) -> Firing:
    return Firing(
        None,  # type: ignore[arg-type]  # plan and _execute of a held or skipped run: no store
        None,  # type: ignore[arg-type]  # ... and no action
        quiet or {},
        batch=10,
        concurrency=2,
        grace_s=grace_s,
        poll_s=5,
    )


def job(**fields: object) -> Job:
    base: dict[str, object] = {"name": "j", "kind": "message", "agent": "a", "every_ms": 600_000}
    return Job(**(base | fields))  # type: ignore[arg-type]


def fires(kind: str, outcome: str) -> float:
    labels = {"kind": kind, "outcome": outcome}
    return REGISTRY.get_sample_value("sb_scheduler_fires_total", labels) or 0.0


def test_a_run_within_the_grace_fires_for_its_slot() -> None:
    slot = NOON - timedelta(seconds=60)  # exactly the grace late
    plan = firing().plan(job(next_run=slot), NOON)
    assert plan == Plan(plan.job, slot, True, slot + timedelta(minutes=10))


def test_a_late_run_within_the_grace_is_followed_by_the_slots_that_came_due_meanwhile() -> None:
    # Every 3 s, the run of 11:59:49 taken at 11:59:53 (the bus was away): the 11:59:52 slot
    # is next, due already, not the first slot after now (that skipped it).
    slot = NOON - timedelta(seconds=11)
    now = NOON - timedelta(seconds=7)
    plan = firing().plan(job(next_run=slot, every_ms=3000), now)
    assert (plan.fire, plan.next_run) == (True, slot + timedelta(seconds=3))
    cron = firing().plan(job(next_run=slot, every_ms=0, cron="* * * * *"), NOON)
    assert cron.next_run == NOON  # the minute after the late slot: 12:00, due now
    # Past the grace, run_once runs once and goes on after now.
    once = firing().plan(job(next_run=NOON - timedelta(hours=1), missed="run_once"), NOON)
    assert once.fire and once.next_run == NOON + timedelta(minutes=10)


def test_past_the_grace_skip_moves_on_and_run_once_runs_once() -> None:
    slot = NOON - timedelta(seconds=61)
    skipped = firing().plan(job(next_run=slot, missed="skip"), NOON)
    assert (skipped.fire, skipped.slot) == (False, slot)
    assert skipped.note == "skipped the run due 2026-03-02T11:58:59Z"
    assert skipped.next_run is not None and skipped.next_run > NOON
    once = firing().plan(job(next_run=slot, missed="run_once"), NOON)
    assert (once.fire, once.slot) == (True, slot)


def test_quiet_hours_hold_a_proactive_job_unless_urgent() -> None:
    f = firing(QUIET)
    held = f.plan(job(agent="night", next_run=NOON), NOON)
    end = datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    assert (held.fire, held.slot, held.next_run) == (False, NOON, end)
    assert held.note == "held by quiet hours until 2026-03-02T13:00:00Z"
    assert f.plan(job(agent="night", next_run=NOON, urgent=True), NOON).fire
    assert f.plan(job(agent="night", kind="webhook", next_run=NOON), NOON).fire
    assert f.plan(job(agent="day", next_run=NOON), NOON).fire
    # Quiet hours for one reply channel of an agent hold only the jobs that reply there.
    per_channel = firing({"day:telegram": QuietHours(start="11:00", end="13:00", tz="UTC")})
    telegram = messages_pb2.DeliveryTarget(channel="telegram")
    assert not per_channel.plan(job(agent="day", next_run=NOON, deliver_to=telegram), NOON).fire
    assert per_channel.plan(job(agent="day", next_run=NOON), NOON).fire


async def test_a_held_or_skipped_run_is_noted_counted_and_moves_on() -> None:
    f = firing(QUIET)
    target = messages_pb2.DeliveryTarget(channel="telegram")
    held = f.plan(job(agent="night", next_run=NOON, deliver_to=target), NOON)
    before = fires("message", "held")
    done = await f._execute(held)
    assert (done.last_result, done.next_run, done.enabled) == (held.note, held.next_run, True)
    assert done.runs == 0
    assert fires("message", "held") == before + 1
    one_shot = job(every_ms=0, at=NOON - timedelta(hours=1), next_run=NOON - timedelta(hours=1))
    skipped = f.plan(one_shot, NOON)
    assert (skipped.fire, skipped.next_run) == (False, None)
    before = fires("message", "skipped")
    done = await f._execute(skipped)
    assert (done.enabled, done.next_run) == (False, None)  # a one-shot that was skipped is done
    assert fires("message", "skipped") == before + 1


def test_record_writes_the_outcome_or_the_error() -> None:
    j = job(content_sha256="old", runs=2)
    record(j, Outcome("HTTP 200", content_sha256="new"), "")
    assert (j.runs, j.last_result, j.last_error, j.content_sha256) == (3, "HTTP 200", "", "new")
    assert j.last_run is not None and abs(j.last_run - datetime.now(UTC)) < timedelta(minutes=5)
    record(j, Outcome("unchanged"), "")
    assert (j.last_result, j.content_sha256) == ("unchanged", "new")  # no digest: kept
    record(j, None, "the URL answered 500")
    assert (j.runs, j.last_result, j.last_error) == (5, "error", "the URL answered 500")


async def test_finish_lets_the_loop_end_its_batch_then_cancels() -> None:
    ended = asyncio.Event()

    async def loop() -> None:
        await asyncio.sleep(0)
        ended.set()

    task = asyncio.create_task(loop())
    await finish(task, timeout_s=30)
    assert ended.is_set() and task.done() and not task.cancelled()

    async def wait_forever() -> None:
        await asyncio.Event().wait()

    stuck = asyncio.create_task(wait_forever())
    await finish(stuck, timeout_s=0.01)
    assert stuck.cancelled()


@pytest.mark.parametrize("missed", ["skip", "run_once"])
def test_a_one_shot_due_now_fires_and_is_then_done(missed: str) -> None:
    plan = firing().plan(job(every_ms=0, at=NOON, next_run=NOON, missed=missed), NOON)
    assert (plan.fire, plan.next_run) == (True, None)
