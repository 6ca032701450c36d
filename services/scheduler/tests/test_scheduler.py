"""The scheduler through its gRPC API, in-process, against real nats-server and PostgreSQL:
jobs checked at Add, fired as INBOUND events, the missed-run policies."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
import grpc
import pytest

from switchboard.v1 import messages_pb2, scheduler_pb2
from tests.support.scheduler import (
    RunningScheduler,
    fired,
    message_job,
    scheduler_service,
    wait_until,
)

HOUR_MS = 3_600_000


@pytest.fixture
async def sched(
    nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[RunningScheduler]:
    async with scheduler_service(nats_url, database_url, tmp_path) as s:
        yield s


async def refused(call: object, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    return caught.value.details() or ""


async def test_a_bad_cron_expression_is_invalid_argument_at_add(sched: RunningScheduler) -> None:
    stub = sched.stub
    text = await refused(
        stub.Add(message_job("nightly", cron="61 * * * *")), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert "invalid cron expression '61 * * * *'" in text and "minute" in text.lower()
    text = await refused(
        stub.Add(message_job("x", cron="0 9 * *")), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert "five fields" in text
    text = await refused(
        stub.Add(message_job("x", cron="0 9 * * *", timezone="Mars/Olympus")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "unknown time zone 'Mars/Olympus'" in text
    text = await refused(
        stub.Add(message_job("x", cron="0 9 * * *", every_ms=60_000)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "exactly one schedule" in text
    text = await refused(stub.Add(message_job("x", every_ms=10)), grpc.StatusCode.INVALID_ARGUMENT)
    assert "interval too short" in text
    text = await refused(
        stub.Add(message_job("../x", every_ms=60_000)), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert "invalid job name" in text
    # Nothing was stored by the refused calls.
    assert not (await stub.List(scheduler_pb2.ListJobsRequest())).jobs


async def test_add_list_update_status_remove(sched: RunningScheduler) -> None:
    stub = sched.stub
    added = await stub.Add(message_job("digest", cron="@daily", timezone="Europe/Berlin"))
    assert added.enabled and added.agent == "main" and added.missed == "skip"
    due = datetime.fromtimestamp(added.next_run_ms / 1000, UTC)
    assert due.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") == "00:00"
    await refused(stub.Add(message_job("digest", every_ms=HOUR_MS)), grpc.StatusCode.ALREADY_EXISTS)
    changed = await stub.Update(
        scheduler_pb2.UpdateJobRequest(
            name="digest", job=scheduler_pb2.Job(every_ms=HOUR_MS), fields=["every_ms"]
        )
    )
    assert (changed.cron, changed.every_ms) == ("", HOUR_MS)
    off = await stub.Update(
        scheduler_pb2.UpdateJobRequest(name="digest", job=scheduler_pb2.Job(), fields=["enabled"])
    )
    assert not off.enabled and off.next_run_ms == 0
    text = await refused(
        stub.Update(scheduler_pb2.UpdateJobRequest(name="digest", fields=["kind"])),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "cannot update kind" in text
    assert (await stub.Status(scheduler_pb2.JobName(name="digest"))).every_ms == HOUR_MS
    assert [j.name for j in (await stub.List(scheduler_pb2.ListJobsRequest())).jobs] == ["digest"]
    await stub.Remove(scheduler_pb2.JobName(name="digest"))
    await refused(stub.Status(scheduler_pb2.JobName(name="digest")), grpc.StatusCode.NOT_FOUND)
    await refused(stub.RunNow(scheduler_pb2.JobName(name="digest")), grpc.StatusCode.NOT_FOUND)


async def test_a_due_job_is_published_on_inbound_once(
    sched: RunningScheduler, nats_url: str
) -> None:
    target = messages_pb2.DeliveryTarget(
        channel="telegram", chat=messages_pb2.ChatRef(id="4242", type="direct")
    )
    at = int(time.time() * 1000) + 500
    await sched.stub.Add(message_job("soon", at_ms=at, message="stand up", deliver_to=target))
    [event] = await wait_until(lambda: fired(nats_url), what="the job's event")
    assert event.msg_id == f"cron:soon:{at}"
    m = event.message
    assert (m.channel, m.session_key, m.agent) == ("cron", "cron:soon", "main")
    assert m.text.endswith("\nstand up") and "Scheduled job 'soon'" in m.text
    assert m.deliver_to.channel == "telegram" and m.deliver_to.chat.id == "4242"
    assert m.reply_context["sb_kind"] == "message" and m.reply_context["sb_job"] == "soon"

    async def done() -> scheduler_pb2.Job | None:
        job = await sched.stub.Status(scheduler_pb2.JobName(name="soon"))
        return job if job.runs else None

    job = await wait_until(done)
    assert (job.runs, job.enabled, job.next_run_ms, job.last_result) == (1, False, 0, "published")
    # Run now: a new slot (a new message id), the schedule untouched.
    ran = await sched.stub.RunNow(scheduler_pb2.JobName(name="soon"))
    assert ran.result == "published" and ran.job.runs == 2
    assert len(await fired(nats_url)) == 2


@pytest.mark.parametrize("policy", ["skip", "run_once"])
async def test_missed_runs_after_downtime_follow_the_policy(
    sched: RunningScheduler, nats_url: str, database_url: str, policy: str
) -> None:
    await sched.stub.Add(message_job("hourly", every_ms=HOUR_MS, missed=policy))
    # As if the scheduler had been down for three hours and a half: the run due then was missed.
    missed = datetime.now(UTC) - timedelta(hours=3, minutes=30)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("UPDATE scheduler.jobs SET next_run = $1 WHERE name = 'hourly'", missed)
    finally:
        await conn.close()

    async def handled() -> scheduler_pb2.Job | None:
        job = await sched.stub.Status(scheduler_pb2.JobName(name="hourly"))
        return job if job.last_result else None

    job = await wait_until(handled)
    now_ms = time.time() * 1000
    # Either way the next run is the next slot of the interval after now, on the old anchor.
    assert now_ms < job.next_run_ms <= now_ms + HOUR_MS
    assert (job.next_run_ms - int(missed.timestamp() * 1000)) % HOUR_MS == 0
    events = await fired(nats_url)
    if policy == "skip":
        assert events == [] and job.runs == 0
        assert job.last_result.startswith("skipped the run due ")
    else:
        [event] = events
        assert event.msg_id == f"cron:hourly:{int(missed.timestamp() * 1000)}"
        assert job.runs == 1 and job.last_result == "published"
