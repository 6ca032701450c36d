"""The scheduler against real nats-server and PostgreSQL: in-process (``scheduler_service``:
``serve`` with given settings, gRPC on a free port) or as replica processes
(``ReplicaProcesses``: ``python -m switchboard_scheduler``, each its own NATS user and ports).

What replicas did is counted from three sides that do not rely on each other: each replica's
own metrics (``ReplicaProcesses.counts``), every run committed to PostgreSQL
(``install_run_audit``: a trigger on the jobs table, naming the replica) and every publish
crossing the NATS server (``wire_tap``: including those the stream's dedupe then drops).

(Not a conftest.py: see services/gateway/tests/gateway_harness.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import grpc
import httpx
import nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from prometheus_client.parser import text_string_to_metric_families

from switchboard import bus, rpc
from switchboard.embedded import free_port
from switchboard.runtime import service_ready
from switchboard.v1 import messages_pb2, scheduler_pb2, scheduler_pb2_grpc
from switchboard_scheduler.config import SchedulerSettings
from switchboard_scheduler.server import serve
from tests.support.servers import service_nats_env
from tests.support.streams import Stored, stored

SUBJECTS = bus.Subjects()
T = TypeVar("T")


@dataclass
class RunningScheduler:
    stub: scheduler_pb2_grpc.SchedulerStub
    settings: SchedulerSettings


@asynccontextmanager
async def scheduler_service(
    nats_url: str, database_url: str, home: Path, **environ: str
) -> AsyncIterator[RunningScheduler]:
    port = free_port()
    token = "scheduler-test-" + os.urandom(12).hex()
    env = {
        "SB_NATS_URL": nats_url,
        "SB_DATABASE_URL": database_url,
        "SB_HOME": str(home),
        "SB_SERVICE_TOKEN": token,
        "SB_SCHEDULER_GRPC_PORT": str(port),
        "SB_SCHEDULER_POLL_S": "0.2",
        **environ,
    }
    settings = SchedulerSettings.from_environ(env)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    nc = await nats.connect(nats_url)
    channel: grpc.aio.Channel = rpc.channel(f"127.0.0.1:{port}", token)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert not task.done(), task
            with contextlib.suppress(Exception):
                if await service_ready(nc, SUBJECTS, "scheduler", timeout=1):
                    break
            assert time.monotonic() < deadline, "scheduler not ready"
            await asyncio.sleep(0.05)
        yield RunningScheduler(scheduler_pb2_grpc.SchedulerStub(channel), settings)
    finally:
        await channel.close()
        await nc.close()
        stop.set()
        await asyncio.wait_for(task, 30)


async def ensure_streams(nats_url: str) -> None:
    """The streams, as the router (their owner) makes them in a running system."""
    nc = await nats.connect(nats_url)
    try:
        await bus.ensure_streams(nc.jetstream(), SUBJECTS)
    finally:
        await nc.close()


async def fired(nats_url: str) -> list[Stored[messages_pb2.InboundMessage]]:
    """Every fired job's event on INBOUND (sb.inbound.cron), in order."""
    nc = await nats.connect(nats_url)
    try:
        found = await stored(nc.jetstream(), "INBOUND", messages_pb2.InboundMessage)
    finally:
        await nc.close()
    return [s for s in found if s.subject == SUBJECTS.inbound("cron")]


async def wait_until(
    predicate: Callable[[], Awaitable[T | None]], timeout: float = 30.0, what: str = ""
) -> T:
    """Await ``predicate()`` until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or predicate}"
        await asyncio.sleep(0.1)


def message_job(name: str, **fields: object) -> scheduler_pb2.Job:
    fields.setdefault("message", f"run {name}")
    return scheduler_pb2.Job(name=name, kind="message", **fields)  # type: ignore[arg-type]


@dataclass
class ReplicaCounts:
    """One replica's own count: due jobs it claimed, and its runs by outcome (``published``,
    ``duplicate``: the stream already held that slot's event, ``error``...)."""

    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def fired(self) -> int:
        return sum(self.outcomes.values())


