"""The scheduler against real nats-server and PostgreSQL: in-process (``scheduler_service``:
``serve`` with given settings, gRPC on a free port) or as replica processes
(``ReplicaProcesses``: ``python -m switchboard_scheduler``, each its own NATS user and ports).

(Not a conftest.py: see services/gateway/tests/gateway_harness.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc
import httpx
import nats

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
            "SB_DATABASE_URL": self.database_url,
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

    def fires(self, name: str) -> float:
        """The replica's count of published runs (its /metrics)."""
        text = httpx.get(f"http://127.0.0.1:{self.ops_ports[name]}/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith("sb_scheduler_fires_total{") and 'outcome="published"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

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
