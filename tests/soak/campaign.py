"""One campaign: start the system, run traffic and chaos for the given minutes, quiesce,
check, stop everything; the report (``bench-results/soak.json``'s content)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import nats

from tests.lanes.pipeline import wait_consumed
from tests.soak.chaos import RECOVERY_S, Chaos
from tests.soak.checker import check_cron, check_memory, check_messages, delivered, read_transcripts
from tests.soak.ledger import Ledger
from tests.soak.system import System, fakes, new_root, remove_root
from tests.soak.traffic import RETRY_FOR_S, Load, Traffic

CRON_JOBS = {"soak-every-3s": 3.0, "soak-every-5s": 5.0}
QUIESCE_S = 300.0  # every pending message must be finished within this, after the last fault


@dataclass(frozen=True)
class Options:
    minutes: float
    seed: int
    load: Load = field(default_factory=Load)
    gap_s: tuple[float, float] = (8.0, 25.0)
    plan: tuple[str, ...] | None = None  # fixed faults (the short variant), else random
    cluster: bool = True
    keep: bool = False  # keep the data dir (logs) even when the run passed


async def run(options: Options) -> dict[str, Any]:
    # Discord's signed calls, readiness probes and server restarts run in threads: more than
    # the default executor's few, so a slow call never holds up a fault or a probe.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(64))
    root = new_root()
    report: dict[str, Any] = {"seed": options.seed, "minutes": options.minutes, "root": str(root)}
    ok = False
    with fakes() as fake:
        system = System(root, want_cluster=options.cluster)
        try:
            await system.start(fake)
            report["nats"] = f"{system.nats.kind} ({system.nats.size} node(s))"
            ok = await _campaign(system, options, report)
        finally:
            left = await system.stop()
            report["processes_left"] = len(left)
            report["processes_left_detail"] = left
    report["passed"] = ok and not left
    if report["passed"] and not options.keep:
        remove_root(root)
    return report


async def _campaign(system: System, options: Options, report: dict[str, Any]) -> bool:
    rng = random.Random(options.seed)
    ledger = Ledger()
    traffic = Traffic(system, ledger, random.Random(rng.random()), options.load)
    chaos = Chaos(system, random.Random(rng.random()), options.gap_s,
                  list(options.plan) if options.plan is not None else None)  # fmt: skip
    report["rss_start"] = system.rss()
    await _cron(system, "add")
    report["cron_added_at"] = _now()
    sampler = asyncio.create_task(_sample(system))
    started = time.monotonic()
    traffic_task = asyncio.create_task(traffic.run())
    chaos_task = asyncio.create_task(chaos.run())
    await asyncio.sleep(options.minutes * 60)
    if options.plan is None:
        chaos.stop()
    await asyncio.wait_for(chaos_task, RECOVERY_S * 4)  # a planned run finishes its plan
    traffic.stop()
    await asyncio.wait_for(traffic_task, RETRY_FOR_S + 240)
    report["traffic_s"] = round(time.monotonic() - started, 1)
    quiesced = time.monotonic()
    settled = await _quiesce(system, report)
    report["quiesce_s"] = round(time.monotonic() - quiesced, 1)
    report["settled"] = settled
    report["rss_end"] = system.rss()
    report["restarts"] = system.restarts()
    sampler.cancel()
    return await _check(system, ledger, traffic, chaos, report) and settled


async def _sample(system: System) -> None:
    """Every service process started, so that none can be left behind unseen."""
    while True:
        system.note_pids()
        await asyncio.sleep(1.0)


def _client(system: System) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {system.token}"}
    return httpx.AsyncClient(base_url=system.direct_url, headers=headers, timeout=30)


async def _cron(system: System, action: str) -> None:
    """Add (or remove) the scheduled jobs, retrying while a service is coming back."""
    async with _client(system) as client:
        for job, every in CRON_JOBS.items():
            for _ in range(60):
                with contextlib.suppress(httpx.HTTPError):
                    if action == "add":
                        body = {"name": job, "kind": "message", "every": f"{every:g}s",
                                "message": f"soak tick of {job}"}  # fmt: skip
                        r = await client.post("/api/cron", json=body)
                        if r.status_code in (201, 409):
                            break
                    else:
                        r = await client.delete(f"/api/cron/{job}")
                        if r.status_code in (200, 204, 404):
                            break
                await asyncio.sleep(1.0)
            else:
                raise RuntimeError(f"could not {action} cron job {job}")


async def _quiesce(system: System, report: dict[str, Any]) -> bool:
    """No more faults nor traffic: the jobs are removed, then every message taken is routed
    and answered and every reply part delivered (INBOUND's and LANES' consumers have
    acknowledged everything, OUTBOUND is empty), within QUIESCE_S; then a few seconds more,
    so that a late duplicate would still be seen."""
    if not await system.wait_ready(RECOVERY_S):
        return False
    report["cron_removed_at"] = _now()
    await _cron(system, "remove")
    deadline = time.monotonic() + QUIESCE_S
    nc = await nats.connect(servers=system.nats.admin_url.split(","))
    try:
        js = nc.jetstream()
        for stream, durable in (("INBOUND", "router"), ("LANES", "dispatch")):
            left = max(1.0, deadline - time.monotonic())
            try:
                await wait_consumed(js, stream, durable, left)
            except AssertionError as exc:
                print(f"soak: not settled: {exc}", flush=True)
                return False
        report["stream_replicas"] = {
            s: (await js.stream_info(s)).config.num_replicas
            for s in ("INBOUND", "LANES", "OUTBOUND")
        }
        while (await js.stream_info("OUTBOUND")).state.messages:
            if time.monotonic() > deadline:
                print("soak: not settled: OUTBOUND never emptied", flush=True)
                return False
            await asyncio.sleep(0.5)
    finally:
        await nc.close()
    await asyncio.sleep(5.0)
    return True


async def _check(
    system: System, ledger: Ledger, traffic: Traffic, chaos: Chaos, report: dict[str, Any]
) -> bool:
    assert system.fakes is not None
    seen = await read_transcripts(system.database_url)
    channels = [c for c in _discord_channels(ledger)]
    platforms = delivered(system.fakes, channels)
    per_channel, evidence = check_messages(ledger, seen, platforms, traffic.webchat_seen)
    removed = report.get("cron_removed_at")  # none when the system never came back
    window = (report["cron_added_at"], removed) if removed else None
    cron, cron_evidence = check_cron(seen, CRON_JOBS, chaos.faults, window)
    async with _client(system) as client:
        memory, memory_evidence = await check_memory(client, ledger, seen)
    evidence += cron_evidence + memory_evidence
    totals = {
        key: sum(c.get(key, 0) for c in per_channel.values())
        for key in ("accepted", "unknown", "refused", "answered_once", "out_of_order",
                    "platform_retries", "misrouted", "wrong_reply")
    }  # fmt: skip
    lost = (
        sum(c.get("lost", 0) + c.get("not_delivered", 0) for c in per_channel.values())
        + sum(j["unanswered"] for j in cron.values())
        + (memory["documents_written"] - memory["documents_found"])
        + (memory["facts_stored"] - memory["facts_found"])
    )
    duplicated = sum(
        c.get("duplicated", 0) + c.get("delivered_twice", 0) for c in per_channel.values()
    ) + sum(j["fired_twice"] + j["answered_twice"] for j in cron.values())
    kinds: dict[str, int] = {}
    for fault in chaos.faults:
        kinds[fault["kind"]] = kinds.get(fault["kind"], 0) + 1
    report.update(
        {
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "messages": totals,
            "lost": lost,
            "duplicated": duplicated,
            "per_channel": per_channel,
            "cron": cron,
            "memory": memory,
            "faults_per_kind": kinds,
            "faults": chaos.faults,
            "unrecovered_faults": sum(f.get("recovered_s") is None for f in chaos.faults),
            "model_calls": len(system.fakes.llm.calls),
            "proxy_connections_cut": {
                "clients": system.gateway_proxy.dropped if system.gateway_proxy else 0,
                "model": system.model_proxy.dropped if system.model_proxy else 0,
            },
            "evidence": evidence[:200],
        }
    )
    bad = lost or duplicated or totals["out_of_order"] or totals["misrouted"]
    return not bad and not totals["wrong_reply"] and not report["unrecovered_faults"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _discord_channels(ledger: Ledger) -> list[str]:
    from tests.soak.traffic import discord_channel

    return sorted({discord_channel(s.conversation) for s in ledger.sent.values()
                   if s.channel == "discord"})  # fmt: skip
