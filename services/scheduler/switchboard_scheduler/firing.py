"""Firing due jobs, from any number of replicas.

Each replica loops: in one transaction it claims up to ``batch`` due jobs with ``SELECT ...
FOR UPDATE SKIP LOCKED`` (rows another replica holds are skipped, never waited for), runs their
actions concurrently, writes each job's result and next run, and commits. A job is therefore
run by one replica per due time; a replica that dies before its commit releases its rows with
its connection, and another replica runs them again for the same due time, which INBOUND's
dedupe drops (``Nats-Msg-Id = cron:<job>:<slot>``): nothing is skipped, nothing reaches an
agent twice. (A webhook's POST can be repeated in that case; its body carries the slot.)

A job due longer ago than the misfire grace was missed (the scheduler was down): ``skip``
moves on to the next run after now, ``run_once`` runs it once, then moves on. A proactive job
due inside its agent's quiet hours is held: its next run becomes the end of the window.

Between batches a replica sleeps until the earliest due job, at most ``poll_s`` (other
replicas' new jobs are seen within that), and wakes at once for a job added through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
from nats.errors import Error as NatsError
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .actions import Actions, Outcome
from .config import QuietHours
from .errors import ActionFailed, BusUnavailable
from .jobs import COLUMNS, Job
from .metrics import CLAIMED, FIRE_LAG, FIRES
from .schedule import quiet_until
from .store import JobStore

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.scheduler")
CLAIM = (
    f"SELECT {', '.join(COLUMNS)} FROM scheduler.jobs WHERE enabled AND next_run <= $1 "
    "ORDER BY next_run LIMIT $2 FOR UPDATE SKIP LOCKED"
)


@dataclass
class Plan:
    job: Job
    slot: datetime  # the due time this run is for
    fire: bool
    next_run: datetime | None
    note: str = ""  # why it did not fire (held, skipped)


def now_utc() -> datetime:
    return datetime.now(UTC)


class Firing:
    def __init__(
        self,
        store: JobStore,
        actions: Actions,
        quiet: dict[str, QuietHours],
        *,
        batch: int,
        concurrency: int,
        grace_s: float,
        poll_s: float,
    ) -> None:
        self.store = store
        self.actions = actions
        self.quiet = quiet
        self.batch = batch
        self.grace = timedelta(seconds=grace_s)
        self.poll_s = poll_s
        self.slots = asyncio.Semaphore(concurrency)
        self.wake = asyncio.Event()
        self.retry_later = False  # a run could not be published: pause before the next batch

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.retry_later = False
            try:
                claimed = await self.tick()
                if claimed >= self.batch and not self.retry_later:
                    continue  # more may be due
                delay = self.poll_s if self.retry_later else await self._delay()
            except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
                log.warning("claiming due jobs failed, retrying: %s", type(exc).__name__)
                delay = self.poll_s
            except Exception:
                # Anything else is a bug, logged with its traceback; firing goes on, since a
                # dead loop would leave the service up and ready while no job fires again.
                log.exception("firing due jobs failed unexpectedly, retrying")
                delay = self.poll_s
            self.wake.clear()
            waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.wake.wait())}
            try:
                await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    async def _delay(self) -> float:
        due = await self.store.next_due()
        if due is None:
            return self.poll_s
        return min(self.poll_s, max(0.0, (due - now_utc()).total_seconds()))

    async def tick(self) -> int:
        """Claim and run one batch of due jobs; how many were claimed."""
        async with self.store.pool.acquire() as conn, conn.transaction():
            now = now_utc()
            rows = await conn.fetch(CLAIM, now, self.batch)
            if not rows:
                return 0
            CLAIMED.inc(len(rows))
            plans = [self.plan(Job.from_row(r), now) for r in rows]
            done = await asyncio.gather(*(self._execute(p) for p in plans))
            for job in done:
                await self.store.save(job, conn)
        return len(rows)

    def plan(self, job: Job, now: datetime) -> Plan:
        assert job.next_run is not None
        slot = job.next_run
        if now - slot > self.grace and job.missed == "skip":
            following = job.following(slot, now)
            return Plan(job, slot, False, following, f"skipped the run due {_iso(slot)}")
        if job.proactive and not job.urgent:
            held = quiet_until(self.quiet, job.agent, job.deliver_to.channel, now)
            if held is not None:
                return Plan(job, slot, False, held, f"held by quiet hours until {_iso(held)}")
        # A run late by less than the misfire grace (the bus was away for a few seconds) is
        # followed by the next slot even if that is due already: the slots that came due
        # meanwhile are run, not skipped. Past the grace (``run_once``), on after now.
        late = now - slot > self.grace
        return Plan(job, slot, True, job.following(slot, now if late else slot))

    async def _execute(self, plan: Plan) -> Job:
        job = plan.job
        if plan.fire:
            async with self.slots:
                FIRE_LAG.observe(max(0.0, (now_utc() - plan.slot).total_seconds()))
                try:
                    outcome, error = await self.attempt(job, plan.slot)
                except BusUnavailable as exc:
                    # The run stays due (same slot, same Nats-Msg-Id) and is tried again after
                    # a pause; past the misfire grace the job's missed policy decides.
                    job.last_error = str(exc)
                    self.retry_later = True
                    return job
            record(job, outcome, error)
        else:
            job.last_result = plan.note
            FIRES.labels(job.kind, plan.note.split(" ", 1)[0]).inc()
        job.next_run = plan.next_run
        if job.next_run is None:
            job.enabled = False  # a one-shot that ran (or was skipped)
        return job

    async def attempt(self, job: Job, slot: datetime) -> tuple[Outcome | None, str]:
        """Run ``job``'s action for ``slot``: its outcome, or the error to record;
        :class:`BusUnavailable` when the event could not be published."""
        with tracer.start_as_current_span("scheduler.fire", kind=SpanKind.PRODUCER) as span:
            span.set_attribute("sb.job", job.name)
            span.set_attribute("sb.job.kind", job.kind)
            try:
                outcome = await self.actions.run(job, slot)
            except ActionFailed as exc:
                FIRES.labels(job.kind, "error").inc()
                return None, str(exc)
            except (NatsError, TimeoutError) as exc:
                FIRES.labels(job.kind, "bus_unavailable").inc()
                log.warning("publishing job %s failed: %s", job.name, type(exc).__name__)
                raise BusUnavailable("the message bus did not accept the event; retrying") from exc
        FIRES.labels(job.kind, outcome.result.split(",", 1)[0].replace(" ", "_")).inc()
        return outcome, ""


def record(job: Job, outcome: Outcome | None, error: str) -> None:
    """Write a run's outcome (or error) on ``job``."""
    job.last_run = now_utc()
    job.runs += 1
    job.last_error = error
    if outcome is not None:
        job.last_result = outcome.result
        if outcome.content_sha256 is not None:
            job.content_sha256 = outcome.content_sha256
    else:
        job.last_result = "error"


async def finish(task: asyncio.Task[None], timeout_s: float = 10.0) -> None:
    """Let the loop end its batch (it stops once the service's stop is set), then cancel it."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), timeout_s)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z")
