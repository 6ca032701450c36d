"""Scheduler replicas as real processes sharing one database: many jobs due at one instant fire
exactly once across three replicas that all take part, and a replica stuck in the middle of
its claim holds back no job but its own (the claim skips locked rows, never waits for them).

"Exactly once" is counted from three sides: each replica's metrics (claims, and runs by
outcome: a repeat that the stream's dedupe absorbed is a ``duplicate``), every run committed to
PostgreSQL (an audit trigger naming the replica) and every publish attempt crossing the NATS
server (a plain subscription on ``sb.inbound.cron``, which sees repeats the stream drops)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from switchboard import bus
from switchboard.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support.scheduler import (
    AuditedRun,
    ReplicaCounts,
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
REPLICAS = ["scheduler-0", "scheduler-1", "scheduler-2"]
JOBS = 300


@pytest.fixture
def replicas(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ReplicaProcesses]:
    procs = ReplicaProcesses(
        tmp_path,
        nats_url,
        database_url,
        # Small batches: one instant's jobs take many claims, which every replica competes for.
        {"SB_SCHEDULER_BATCH": "10", "SB_SCHEDULER_FETCH_ALLOW_CIDRS": '["127.0.0.0/8"]'},
    )
    try:
        yield procs
    finally:
        procs.stop()


async def start(replicas: ReplicaProcesses, names: list[str]) -> None:
    for name in names:
        replicas.spawn(name)
    for name in names:
        await replicas.wait_serving(name)


async def jobs_left(database_url: str) -> int:
    """Jobs not yet committed as run (each test's jobs are one-shots)."""
    conn = await asyncpg.connect(database_url)
    try:
        left: int = await conn.fetchval("SELECT count(*) FROM scheduler.jobs WHERE runs = 0")
    finally:
        await conn.close()
    return left


def report(counts: dict[str, ReplicaCounts], runs: list[AuditedRun], wire: list[str]) -> str:
    """Per replica: claimed, runs by outcome, runs committed; then the publishes on the wire."""
    written = Counter(r.replica for r in runs)
    lines = [
        f"{name}: claimed {c.claimed}, fired {dict(sorted(c.outcomes.items()))}, "
        f"runs committed {written[name]}"
        for name, c in counts.items()
    ]
    repeats = sum(n - 1 for n in Counter(wire).values())
    lines.append(f"wire: {len(wire)} publishes, {len(set(wire))} distinct ids, {repeats} repeats")
    return "\n".join(lines)


def overlapping_claims(runs: list[AuditedRun]) -> int:
    """Pairs of claim transactions of different replicas that were open at the same time."""
    spans: dict[tuple[str, int], tuple[datetime, datetime]] = {}
    for r in runs:
        start, end = spans.get((r.replica, r.xid), (r.xact_start, r.written))
        spans[(r.replica, r.xid)] = (start, max(end, r.written))
    return sum(
        1
        for (a, (a0, a1)), (b, (b0, b1)) in itertools.combinations(spans.items(), 2)
        if a[0] != b[0] and a0 < b1 and b0 < a1
    )


async def test_three_replicas_fire_each_of_300_jobs_due_at_one_instant_exactly_once(
    replicas: ReplicaProcesses, nats_url: str, database_url: str
) -> None:
    await ensure_streams(nats_url)
    await start(replicas, REPLICAS)
    await install_run_audit(database_url)
    async with wire_tap(nats_url, CRON) as tap, replicas.channel("scheduler-0") as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        due = (int(time.time()) + 5) * 1000  # one instant, a few seconds ahead, for all
        await asyncio.gather(
            *(stub.Add(message_job(f"job-{n:03d}", at_ms=due)) for n in range(JOBS))
        )

        async def all_run() -> bool:
            return await jobs_left(database_url) == 0

        await wait_until(all_run, timeout=120, what=f"{JOBS} jobs run")
        # Any claim still open (a replica that read a row before it was committed as run) ends
        # and shows its publishes before anything is counted.
        await settled(database_url, REPLICAS)
        await tap.settle()
        jobs = (await stub.List(scheduler_pb2.ListJobsRequest())).jobs

    counts = {name: replicas.counts(name) for name in REPLICAS}
    runs = await audited_runs(database_url)
    stored = await fired(nats_url)
    summary = report(counts, runs, tap.ids)
    overlaps = overlapping_claims(runs)
    print(f"\n{summary}\nstream: {len(stored)} events; overlapping claims: {overlaps}")
    expected = {f"cron:job-{n:03d}:{due}" for n in range(JOBS)}

    # No slot published twice, even where the stream's dedupe hid the repeat.
    assert {name: c.outcomes.get("duplicate", 0) for name, c in counts.items()} == dict.fromkeys(
        REPLICAS, 0
    ), summary
    assert Counter(tap.ids) == Counter(expected), summary
    # Every claim fired once and published; claims add up to the jobs.
    for name, c in counts.items():
        assert c.claimed == c.fired == c.outcomes.get("published", 0), f"{name}\n{summary}"
    assert sum(c.claimed for c in counts.values()) == JOBS, summary
    # PostgreSQL: one committed run per job, for its slot, by the replica that counted it.
    slot = datetime.fromtimestamp(due / 1000, UTC)
    assert Counter(r.job for r in runs) == Counter(f"job-{n:03d}" for n in range(JOBS)), summary
    assert {(r.slot, r.result) for r in runs} == {(slot, "published")}, summary
    assert Counter(r.replica for r in runs) == Counter(
        {name: c.claimed for name, c in counts.items()}
    ), summary
    assert {(j.runs, j.enabled, j.last_result) for j in jobs} == {(1, False, "published")}
    # The stream holds each event once.
    assert sorted(e.msg_id for e in stored) == sorted(expected)
    # Real contention: every replica fired some of the instant's jobs, and claims of different
    # replicas were open at the same time.
    assert all(c.claimed > 0 for c in counts.values()), summary
    assert overlaps > 0, summary


async def test_a_replica_stuck_mid_claim_holds_back_only_its_own_jobs(
    replicas: ReplicaProcesses, nats_url: str, database_url: str
) -> None:
    """Replica A claims a batch (a webhook that does not answer, and 9 messages) and stays in
    that claim; replica B must still fire the jobs due after it, skipping A's locked rows
    (which sort first) rather than waiting for them. Once the webhook answers, A's batch is
    committed: every job ran once, each by one replica."""
    await ensure_streams(nats_url)
    replicas.env["SB_SCHEDULER_BATCH"] = "100"
    replicas.env["SB_SCHEDULER_FETCH_TIMEOUT_S"] = "300"  # A stays in its claim until released
    await start(replicas, ["scheduler-a"])
    await install_run_audit(database_url)
    with held_hook() as hook:
        async with wire_tap(nats_url, CRON) as tap:
            due = int(time.time() * 1000) + 2000
            async with replicas.channel("scheduler-a") as ch:
                stub = scheduler_pb2_grpc.SchedulerStub(ch)
                await asyncio.gather(
                    stub.Add(
                        scheduler_pb2.Job(name="a-hook", kind="webhook", url=hook.url, at_ms=due)
                    ),
                    *(stub.Add(message_job(f"a-{n}", at_ms=due)) for n in range(9)),
                )
            assert await asyncio.to_thread(hook.arrived.wait, 60), replicas.log("scheduler-a")
            assert replicas.counts("scheduler-a").claimed == 10  # A holds all of its batch

            await start(replicas, ["scheduler-b"])
            later = int(time.time() * 1000) + 500
            async with replicas.channel("scheduler-b") as ch:
                stub = scheduler_pb2_grpc.SchedulerStub(ch)
                await asyncio.gather(
                    *(stub.Add(message_job(f"b-{n:02d}", at_ms=later)) for n in range(20))
                )

            async def bs_fired() -> bool:
                ids = {e.msg_id for e in await fired(nats_url)}
                return all(f"cron:b-{n:02d}:{later}" in ids for n in range(20))

            try:
                await wait_until(bs_fired, timeout=60, what="B to fire the jobs past A's rows")
            except AssertionError as exc:
                b, left = replicas.counts("scheduler-b"), await jobs_left(database_url)
                raise AssertionError(f"{exc}: B {b}, {left} jobs not run") from None
            assert await jobs_left(database_url) == 10  # A's batch: claimed, not yet run
            assert replicas.counts("scheduler-b").claimed == 20

            hook.release.set()

            async def all_run() -> bool:
                return await jobs_left(database_url) == 0

            await wait_until(all_run, timeout=60, what="A to finish its batch")
            await settled(database_url, ["scheduler-a", "scheduler-b"])
            await tap.settle()

    counts = {name: replicas.counts(name) for name in ("scheduler-a", "scheduler-b")}
    runs = await audited_runs(database_url)
    summary = report(counts, runs, tap.ids)
    print(f"\n{summary}")
    assert counts["scheduler-a"].outcomes == {"published": 9, "HTTP_200": 1}, summary
    assert counts["scheduler-b"].outcomes == {"published": 20}, summary
    assert Counter(r.replica for r in runs) == {"scheduler-a": 10, "scheduler-b": 20}, summary
    assert sorted(r.job for r in runs) == sorted(
        ["a-hook", *(f"a-{n}" for n in range(9)), *(f"b-{n:02d}" for n in range(20))]
    ), summary
    assert Counter(tap.ids) == Counter(
        [*(f"cron:a-{n}:{due}" for n in range(9)), *(f"cron:b-{n:02d}:{later}" for n in range(20))]
    ), summary
    assert len(hook.bodies) == 1
