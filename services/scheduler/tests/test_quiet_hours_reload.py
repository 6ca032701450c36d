"""Quiet hours change without a restart (issue 27, part 5): a changed SB_QUIET_HOURS, handed
to the scheduler's hook the way a changed configuration file is (switchboard.reloads), holds the
next proactive job due in the new window; a value the settings refuse leaves the running one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from switchboard import reloads
from switchboard_scheduler.config import SchedulerSettings
from switchboard_scheduler.firing import Firing
from switchboard_scheduler.jobs import Job
from switchboard_scheduler.server import reloader

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
NIGHT = {"night": {"start": "11:00", "end": "13:00", "tz": "UTC"}}


def firing() -> Firing:
    return Firing(
        None,  # type: ignore[arg-type]  # plan() reaches neither the store
        None,  # type: ignore[arg-type]  # ... nor the actions
        {},
        batch=10,
        concurrency=2,
        grace_s=60,
        poll_s=5,
    )


def fires(f: Firing) -> bool:
    job = Job(name="j", kind="message", agent="night", every_ms=600_000, next_run=NOON)
    return f.plan(job, NOON).fire


async def test_changed_quiet_hours_hold_the_next_job_and_a_bad_value_changes_nothing() -> None:
    f = firing()
    assert fires(f)
    token = reloads.ENVIRON.set({})  # as the host sets it for the service it starts
    try:
        unregister = reloads.register("scheduler", SchedulerSettings, reloader(f))
    finally:
        reloads.ENVIRON.reset(token)
    assert unregister is not None
    try:
        await reloads.apply({"SB_QUIET_HOURS": json.dumps(NIGHT)})
        assert not fires(f), "the job is due inside the new quiet hours"
        await reloads.apply({"SB_QUIET_HOURS": json.dumps({"night": {"start": "25:00"}})})
        assert not fires(f), "a refused value replaced the running quiet hours"
        await reloads.apply({"SB_QUIET_HOURS": None})
        assert fires(f), "quiet hours no longer set still hold the job"
    finally:
        unregister()
