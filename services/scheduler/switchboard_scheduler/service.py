"""gRPC ``Scheduler``: jobs checked and stored; errors (kinds of :mod:`switchboard.errors`)
turned into statuses a caller can act on (INVALID_ARGUMENT with what is wrong, NOT_FOUND,
ALREADY_EXISTS) by :func:`.grpc_errors`, never internal text."""

from __future__ import annotations

import logging

import grpc

from switchboard.errors_map import grpc_errors
from switchboard.v1 import scheduler_pb2, scheduler_pb2_grpc

from .firing import Firing, now_utc, record
from .jobs import SCHEDULE_FIELDS, Job, check, from_proto, updated
from .store import JobStore

log = logging.getLogger(__name__)
statuses = grpc_errors("the scheduler failed")


class SchedulerService(scheduler_pb2_grpc.SchedulerServicer):
    def __init__(
        self,
        store: JobStore,
        firing: Firing,
        default_agent: str,
        min_interval_ms: int,
        grace_s: float,
    ) -> None:
        self.store = store
        self.firing = firing
        self.default_agent = default_agent
        self.min_interval_ms = min_interval_ms
        self.grace_s = grace_s

    def _check(self, job: Job) -> None:
        check(job, min_interval_ms=self.min_interval_ms, now=now_utc(), grace_s=self.grace_s)

    @statuses
    async def List(
        self, request: scheduler_pb2.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ListJobsResponse:
        jobs = await self.store.list(request.agent, request.session_key)
        return scheduler_pb2.ListJobsResponse(jobs=[j.to_proto() for j in jobs])

    @statuses
    async def Add(
        self, request: scheduler_pb2.Job, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.Job:
        job = from_proto(request, self.default_agent)
        job.enabled = True
        self._check(job)
        job.next_run = job.first_run(now_utc())
        stored = await self.store.add(job)
        self.firing.wake.set()
        log.info("job added", extra={"job": job.name, "schedule": job.schedule_text})
        return stored.to_proto()

    @statuses
    async def Update(
        self, request: scheduler_pb2.UpdateJobRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.Job:
        async with self.store.pool.acquire() as conn, conn.transaction():
            job = await self.store.get(request.name, conn, lock=True)
            new = updated(job, request.job, list(request.fields))
            self._check(new)
            fields = set(request.fields)
            if SCHEDULE_FIELDS & fields or (new.enabled and not job.enabled):
                new.next_run = new.first_run(now_utc()) if new.enabled else None
            if not new.enabled:
                new.next_run = None
            stored = await self.store.save(new, conn)
        self.firing.wake.set()
        return stored.to_proto()

    @statuses
    async def Remove(
        self, request: scheduler_pb2.JobName, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.Job:
        return (await self.store.remove(request.name)).to_proto()

    @statuses
    async def Status(
        self, request: scheduler_pb2.JobName, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.Job:
        return (await self.store.get(request.name)).to_proto()

    @statuses
    async def RunNow(
        self, request: scheduler_pb2.JobName, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.RunNowResponse:
        """Run the job at once, for the slot "now" (its schedule stays as it was); waits for a
        replica that is running it on schedule to finish."""
        async with self.store.pool.acquire() as conn, conn.transaction():
            job = await self.store.get(request.name, conn, lock=True)
            outcome, error = await self.firing.attempt(job, now_utc())
            record(job, outcome, error)
            stored = await self.store.save(job, conn)
        return scheduler_pb2.RunNowResponse(
            job=stored.to_proto(), result=stored.last_result, error=stored.last_error
        )
