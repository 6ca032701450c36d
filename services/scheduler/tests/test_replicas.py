"""Scheduler replicas as real processes sharing one database: 200 jobs due in the same second
fire exactly once across two replicas, and a replica SIGKILLed in the middle of a claim loses
none of the jobs it held."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from switchboard.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support.scheduler import ReplicaProcesses, ensure_streams, fired, message_job, wait_until

JOBS = 200


@pytest.fixture
def replicas(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ReplicaProcesses]:
    procs = ReplicaProcesses(
        tmp_path,
        nats_url,
        database_url,
        # Small batches, so that both replicas take part in one second's jobs.
        {"SB_SCHEDULER_BATCH": "20", "SB_SCHEDULER_FETCH_ALLOW_CIDRS": '["127.0.0.0/8"]'},
    )
    try:
        yield procs
    finally:
        procs.stop()


async def test_two_replicas_fire_200_jobs_due_in_the_same_second_exactly_once(
    replicas: ReplicaProcesses, nats_url: str
) -> None:
    await ensure_streams(nats_url)
    for name in ("scheduler-0", "scheduler-1"):
        replicas.spawn(name)
    for name in ("scheduler-0", "scheduler-1"):
        await replicas.wait_serving(name)
    due = (int(time.time()) + 4) * 1000  # one second, a few seconds ahead
    async with replicas.channel("scheduler-0") as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        await asyncio.gather(
            *(stub.Add(message_job(f"job-{n:03d}", at_ms=due + n)) for n in range(JOBS))
        )

        async def all_fired() -> bool:
            return len(await fired(nats_url)) >= JOBS

        await wait_until(all_fired, timeout=60, what="200 events")
        await asyncio.sleep(1.0)  # a late double fire would show up now
        events = await fired(nats_url)
        assert len(events) == JOBS
        assert sorted(e.msg_id for e in events) == [
            f"cron:job-{n:03d}:{due + n}" for n in range(JOBS)
        ]
        jobs = (await stub.List(scheduler_pb2.ListJobsRequest())).jobs
        assert {(j.runs, j.enabled, j.last_result) for j in jobs} == {(1, False, "published")}
    # Not one publish was dropped as a duplicate: each job was claimed by one replica only.
    counts = [replicas.fires(name) for name in ("scheduler-0", "scheduler-1")]
    assert sum(counts) == JOBS, counts


class _Hook(BaseHTTPRequestHandler):
    """Holds every POST until ``release`` is set; records the bodies."""

    bodies: list[bytes]
    arrived: threading.Event
    release: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        type(self).bodies.append(body)
        type(self).arrived.set()
        type(self).release.wait(60)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_a_replica_killed_mid_claim_loses_no_job(
    replicas: ReplicaProcesses, nats_url: str
) -> None:
    """Replica A claims a batch (50 message jobs and a webhook that does not answer), publishes
    the messages and is SIGKILLed before its commit; replica B then runs the whole batch again
    for the same due times: every message reaches INBOUND exactly once (the re-fire is dropped
    by its Nats-Msg-Id), the webhook is called again with the same slot, and every job is
    recorded as run once."""
    handler = _Hook
    handler.bodies, handler.arrived, handler.release = [], threading.Event(), threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        await ensure_streams(nats_url)
        replicas.env["SB_SCHEDULER_BATCH"] = "100"
        replicas.spawn("scheduler-a")
        await replicas.wait_serving("scheduler-a")
        due = int(time.time() * 1000) + 2000
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        async with replicas.channel("scheduler-a") as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)
            await asyncio.gather(
                *(stub.Add(message_job(f"m-{n:02d}", at_ms=due)) for n in range(50)),
                stub.Add(scheduler_pb2.Job(name="hook", kind="webhook", url=url, at_ms=due)),
            )
        assert await asyncio.to_thread(handler.arrived.wait, 30), replicas.log("scheduler-a")
        await wait_until(lambda: _at_least(nats_url, 50), what="A's publishes")
        replicas.kill("scheduler-a")  # mid-claim: its transaction never commits

        handler.release.set()
        replicas.spawn("scheduler-b")
        await replicas.wait_serving("scheduler-b")
        async with replicas.channel("scheduler-b") as ch:
            stub = scheduler_pb2_grpc.SchedulerStub(ch)

            async def all_run() -> list[scheduler_pb2.Job] | None:
                jobs = (await stub.List(scheduler_pb2.ListJobsRequest())).jobs
                return list(jobs) if all(j.runs for j in jobs) else None

            jobs = await wait_until(all_run, timeout=60, what="B to run the batch")
        assert {(j.runs, j.enabled) for j in jobs} == {(1, False)}
        assert {j.last_result for j in jobs if j.kind == "message"} == {"duplicate"}
        events = await fired(nats_url)
        assert sorted(e.msg_id for e in events) == [f"cron:m-{n:02d}:{due}" for n in range(50)]
        assert len(handler.bodies) == 2 and handler.bodies[0] == handler.bodies[1]
    finally:
        handler.release.set()
        server.shutdown()


async def _at_least(nats_url: str, n: int) -> bool:
    return len(await fired(nats_url)) >= n
