"""A scheduler replica SIGKILLed in the middle of a claim loses none of the jobs it held: its
transaction never commits, so another replica runs the whole batch again for the same slots.
Counted from the replicas' metrics, the runs committed to PostgreSQL (audit trigger) and the
publishes on the wire (which show the repeat that the stream's dedupe absorbs)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from switchboard import bus
from switchboard.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support.scheduler import (
    ReplicaProcesses,
    audited_runs,
    ensure_streams,
    fired,
    held_hook,
    install_run_audit,
    message_job,
    settled,
    wait_until,
    wire_tap,
)

CRON = bus.Subjects().inbound("cron")
MESSAGES = 50


@pytest.fixture
def replicas(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ReplicaProcesses]:
    procs = ReplicaProcesses(
        tmp_path,
        nats_url,
        database_url,
        {"SB_SCHEDULER_BATCH": "100", "SB_SCHEDULER_FETCH_ALLOW_CIDRS": '["127.0.0.0/8"]'},
    )
    try:
        yield procs
    finally:
        procs.stop()


async def test_a_replica_killed_mid_claim_loses_no_job(
    replicas: ReplicaProcesses, nats_url: str, database_url: str
) -> None:
    """Replica A claims a batch (50 message jobs and a webhook that does not answer), publishes
    the messages and is SIGKILLed before its commit; replica B then runs the whole batch again
    for the same due times: every message is published twice (A's and B's attempt) and reaches
    INBOUND once (B's is a ``duplicate`` by its Nats-Msg-Id), the webhook is called again with
    the same slot, and the only runs committed are B's, one per job."""
    await ensure_streams(nats_url)
    replicas.spawn("scheduler-a")
    await replicas.wait_serving("scheduler-a")
    await install_run_audit(database_url)
    with held_hook() as hook:
        async with wire_tap(nats_url, CRON) as tap:
            due = int(time.time() * 1000) + 2000
            async with replicas.channel("scheduler-a") as ch:
                stub = scheduler_pb2_grpc.SchedulerStub(ch)
                await asyncio.gather(
                    *(stub.Add(message_job(f"m-{n:02d}", at_ms=due)) for n in range(MESSAGES)),
                    stub.Add(
                        scheduler_pb2.Job(name="hook", kind="webhook", url=hook.url, at_ms=due)
                    ),
                )
            assert await asyncio.to_thread(hook.arrived.wait, 60), replicas.log("scheduler-a")

            async def a_published() -> bool:
                return replicas.counts("scheduler-a").outcomes.get("published", 0) >= MESSAGES

            await wait_until(a_published, timeout=60, what="A's publishes")
            before_kill = replicas.counts("scheduler-a")
            replicas.kill("scheduler-a")  # mid-claim: its transaction never commits

            hook.release.set()
            replicas.spawn("scheduler-b")
            await replicas.wait_serving("scheduler-b")
            async with replicas.channel("scheduler-b") as ch:
                stub = scheduler_pb2_grpc.SchedulerStub(ch)

                async def all_run() -> list[scheduler_pb2.Job] | None:
                    jobs = (await stub.List(scheduler_pb2.ListJobsRequest())).jobs
                    return list(jobs) if all(j.runs for j in jobs) else None

                try:
                    jobs = await wait_until(all_run, timeout=60, what="B to run the batch")
                except AssertionError as exc:
                    listed = (await stub.List(scheduler_pb2.ListJobsRequest())).jobs
                    lost = Counter(
                        ("enabled" if j.enabled else "disabled") for j in listed if not j.runs
                    )
                    b = replicas.counts("scheduler-b")
                    raise AssertionError(f"{exc}: B {b}, jobs never run: {dict(lost)}") from None
            await settled(database_url, ["scheduler-b"])
            await tap.settle()

    after = replicas.counts("scheduler-b")
    runs = await audited_runs(database_url)
    repeats = Counter(Counter(tap.ids).values())
    summary = (
        f"scheduler-a before its kill: claimed {before_kill.claimed}, "
        f"fired {before_kill.outcomes}\nscheduler-b: claimed {after.claimed}, "
        f"fired {after.outcomes}, runs committed {Counter(r.replica for r in runs)}\n"
        f"wire: {len(tap.ids)} publishes, ids seen n times: {dict(repeats)}"
    )
    print(f"\n{summary}")
    # A held the whole batch when it died, and had published every message.
    assert (before_kill.claimed, before_kill.outcomes) == (MESSAGES + 1, {"published": MESSAGES})
    # B ran all of it again: nothing lost; the stream's dedupe absorbed the repeats.
    assert after.claimed == MESSAGES + 1, summary
    assert after.outcomes == {"duplicate": MESSAGES, "HTTP_200": 1}, summary
    ids = [f"cron:m-{n:02d}:{due}" for n in range(MESSAGES)]
    assert Counter(tap.ids) == Counter(ids * 2), summary
    assert sorted(e.msg_id for e in await fired(nats_url)) == ids
    assert len(hook.bodies) == 2 and hook.bodies[0] == hook.bodies[1]
    # Committed: one run per job, B's, for its slot; nothing of A's.
    slot = datetime.fromtimestamp(due / 1000, UTC)
    assert sorted(r.job for r in runs) == sorted(["hook", *(f"m-{n:02d}" for n in range(50))])
    assert {(r.replica, r.slot) for r in runs} == {("scheduler-b", slot)}, summary
    assert {(j.runs, j.enabled) for j in jobs} == {(1, False)}
    assert {j.last_result for j in jobs if j.kind == "message"} == {"duplicate"}