def _named(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    query = [*parse_qsl(parts.query), ("application_name", name)]
    return urlunsplit(parts._replace(query=urlencode(query)))


@dataclass
class ReplicaProcesses:
    """Scheduler replicas as processes (``scheduler-<i>``), as embedded mode and Kubernetes run
    them: each its own NATS user login, gRPC and ops port, all on one database."""

    home: Path
    nats_url: str
    database_url: str
    env: dict[str, str] = field(default_factory=dict)
    token: str = field(default_factory=lambda: "scheduler-test-" + os.urandom(12).hex())
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    grpc_ports: dict[str, int] = field(default_factory=dict)
    ops_ports: dict[str, int] = field(default_factory=dict)

    def spawn(self, name: str) -> None:
        self.grpc_ports[name] = free_port()
        self.ops_ports[name] = free_port()
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
            # Its connections carry its name: the run audit says which replica wrote a run.
            "SB_DATABASE_URL": _named(self.database_url, name),
            "SB_HOME": str(self.home),
            "SB_SERVICE_TOKEN": self.token,
            "SB_INSTANCE": name,
            "SB_SCHEDULER_GRPC_PORT": str(self.grpc_ports[name]),
            "SB_OPS_PORT": str(self.ops_ports[name]),
            "SB_SCHEDULER_POLL_S": "0.2",
            **service_nats_env(self.nats_url, "scheduler"),
            **self.env,
        }
        with open(self.home / "logs" / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "switchboard_scheduler"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def channel(self, name: str) -> grpc.aio.Channel:
        return rpc.channel(f"127.0.0.1:{self.grpc_ports[name]}", self.token)

    async def wait_serving(self, name: str, timeout: float = 60.0) -> None:
        async with self.channel(name) as ch:
            deadline = time.monotonic() + timeout
            while not await rpc.check_health(ch):
                assert self.procs[name].poll() is None, f"{name} exited: {self.log(name)}"
                assert time.monotonic() < deadline, f"{name} not serving: {self.log(name)}"
                await asyncio.sleep(0.1)

    def counts(self, name: str) -> ReplicaCounts:
        """What the replica's /metrics say it did."""
        text = httpx.get(f"http://127.0.0.1:{self.ops_ports[name]}/metrics", timeout=5).text
        counts = ReplicaCounts()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "sb_scheduler_claimed_total":
                    counts.claimed += int(sample.value)
                elif sample.name == "sb_scheduler_fires_total" and sample.value:
                    outcome = sample.labels["outcome"]
                    counts.outcomes[outcome] = counts.outcomes.get(outcome, 0) + int(sample.value)
        return counts

    def log(self, name: str) -> str:
        return (self.home / "logs" / f"{name}.log").read_text(errors="replace")[-3000:]

    def kill(self, name: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


async def settled(database_url: str, replicas: list[str]) -> None:
    """Returns once every transaction the ``replicas`` had open at the call has ended: a claim
    runs its jobs inside its transaction, so every run (and publish) of a job claimed before the
    call has then happened, and a later claim sees the rows those runs committed."""
    conn = await asyncpg.connect(database_url)
    try:
        since = await conn.fetchval("SELECT clock_timestamp()")

        async def none_open() -> bool:
            left = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = ANY($1::text[]) AND xact_start < $2",
                replicas,
                since,
            )
            return left == 0

        await wait_until(none_open, timeout=60, what="the replicas' open claims to end")
    finally:
        await conn.close()


_RUN_AUDIT = """
CREATE SCHEMA run_audit;
CREATE TABLE run_audit.runs (
    id bigserial PRIMARY KEY, job text NOT NULL, slot timestamptz, result text NOT NULL,
    replica text NOT NULL, xid bigint NOT NULL, xact_start timestamptz NOT NULL,
    written timestamptz NOT NULL
);
CREATE FUNCTION run_audit.record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_audit.runs (job, slot, result, replica, xid, xact_start, written)
    VALUES (NEW.name, OLD.next_run, NEW.last_result, current_setting('application_name'),
            txid_current(), transaction_timestamp(), clock_timestamp());
    RETURN NULL;
END $$;
CREATE TRIGGER run_audit AFTER UPDATE ON scheduler.jobs FOR EACH ROW
    WHEN (NEW.last_run IS DISTINCT FROM OLD.last_run) EXECUTE FUNCTION run_audit.record();
"""


@dataclass(frozen=True)
class AuditedRun:
    """One run of a job as committed: the slot it was due at (as the row stood when written),
    its result, the replica and the transaction that wrote it."""

    job: str
    slot: datetime | None
    result: str
    replica: str
    xid: int
    xact_start: datetime
    written: datetime


async def install_run_audit(database_url: str) -> None:
    """Record every run written to ``scheduler.jobs`` (a row whose ``last_run`` changes), once
    a replica has made the schema. Only committed runs stay recorded; a run written twice
    (even with the same ``runs`` count, as two replicas that read the same row would write
    it) is recorded twice."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(_RUN_AUDIT)
    finally:
        await conn.close()


async def audited_runs(database_url: str) -> list[AuditedRun]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT job, slot, result, replica, xid, xact_start, written "
            "FROM run_audit.runs ORDER BY id"
        )
    finally:
        await conn.close()
    return [AuditedRun(**dict(r)) for r in rows]


@dataclass
class WireTap:
    """Every message published on a subject, as the NATS server passes it on to a plain
    subscriber: one entry per publish attempt (its ``Nats-Msg-Id``), including the repeats
    that the stream's dedupe drops and the stream therefore never shows."""

    nc: nats.NATS
    ids: list[str] = field(default_factory=list)
    subscription: Subscription | None = None

    async def settle(self) -> None:
        """Let everything the server sent so far reach ``ids``: a PING/PONG round trip on the
        same connection (messages come first), then until our queue is drained."""
        await self.nc.flush(timeout=30)
        sub = self.subscription
        assert sub is not None

        async def drained() -> bool:
            return sub.pending_msgs == 0

        await wait_until(drained, what="the tap's queue")
        await asyncio.sleep(0)


@asynccontextmanager
async def wire_tap(nats_url: str, subject: str) -> AsyncIterator[WireTap]:
    nc = await nats.connect(nats_url)
    tap = WireTap(nc)

    async def seen(msg: Msg) -> None:
        tap.ids.append((msg.headers or {}).get(bus.MSG_ID, ""))

    try:
        tap.subscription = await nc.subscribe(subject, cb=seen)
        await nc.flush(timeout=30)  # subscribed before anything is published
        yield tap
    finally:
        await nc.close()


class _HeldHook(BaseHTTPRequestHandler):
    """Holds every POST until ``release`` is set; records the bodies."""

    hook: HeldHook

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.hook.bodies.append(body)
        self.hook.arrived.set()
        self.hook.release.wait(120)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class HeldHook:
    """A webhook target that does not answer until released: a replica that calls it stays in
    the middle of its claim, holding every row of its batch."""

    url: str = ""
    bodies: list[bytes] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def held_hook() -> Iterator[HeldHook]:
    hook = HeldHook()
    handler = type("Handler", (_HeldHook,), {"hook": hook})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield hook
    finally:
        hook.release.set()
        server.shutdown()
        server.server_close()
