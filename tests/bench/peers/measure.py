"""One round of one peer: the same phases and the same meters for Switchboard and nanobot.

A peer is started on a fresh home and timed from launch to its first complete answer; then
it settles and its idle PSS is taken; sequential turns and the concurrent sessions run under
CPU meters; PSS again after the load; it is stopped, started once more on the same home
(ready again), and stopped. PSS and CPU come from tests/bench/procs.py (``pss_mb`` over every
process of the peer, ``CpuMeter``), which read a :class:`~tests.support.stack.Stack`: the
nanobot driver hands over one of its own (see tests/bench/peers/nanobot.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from tests.bench import procs
from tests.bench.modes import OUTSIDE
from tests.bench.peers import drive
from tests.bench.run import fresh_home
from tests.support.stack import Stack

Say = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    rounds: int = 3
    sequential_turns: int = 100  # measured, after `warmup` unmeasured ones
    warmup: int = 5
    sessions: int = 20  # at once, each on its own connection
    turns_per_session: int = 5
    cap_s: float = 300.0  # per load phase
    quiet_wait_s: float = 60.0  # before each start: wait this long at most for a quiet machine
    settle_s: float = 10.0  # after the first answer: wait at most this long for an idle peer

    @classmethod
    def short(cls) -> Plan:
        return cls(rounds=1, sequential_turns=20, turns_per_session=2, quiet_wait_s=5.0)


@dataclass
class Running:
    stack: Stack  # the peer's process(es), as procs.pss_mb and procs.CpuMeter read them
    endpoint: drive.Endpoint
    own_ready_s: float | None  # the peer's own ready signal, if it prints one


class Peer(Protocol):
    name: str
    fake: procs.FakeModel  # its own instant model: excluded from its CPU

    def launch(self, home: Path) -> Running:
        """Start the peer on ``home``; may return before it answers."""
        ...

    def stop(self, running: Running) -> list[int]:
        """Stop it like Ctrl-C; the pids that had to be killed."""
        ...

    def outbound(self) -> list[str]:
        """Attempts to reach beyond this machine seen so far (nanobot's proxy trap)."""
        ...


def cpu_ms_per_turn(cpu: dict[str, float], turns_ok: int) -> float | None:
    """The peer's CPU (every one of its processes; not the fake model, not this client) per
    successful turn, in ms."""
    if not turns_ok:
        return None
    return round(sum(v for k, v in cpu.items() if k not in OUTSIDE) * 1000 / turns_ok, 2)


def _loopback(ip: str) -> bool:
    """127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 (::ffff:127.0.0.1)."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def remote_connections(stack: Stack) -> list[str]:
    """The peer's open internet connections to any address off this machine, right now."""
    seen: set[str] = set()
    for family in procs.stack_processes(stack).values():
        for proc in family:
            with contextlib.suppress(psutil.Error):
                for conn in proc.net_connections(kind="inet"):
                    if conn.raddr and not _loopback(conn.raddr.ip):
                        seen.add(f"{proc.name()} -> {conn.raddr.ip}:{conn.raddr.port}")
    return sorted(seen)


def measure_round(peer: Peer, plan: Plan, tag: str, say: Say) -> dict[str, Any]:
    """Every figure of ``peer`` in one round (``figures``), with what they came from."""
    out: dict[str, Any] = {"remote_connections": []}
    name = peer.name
    tried_before = len(peer.outbound())
    with fresh_home() as home:
        out["quiet_check"] = quiet = procs.wait_for_quiet(plan.quiet_wait_s)
        say(f"[{name}] quiet check: {quiet['busy_cores']} cores busy after {quiet['waited_s']} s")
        started = time.monotonic()
        running = peer.launch(home)
        try:
            out["ready_s"] = _ready(running, started)
            out["own_ready_signal_s"] = running.own_ready_s
            out["settle_s"] = procs.settle(running.stack, plan.settle_s)
            out["pss_idle"] = idle = procs.pss_mb(running.stack)
            out["remote_connections"] += remote_connections(running.stack)
            say(f"[{name}] answering {out['ready_s']:.2f} s after start; idle PSS {idle['pss_mb']}")
            _load(peer, running, plan, tag, out, say)
            out["pss_after"] = procs.pss_mb(running.stack)
            out["remote_connections"] += remote_connections(running.stack)
        finally:
            if left := peer.stop(running):
                out["killed_after_stop"] = left
        out["quiet_check_again"] = procs.wait_for_quiet(min(10.0, plan.quiet_wait_s))
        started = time.monotonic()
        running = peer.launch(home)
        try:
            out["ready_again_s"] = _ready(running, started)
        finally:
            if left := peer.stop(running):
                out.setdefault("killed_after_stop", []).extend(left)
    out["outbound_attempts"] = peer.outbound()[tried_before:]
    out["figures"] = figures(out)
    say(f"[{name}] ready again {out['ready_again_s']:.2f} s; figures {out['figures']}")
    return out


def _ready(running: Running, started: float) -> float:
    """drive.first_answer, with the peer's last output lines when it never answers."""
    try:
        return drive.first_answer(running.endpoint, running.stack.proc, started)
    except RuntimeError as exc:
        tail = "".join(running.stack.output[-30:])
        raise RuntimeError(f"{exc}; its output ends with:\n{tail}") from exc


def _load(
    peer: Peer, running: Running, plan: Plan, tag: str, out: dict[str, Any], say: Say
) -> None:
    """Sequential turns, then the sessions at once, each under its own CPU meter."""
    ep = running.endpoint
    meter = procs.CpuMeter(running.stack, peer.fake)
    seq = drive.sequential(ep, plan.sequential_turns, tag, plan.warmup, plan.cap_s)
    out["cpu_s_sequential"] = meter.stop()
    out["sequential"] = {"latency_ms": seq.summary(), "ok": seq.ok, "errors": dict(seq.errors)}
    say(f"[{peer.name}] {plan.sequential_turns} sequential turns: {out['sequential']}")
    meter = procs.CpuMeter(running.stack, peer.fake)
    conc = asyncio.run(drive.concurrent(ep, plan.sessions, plan.turns_per_session, tag, plan.cap_s))
    out["cpu_s_concurrent"] = meter.stop()
    out["concurrent"] = {
        "sessions": plan.sessions,
        "turns_per_session": plan.turns_per_session,
        "ok": conc.ok,
        "errors": dict(conc.errors),
        "wall_s": round(conc.wall_s, 3),
        "turns_per_s": round(conc.ok / conc.wall_s, 2) if conc.wall_s > 0 else None,
        "latency_ms": conc.summary(),
    }
    say(f"[{peer.name}] {plan.sessions} sessions at once: {out['concurrent']}")


def figures(out: dict[str, Any]) -> dict[str, float | None]:
    """The compared figures of one round (see report.FIGURES for their meaning)."""
    seq, conc = out["sequential"], out["concurrent"]

    def busy(cpu: dict[str, float]) -> float | None:
        wall = cpu.get("wall_s", 0.0)
        return round(cpu["other processes"] / wall, 2) if wall else None

    return {
        "ready_s": out["ready_s"],
        "ready_again_s": out["ready_again_s"],
        "turn_p50_ms": seq["latency_ms"]["p50"],
        "turn_p99_ms": seq["latency_ms"]["p99"],
        "turns_per_s": conc["turns_per_s"],
        "pss_idle_mb": out["pss_idle"]["pss_mb"],
        "pss_after_mb": out["pss_after"]["pss_mb"],
        "cpu_ms_per_turn_sequential": cpu_ms_per_turn(out["cpu_s_sequential"], seq["ok"]),
        "cpu_ms_per_turn": cpu_ms_per_turn(out["cpu_s_concurrent"], conc["ok"]),
        "processes": out["pss_after"]["processes"],
        "other_cores_busy": busy(out["cpu_s_concurrent"]),
    }
