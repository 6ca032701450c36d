"""Scheduler fire lag (issue 12): 1,000 one-shot jobs due in the same second, fired by two
scheduler replicas (processes, ``python -m switchboard_scheduler``, as Compose runs them)
against a nats-server and a PostgreSQL this module starts. The lag of a job is from its due
time to the moment its event was stored on INBOUND (JetStream's own timestamp of the message):
the run has started once the router can take it. Target: p99 <= 1 s."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats

from switchboard import rpc
from switchboard.embedded import NatsServer, Postgres, free_port
from switchboard.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.bench.run import fresh_home
from tests.bench.stats import summarize

JOBS = 1000
REPLICAS = 2
LEAD_S = 8.0  # the jobs are due this long after the first Add: all are stored by then
TARGET_P99_MS = 1000.0
Say = Callable[[str], None]


class Replicas:
    """Scheduler processes on one NATS (no authorization) and one PostgreSQL."""

    def __init__(self, home: Path, n: int) -> None:
        self.home = home
        self.nats = NatsServer(home / "nats").start()
        self.postgres = Postgres(home / "pg")
        database_url = self.postgres.start()
        self.token = "bench-" + os.urandom(16).hex()
        self.ports = [free_port() for _ in range(n)]
        self.logs = [(home / f"scheduler-{i}.log").open("ab") for i in range(n)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "switchboard_scheduler"],
                env={
                    **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
                    "SB_HOME": str(home),
                    "SB_INSTANCE": f"scheduler-{i}",
                    "SB_NATS_URL": self.nats.url,
                    "SB_DATABASE_URL": database_url,
                    "SB_SERVICE_TOKEN": self.token,
                    "SB_SCHEDULER_GRPC_PORT": str(port),
                    "SB_LOG_LEVEL": "WARNING",
                },
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            for i, (port, log) in enumerate(zip(self.ports, self.logs, strict=True))
        ]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in self.logs:
            log.close()
        self.postgres.stop()
        self.nats.stop()


async def _serving(replicas: Replicas, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    for port, proc in zip(replicas.ports, replicas.procs, strict=True):
        async with rpc.channel(f"127.0.0.1:{port}", replicas.token) as ch:
            while not await rpc.check_health(ch):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"a scheduler replica did not start; see {replicas.home}")
                await asyncio.sleep(0.1)


async def _lags(nats_url: str, due_ms: dict[str, int], timeout: float) -> list[float]:
    """Each fired job's lag (ms): INBOUND's timestamp of its event minus its due time."""
    nc = await nats.connect(nats_url)
    lags: list[float] = []
    try:
        sub = await nc.jetstream().pull_subscribe("sb.inbound.cron", durable=None)
        deadline = time.monotonic() + timeout
        while len(lags) < len(due_ms) and time.monotonic() < deadline:
            with contextlib.suppress(nats.errors.TimeoutError):
                for msg in await sub.fetch(200, timeout=1):
                    job = msg.headers.get("Nats-Msg-Id", "").split(":")[1] if msg.headers else ""
                    stored_ms = msg.metadata.timestamp.timestamp() * 1000
                    lags.append(stored_ms - due_ms[job])
                    await msg.ack()
    finally:
        await nc.close()
    return lags


async def _measure(replicas: Replicas) -> dict[str, Any]:
    await _serving(replicas)
    async with rpc.channel(
        ",".join(f"127.0.0.1:{p}" for p in replicas.ports), replicas.token
    ) as ch:
        stub = scheduler_pb2_grpc.SchedulerStub(ch)
        due = int((time.time() + LEAD_S) * 1000) // 1000 * 1000 + 1000  # a whole second
        due_ms = {f"bench-{n:04d}": due + n % 1000 for n in range(JOBS)}
        added = time.perf_counter()
        for start in range(0, JOBS, 100):
            names = list(due_ms)[start : start + 100]
            await asyncio.gather(
                *(
                    stub.Add(
                        scheduler_pb2.Job(name=n, kind="message", message="b", at_ms=due_ms[n])
                    )
                    for n in names
                )
            )
        add_s = time.perf_counter() - added
        if time.time() * 1000 >= due:
            raise RuntimeError(f"adding {JOBS} jobs took {add_s:.1f}s, past their due time")
        lags = await _lags(replicas.nats.url, due_ms, timeout=LEAD_S + 60)
    summary = summarize(lags)
    return {
        "jobs": JOBS,
        "replicas": REPLICAS,
        "fired": len(lags),
        "due_within_ms": 1000,
        "measured": "due time -> the job's event stored on INBOUND (JetStream timestamp)",
        "fire_lag_ms": dict(summary),
        "add_jobs_per_s": round(JOBS / add_s, 1),
        "targets": {"fire_lag_ms_p99": TARGET_P99_MS},
    }


def bench_scheduler(say: Say) -> dict[str, Any]:
    say(f"scheduler: {REPLICAS} replicas, {JOBS} jobs due in one second")
    with fresh_home() as home:
        replicas = Replicas(home, REPLICAS)
        try:
            result = asyncio.run(_measure(replicas))
        finally:
            replicas.stop()
    lag = result["fire_lag_ms"]
    say(f"scheduler: fire lag p50 {lag['p50']:.1f} ms, p99 {lag['p99']:.1f} ms")
    return result


def markdown(s: dict[str, Any]) -> list[str]:
    lag = s["fire_lag_ms"]
    return [
        "",
        "## Scheduler (fire lag)",
        "",
        f"{s['jobs']} one-shot jobs due within one second, {s['replicas']} scheduler replicas"
        f" (processes); {s['fired']} fired. Lag: {s['measured']}.",
        "",
        "| p50 ms | p90 ms | p99 ms | max ms | jobs added/s |",
        "|---|---|---|---|---|",
        f"| {lag['p50']:.1f} | {lag['p90']:.1f} | {lag['p99']:.1f} | {lag['max']:.1f}"
        f" | {s['add_jobs_per_s']:.0f} |",
        "",
        f"Target: p99 <= {s['targets']['fire_lag_ms_p99']:.0f} ms.",
    ]
