"""The phases of a benchmark run, one stack at a time; every stack is stopped in a ``finally``."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench import floors, load, procs, profile
from tests.bench.stats import Summary, shifted, summarize
from tests.support.otlp import OtlpReceiver
from tests.support.stack import Stack


@dataclass(frozen=True)
class Plan:
    quick: bool
    sequential_turns: int  # measured turns, after a warm-up of 5
    model_pairs: int  # direct calls to the fake model (pairs of two)
    floor_n: int  # operations per floor
    growth_turns: int  # turns in one session, to see the transcript's cost
    turns_per_session: int  # throughput runs: every session sends this many turns
    levels: tuple[tuple[int, int], ...]  # throughput runs: (concurrent sessions, sessions)
    level_cap_s: float  # time cap per throughput run
    replicas: tuple[int, ...] = (1, 2)
    profile_turns: int = 100
    warm_start: bool = True  # start the 1-agent home a second time (ready_s without initdb)
    quiet_wait_s: float = 60.0  # before each stack: wait this long at most for a quiet machine
    tool_replicas: tuple[int, ...] = (1, 2)  # executor throughput: `--scale tools=N` stacks
    get_time_calls: int = 5000  # per executor stack
    exec_calls: int = 400  # per executor stack
    tool_in_flight: int = 32  # calls in flight (each executor runs 8 at once by default)
    sandbox_calls: int = 200  # exec calls per sandbox variant (in process)
    warm_starts: int = 3  # embedded modes: starts of the same home after the first (median)
    settle_s: float = 10.0  # embedded modes: wait at most this long for an idle stack
    channel_turns: int = 100  # per chat channel: sequential webhook -> reply turns
    channel_burst: int = 2000  # per chat channel: webhooks sent at once for accepted/s

    @classmethod
    def full(cls) -> Plan:
        return cls(
            quick=False,
            sequential_turns=200,
            model_pairs=200,
            floor_n=1000,
            growth_turns=30,
            turns_per_session=8,
            levels=((1, 6), (10, 30), (100, 100)),
            level_cap_s=120.0,
        )

    @classmethod
    def short(cls) -> Plan:
        return cls(
            quick=True,
            sequential_turns=40,
            model_pairs=40,
            floor_n=200,
            growth_turns=8,
            turns_per_session=2,
            levels=((1, 4), (10, 10), (100, 100)),
            level_cap_s=30.0,
            profile_turns=30,
            warm_start=False,
            quiet_wait_s=5.0,
            get_time_calls=1500,
            exec_calls=100,
            sandbox_calls=40,
            warm_starts=2,
            settle_s=5.0,
            channel_turns=30,
            channel_burst=600,
        )


Say = Callable[[str], None]
PROFILE_ARGS = ("--processes",)


@contextlib.contextmanager
def fresh_home() -> Iterator[Path]:
    """A short temp dir for SB_HOME (PostgreSQL's unix socket path must stay short)."""
    path = Path(tempfile.mkdtemp(prefix="sb-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _stop(stack: Stack, into: dict[str, Any]) -> None:
    start = time.monotonic()
    left = procs.shutdown_stack(stack)
    into["stop_s"] = round(time.monotonic() - start, 2)
    if left:
        into["killed_after_stop"] = left


def _restarts(before: dict[str, int], after: dict[str, int]) -> dict[str, str]:
    """Processes whose pid changed (restarted) or vanished during the run."""
    changed = {}
    for name, pid in before.items():
        if name not in after:
            changed[name] = "gone"
        elif after[name] != pid:
            changed[name] = "restarted"
    return changed


def bench_stack(
    plan: Plan, fake: procs.FakeModel, replicas: int, model_ms: float, say: Say, with_floors: bool
) -> dict[str, Any]:
    """Everything measured on one `switchboard up --processes --scale agent=N`: one process
    per service, as before one-process mode became the default (so the figures stay comparable
    to earlier runs; the modes are compared in :mod:`tests.bench.modes`)."""
    out: dict[str, Any] = {"args": ["--processes", "--scale", f"agent={replicas}"], "cpu_s": {}}
    name = f"agent={replicas}"
    with fresh_home() as home:
        out["quiet_check"] = quiet = procs.wait_for_quiet(plan.quiet_wait_s)
        if quiet["busy_cores"] >= 0.25:
            say(f"[{name}] other programs keep {quiet['busy_cores']} cores busy; going on anyway")
        say(f"[{name}] starting the stack")
        stack = procs.launch_stack(home, fake, out["args"])
        try:
            out["ready_s"] = round(stack.ready_s, 2)
            pids = stack.pids()
            say(f"[{name}] ready in {stack.ready_s:.1f}s: {sorted(pids)}")
            if with_floors:
                say(f"[{name}] floors: NATS, JetStream, PostgreSQL, HTTP")
                out["floors"] = floors.measure_floors(
                    stack.admin_nats_url(procs.service_env(stack, "gateway-0", "SB_NATS_URL")),
                    procs.service_env(stack, "agent-0", "SB_DATABASE_URL"),
                    stack.url,
                    plan.floor_n,
                )
            _sequential(plan, stack, fake, f"a{replicas}", model_ms, out, say)
            _throughput(plan, stack, fake, f"a{replicas}", out, say)
            out["rss_mb"] = procs.rss_mb(stack)
            out["restarts"] = _restarts(pids, stack.pids())
        finally:
            _stop(stack, out)
        if replicas == 1 and plan.warm_start:  # the same home again: no initdb, warm caches
            warm = procs.launch_stack(home, fake, out["args"])
            try:
                out["ready_s_warm"] = round(warm.ready_s, 2)
            finally:
                procs.shutdown_stack(warm)
    return out


def _sequential(
    plan: Plan,
    stack: Stack,
    fake: procs.FakeModel,
    tag: str,
    model_ms: float,
    out: dict[str, Any],
    say: Say,
) -> None:
    """Turn latency one turn at a time (fresh sessions), then one session growing."""
    say(f"[{tag}] {plan.sequential_turns} sequential turns")
    meter = procs.CpuMeter(stack, fake)
    seq = load.sequential_turns(stack, plan.sequential_turns, tag=tag)
    out["cpu_s"]["sequential"] = meter.stop()
    turn: Summary = summarize(seq.ok_ms)
    out["turn_overhead_ms"] = turn
    out["platform_overhead_ms"] = shifted(turn, model_ms)
    out["sequential_errors"] = seq.errors
    say(f"[{tag}]   p50 {turn['p50']:.1f} ms, p99 {turn['p99']:.1f} ms, errors {seq.errors}")
    out["session_growth"] = growth = load.session_growth(stack, plan.growth_turns, tag)
    say(f"[{tag}]   one session: +{growth['ms_per_earlier_turn']:.2f} ms per earlier turn")


def _throughput(
    plan: Plan, stack: Stack, fake: procs.FakeModel, tag: str, out: dict[str, Any], say: Say
) -> None:
    """Every concurrency level, with the CPU each process used and a transcript check."""
    out["throughput"] = {}
    turns = plan.turns_per_session
    for concurrency, sessions in plan.levels:
        meter = procs.CpuMeter(stack, fake)
        run = asyncio.run(
            load.concurrent_turns(stack, concurrency, turns, sessions, tag, plan.level_cap_s)
        )
        out["cpu_s"][str(concurrency)] = meter.stop()
        asyncio.run(load.verify(stack, run))
        out["throughput"][str(concurrency)] = run.as_dict()
        say(
            f"[{tag}] {concurrency} at once, {sessions} sessions x {turns}: "
            f"{run.turns_per_s:.1f} turns/s, errors {run.errors}, transcripts {run.history}"
        )


def _settled(receiver: OtlpReceiver, cap_s: float = 10.0) -> list[Any]:
    """The spans once no new ones arrived for a second (exports are batched)."""
    deadline = time.monotonic() + cap_s
    count = -1
    while time.monotonic() < deadline:
        spans = receiver.spans()
        if len(spans) == count:
            return spans
        count = len(spans)
        time.sleep(1.0)
    return receiver.spans()


def bench_profile(plan: Plan, fake: procs.FakeModel, say: Say) -> dict[str, Any]:
    """A separate 1-agent stack exporting spans (`--processes`, as before one-process mode
    became the default): sequential turns, then 100 sessions at once."""
    out: dict[str, Any] = {}
    with OtlpReceiver() as receiver, fresh_home() as home:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        out["quiet_check"] = procs.wait_for_quiet(plan.quiet_wait_s)
        say("[profile] starting a traced stack")
        stack = procs.launch_stack(home, fake, PROFILE_ARGS, extra_env=env)
        try:
            load.sequential_turns(stack, plan.profile_turns, tag="prof", warmup=5)
            before = _settled(receiver)
            out["sequential"] = profile.breakdown(_after_warmup(before, 5))
            concurrency, sessions = plan.levels[-1]
            turns = plan.turns_per_session
            say(f"[profile] {concurrency} at once, {sessions} sessions x {turns}")
            asyncio.run(
                load.concurrent_turns(stack, concurrency, turns, sessions, "prof", plan.level_cap_s)
            )
            seen = {s.trace_id for s in before}
            burst = [s for s in _settled(receiver) if s.trace_id not in seen]
            out[f"{concurrency} sessions at once"] = profile.breakdown(burst)
        finally:
            procs.shutdown_stack(stack)
    return out


def _after_warmup(spans: Sequence[Any], warmup: int) -> list[Any]:
    """Drop the traces of the first ``warmup`` turns (by the gateway span's start)."""
    roots = sorted(
        (s for s in spans if s.name == "gateway.receive" and not s.parent_id),
        key=lambda s: s.start_ns,
    )
    dropped = {s.trace_id for s in roots[:warmup]}
    return [s for s in spans if s.trace_id not in dropped]
