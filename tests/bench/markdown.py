"""latest.md: the targets table first, then every figure as markdown tables."""

from __future__ import annotations

import math
from typing import Any

from tests.bench import channels as channels_mod
from tests.bench import executor as executor_mod
from tests.bench import media as media_mod
from tests.bench import memory as memory_mod
from tests.bench import modes as modes_mod
from tests.bench import profile as profile_mod
from tests.bench import scheduler as scheduler_mod
from tests.bench import web as web_mod
from tests.bench.load import EXACT


def _f(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render(r: dict[str, Any]) -> list[str]:
    m, g = r["machine"], r["git"]
    dirty = len(g["uncommitted_changes"])
    lines = [
        "# Switchboard benchmark",
        "",
        f"{r['timestamp']} · {m['cpu_count']} CPUs ({m['cpu_model']}) · Python {m['python']} · "
        f"commit {g['commit'][:10]}"
        + (f" + {dirty} uncommitted change(s)" if dirty else "")
        + (" · **--quick**" if r["config"]["quick"] else ""),
        "",
        "Embedded stack (`switchboard up --processes --scale agent=N` for the agent=N stacks: one "
        "process per service, as in earlier runs; the default one-process mode is compared in "
        "*Embedded modes*), fake model in its own process answering instantly with one tool "
        "call, then text. Sequential turns each use a fresh session. "
        f"Load average at start: {m['load_avg_1m_at_start']}; *other programs* = cores kept "
        "busy by processes that are not part of the benchmark (they slow it down).",
        "",
        "## Targets",
        "",
        "| figure | target | measured | verdict |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {t['figure']} | {t['target']} | {t['measured']} | {t['verdict']} |"
        for t in r["targets"]
    ]
    if busy := _contended(r):
        lines += [
            "",
            f"**Warning:** other programs kept cores busy during {', '.join(busy)}; those "
            "figures are worse than this machine can do. Rerun on a quiet machine.",
        ]
    lines += modes_mod.markdown(r)
    model = r["model_floor_ms"]
    lines += [
        "",
        "## Turn latency, sequential (ms)",
        "",
        f"Fake model's own time per turn (its two calls over direct HTTP, no SDK): "
        f"p50 {_f(model['p50'])} ms. Platform overhead = turn minus that.",
        "",
        "| stack | what | n | p50 | p90 | p99 | mean | errors | other programs |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for name, s in r["stacks"].items():
        for what, key in (
            ("turn", "turn_overhead_ms"),
            ("platform overhead", "platform_overhead_ms"),
        ):
            v = s.get(key)
            if v:
                errors = s.get("sequential_errors") or "" if what == "turn" else ""
                lines.append(
                    f"| {name} | {what} | {v['n']} | {_f(v['p50'])} | {_f(v['p90'])} | "
                    f"{_f(v['p99'])} | {_f(v['mean'])} | {errors or ''} "
                    f"| {_other(s, 'sequential') if what == 'turn' else ''} |"
                )
    lines += [
        "",
        "## Throughput",
        "",
        "N sessions at once; each sends its turns one after another, and a slot whose session is "
        "done takes the next session, so every level sees the same transcript lengths.",
        "",
        "| stack | at once | sessions x turns | ok | turns/s | p50 ms | p99 ms | errors "
        "| transcripts exact | other programs |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for name, s in r["stacks"].items():
        for level, t in s.get("throughput", {}).items():
            lat = t["latency_ms"]
            lines.append(
                f"| {name} | {level} | {t['sessions']} x {t['turns_per_session']} "
                f"| {t['turns_ok']} | {_f(t['turns_per_s'], 1)} | {_f(lat['p50'], 1)} "
                f"| {_f(lat['p99'], 1)} | {t['errors'] or ''} | {_transcripts(t)} "
                f"| {_other(s, level)} |"
            )
    lines += ["", "One session, turns one after another (the transcript grows):", ""]
    for name, s in r["stacks"].items():
        if g := s.get("session_growth"):
            lines.append(
                f"- {name}: first turns p50 {_f(g['first_turns_p50_ms'], 1)} ms, after "
                f"{g['turns']} turns p50 {_f(g['last_turns_p50_ms'], 1)} ms: "
                f"+{_f(g['ms_per_earlier_turn'])} ms per earlier turn"
                + (f"; errors {g['errors']}" if g.get("errors") else "")
            )
    lines += _cpu_lines(r)
    if r.get("executor"):
        lines += executor_mod.markdown(r["executor"])
    if r.get("channels"):
        lines += channels_mod.markdown(r["channels"])
    if r.get("memory"):
        lines += memory_mod.markdown(r["memory"])
    if r.get("scheduler"):
        lines += scheduler_mod.markdown(r["scheduler"])
    if r.get("media"):
        lines += media_mod.markdown(r["media"])
    if r.get("web"):
        lines += web_mod.markdown(r["web"])
    lines += _process_lines(r) + _floor_lines(r)
    if r.get("profile"):
        for title, prof in r["profile"].items():
            if title == "quiet_check":
                continue
            lines += ["", f"## Profile: {title} (OTLP spans, separate stack)", ""]
            lines += profile_mod.markdown(prof)
    return lines


CONTENDED_CORES = 0.25  # other programs busier than this during a phase: the figures suffer


def _contended(r: dict[str, Any]) -> list[str]:
    """The phases (stack/phase) during which other programs used more than CONTENDED_CORES."""
    busy = []
    for name, stack in r["stacks"].items():
        for phase, cpu in stack.get("cpu_s", {}).items():
            if cpu.get("wall_s") and cpu["other processes"] / cpu["wall_s"] > CONTENDED_CORES:
                busy.append(f"{name} {phase}")
    for mode, m in (r.get("modes") or {}).items():
        for phase, cpu in m.get("cpu_s", {}).items():
            if cpu.get("wall_s") and cpu["other processes"] / cpu["wall_s"] > CONTENDED_CORES:
                busy.append(f"{mode} {phase}")
    return busy + executor_mod.contended(r.get("executor", {}), CONTENDED_CORES)


def _other(stack: dict[str, Any], phase: str) -> str:
    """How many cores other programs on the machine kept busy during ``phase``."""
    cpu = stack.get("cpu_s", {}).get(phase)
    if not cpu or not cpu.get("wall_s"):
        return "-"
    return f"{cpu['other processes'] / cpu['wall_s']:.2f} cores"


def _transcripts(run: dict[str, Any]) -> str:
    """'100/100' when every session's transcript is exact, else the verdict counts."""
    check: dict[str, int] = run["history_check"]
    exact = check.get(EXACT, 0)
    others = ", ".join(f"{k}: {v}" for k, v in check.items() if k != EXACT)
    late = ""
    if run.get("history_check_at_end", check) != check:
        late = f" ({run['history_settled_s']:g}s after the run; not at its end)"
    return f"{exact}/{run['sessions']}" + (f" ({others})" if others else "") + late


def _cpu_lines(r: dict[str, Any]) -> list[str]:
    """CPU time per turn of each process in the 100-at-once run: where the cores go."""
    level = str(max((c for c, _ in _levels(r)), default=0))
    stacks = {
        name: (s["cpu_s"][level], s["throughput"][level]["turns_ok"])
        for name, s in r["stacks"].items()
        if level in s.get("cpu_s", {}) and s["throughput"][level]["turns_ok"]
    }
    if not stacks:
        return []
    lines = ["", f"## CPU per turn while {level} sessions run at once (ms of CPU per turn)", ""]
    lines += ["| process | " + " | ".join(stacks) + " |", "|---|" + "---:|" * len(stacks)]
    procs = sorted({p for cpu, _ in stacks.values() for p in cpu if p != "wall_s"})
    for p in procs:
        cells = [_f(cpu[p] * 1000 / ok, 2) if p in cpu else "-" for cpu, ok in stacks.values()]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    outside = {"bench-client", "fake-llm", "other processes", "wall_s"}
    totals = [
        sum(v for k, v in cpu.items() if k not in outside) * 1000 / ok
        for cpu, ok in stacks.values()
    ]
    lines.append("| **Switchboard total** | " + " | ".join(f"**{t:.2f}**" for t in totals) + " |")
    cpus = r["machine"]["cpu_count"] or 1
    lines += [
        "",
        f"{cpus} CPUs give {cpus * 1000} ms of CPU per second: at the Switchboard total above, "
        "the ceiling is "
        + ", ".join(
            f"{n}: {cpus * 1000 / t:.0f} turns/s" for n, t in zip(stacks, totals, strict=True)
        )
        + " even with a free client and model.",
    ]
    return lines


def _levels(r: dict[str, Any]) -> list[tuple[int, int]]:
    return [(lv["concurrent_sessions"], lv["sessions"]) for lv in r["config"]["levels"]]


def _process_lines(r: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Start-up and memory",
        "",
        "| stack | ready_s | ready_s (2nd start) | stop_s | restarts |",
    ]
    lines.append("|---|---:|---:|---:|---|")
    for name, s in r["stacks"].items():
        lines.append(
            f"| {name} | {_f(s.get('ready_s'))} | {_f(s.get('ready_s_warm'))} "
            f"| {_f(s.get('stop_s'))} | {s.get('restarts') or ''} |"
        )
    lines += ["", "RSS after the run, MiB (USS in brackets; postgres = postmaster + backends):", ""]
    stacks = {n: s["rss_mb"] for n, s in r["stacks"].items() if "rss_mb" in s}
    procs = sorted({p for rss in stacks.values() for p in rss})
    lines += ["| process | " + " | ".join(stacks) + " |", "|---|" + "---:|" * len(stacks)]
    for p in procs:
        cells = [
            f"{v['rss_mb']:.1f} ({v['uss_mb']:.1f})" if (v := rss.get(p)) else "-"
            for rss in stacks.values()
        ]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return lines


def _floor_lines(r: dict[str, Any]) -> list[str]:
    floors = r.get("floors", {})
    lines = ["", "## Floors on this machine, same run (ms)", ""]
    lines += ["| operation | n | p50 | p90 | p99 |", "|---|---:|---:|---:|---:|"]
    for name, s in floors.items():
        if isinstance(s, dict) and "p50" in s:
            lines.append(
                f"| {name} | {s['n']} | {_f(s['p50'], 3)} | {_f(s['p90'], 3)} | {_f(s['p99'], 3)} |"
            )
    if settings := floors.get("postgres_settings"):
        lines += ["", "PostgreSQL: " + ", ".join(f"{k}={v}" for k, v in settings.items())]
    return lines
