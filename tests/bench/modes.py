"""The embedded modes side by side (``modes`` in latest.json), to choose the default with figures:
`switchboard up` (``one-process``: every service in the launcher's process, each with its own
runtime) and `switchboard up --processes` (``processes``: one process per service), one agent
each, each on a fresh home, the same phases in the same order:

- ``ready_s_cold``: the first start (initdb); ``ready_s_warm``: the median of
  ``plan.warm_starts`` later starts of the same home (``ready_s_warm_all``: each of them);
- ``pss_mb_idle``: PSS (MiB) summed over every process of the stack (launcher, service
  processes, nats-server, the PostgreSQL postmaster and all its backends) once it is idle after
  ready; ``pss_mb_loaded``: the same right after the throughput runs; ``processes``: how many
  processes that is (idle);
- ``turn_p50_ms`` / ``turn_p99_ms``: sequential turns in fresh sessions with the instant fake
  model (as the ``agent=N`` stacks' ``turn_overhead_ms``);
- ``turns_per_s``: at each throughput level (``"1"``, ``"10"``, ``"100"`` sessions at once).

``modes_baseline``: the same figures from an earlier run's latest.json (by default the one this
run replaces), labelled with that run's git state.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

from tests.bench import load, procs
from tests.bench.run import Plan, Say, _restarts, _stop, _throughput, fresh_home
from tests.bench.stats import shifted, summarize
from tests.support.stack import Stack

MODES: dict[str, tuple[str, ...]] = {"one-process": (), "processes": ("--processes",)}
TAGS = {"one-process": "m1", "processes": "mp"}
# Issue 25's targets: one-process unless said (every process of the stack, NATS and PostgreSQL
# with it).
PSS_TARGET_MB = 160.0  # idle after ready
PSS_LOADED_TARGET_MB = 220.0  # right after the throughput runs
PSS_PROCESSES_TARGET_MB = 450.0  # one process per service, idle
READY_WARM_TARGET_S = 1.2  # a later start of the same home
READY_COLD_TARGET_S = 2.5  # the first start (initdb)
TURN_P50_TARGET_MS = 10.0
CPU_PER_TURN_TARGET_MS = 10.0  # at 100 sessions at once
CPU_LEVEL = "100"
NO_REGRESSION = 1.10  # one-process turn time <= this x processes' (the run-to-run noise)
OUTSIDE = {"bench-client", "fake-llm", "other processes", "wall_s"}  # not Switchboard's CPU


def bench_modes(plan: Plan, fake: procs.FakeModel, model_ms: float, say: Say) -> dict[str, Any]:
    """Every mode of :data:`MODES`; a mode that fails keeps what it measured and its error."""
    out: dict[str, Any] = {}
    for mode, args in MODES.items():
        out[mode] = entry = _empty(args)
        started = time.monotonic()
        try:
            _mode(plan, fake, mode, model_ms, entry, say)
        except Exception as exc:  # recorded, not raised: the other figures are measured
            say(f"[{mode}] failed: {exc!r}")
            entry["error"] = repr(exc)[:500]
        entry["wall_s"] = round(time.monotonic() - started, 1)  # the whole mode, warm starts too
    return out


def _empty(args: tuple[str, ...]) -> dict[str, Any]:
    """The headline figures first (None until measured), then the details."""
    return {
        "args": list(args),
        "ready_s_cold": None,
        "ready_s_warm": None,
        "pss_mb_idle": None,
        "pss_mb_loaded": None,
        "processes": None,
        "turn_p50_ms": None,
        "turn_p99_ms": None,
        "turns_per_s": {},
        "cpu_ms_per_turn": {},
        "cpu_s": {},
    }


def _mode(
    plan: Plan, fake: procs.FakeModel, mode: str, model_ms: float, out: dict[str, Any], say: Say
) -> None:
    args = MODES[mode]
    with fresh_home() as home:
        out["quiet_check"] = quiet = procs.wait_for_quiet(plan.quiet_wait_s)
        if quiet["busy_cores"] >= 0.25:
            say(f"[{mode}] other programs keep {quiet['busy_cores']} cores busy; going on anyway")
        say(f"[{mode}] starting the stack: {' '.join(('switchboard up', *args))}")
        stack = procs.launch_stack(home, fake, args)
        try:
            out["ready_s_cold"] = round(stack.ready_s, 2)
            out["service_processes"] = _check_mode(mode, procs.service_instances(stack))
            out["settle_s"] = procs.settle(stack, plan.settle_s)
            out["pss_idle"] = idle = procs.pss_mb(stack)
            out["pss_mb_idle"], out["processes"] = idle["pss_mb"], idle["processes"]
            say(
                f"[{mode}] ready in {stack.ready_s:.1f}s; idle: PSS {idle['pss_mb']:.1f} MiB "
                f"in {idle['processes']} processes ({_split(idle)})"
            )
            pids = stack.pids()
            _sequential(plan, stack, fake, mode, model_ms, out, say)
            _throughput(plan, stack, fake, TAGS[mode], out, say)
            out["turns_per_s"] = {k: t["turns_per_s"] for k, t in out["throughput"].items()}
            out["cpu_ms_per_turn"] = {
                k: _cpu_ms(out["cpu_s"][k], t["turns_ok"]) for k, t in out["throughput"].items()
            }
            phases = out["cpu_s"].values()
            wall = sum(c["wall_s"] for c in phases)
            out["other_cores"] = round(sum(c["other processes"] for c in phases) / wall, 2)
            out["pss_loaded"] = loaded = procs.pss_mb(stack)
            out["pss_mb_loaded"] = loaded["pss_mb"]
            out["processes_loaded"] = loaded["processes"]
            say(
                f"[{mode}] after the load: PSS {loaded['pss_mb']:.1f} MiB "
                f"in {loaded['processes']} processes ({_split(loaded)})"
            )
            out["restarts"] = _restarts(pids, stack.pids())
        finally:
            _stop(stack, out)
        _warm_starts(plan, fake, home, mode, out, say)


def _check_mode(mode: str, services: list[str]) -> list[str]:
    """The service pid files must match the mode (no figures under the wrong label)."""
    if (mode == "one-process") == bool(services):
        raise RuntimeError(f"not in {mode} mode: the stack has service processes {services}")
    return services


def _sequential(
    plan: Plan,
    stack: Stack,
    fake: procs.FakeModel,
    mode: str,
    model_ms: float,
    out: dict[str, Any],
    say: Say,
) -> None:
    """Turn latency one turn at a time (fresh sessions), as the agent=N stacks measure it."""
    say(f"[{mode}] {plan.sequential_turns} sequential turns")
    meter = procs.CpuMeter(stack, fake)
    seq = load.sequential_turns(stack, plan.sequential_turns, tag=TAGS[mode])
    out["cpu_s"]["sequential"] = meter.stop()
    out["turn_overhead_ms"] = turn = summarize(seq.ok_ms)
    out["platform_overhead_ms"] = shifted(turn, model_ms)
    out["sequential_errors"] = seq.errors
    out["turn_p50_ms"], out["turn_p99_ms"] = turn["p50"], turn["p99"]
    say(f"[{mode}]   p50 {turn['p50']:.1f} ms, p99 {turn['p99']:.1f} ms, errors {seq.errors}")


def _warm_starts(
    plan: Plan, fake: procs.FakeModel, home: Path, mode: str, out: dict[str, Any], say: Say
) -> None:
    """Start the same home again (no initdb, warm caches), ``plan.warm_starts`` times; the
    first of them also gives the idle PSS of a warm start."""
    ready: list[float] = []
    out["ready_s_warm_all"] = ready
    out["quiet_check_warm"] = checks = []
    for i in range(plan.warm_starts):
        # The full wait before the first; between starts only our own stack was busy.
        checks.append(
            procs.wait_for_quiet(plan.quiet_wait_s if i == 0 else min(10.0, plan.quiet_wait_s))
        )
        warm = procs.launch_stack(home, fake, MODES[mode])
        try:
            ready.append(round(warm.ready_s, 2))
            if i == 0:
                procs.settle(warm, plan.settle_s)
                out["pss_mb_idle_warm"] = procs.pss_mb(warm)["pss_mb"]
        finally:
            if left := procs.shutdown_stack(warm):
                out.setdefault("killed_after_warm_stop", []).extend(left)
    out["ready_s_warm"] = round(statistics.median(ready), 2) if ready else None
    say(f"[{mode}] warm starts: ready in {', '.join(f'{s:.2f}' for s in ready)} s")


def _cpu_ms(cpu: dict[str, float], turns_ok: int) -> float | None:
    """Switchboard's CPU (every stack process) per successful turn, in ms."""
    if not turns_ok:
        return None
    return round(sum(v for k, v in cpu.items() if k not in OUTSIDE) * 1000 / turns_ok, 2)


def _split(pss: dict[str, Any]) -> str:
    """'launcher 95.1, nats 9.8, postgres 41.0 MiB' (service processes summed)."""
    parts: dict[str, float] = {}
    for name, v in pss["by_pid_file"].items():
        key = name if name in procs.CORE or name == "other" else "service processes"
        parts[key] = parts.get(key, 0.0) + v["pss_mb"]
    return ", ".join(f"{k} {v:.1f}" for k, v in parts.items()) + " MiB"


# --------------------------------------------------------------------------- baseline

FIGURES = (
    "ready_s_cold",
    "ready_s_warm",
    "pss_mb_idle",
    "pss_mb_loaded",
    "processes",
    "turn_p50_ms",
    "turn_p99_ms",
    "turns_per_s",
)


def baseline(path: Path) -> dict[str, Any] | None:
    """The figures of an earlier run (its latest.json) to compare with, labelled with its git
    state; runs from before the ``modes`` section give their ``agent=1`` stack, which ran one
    process per service (no PSS then: those rows show '-')."""
    try:
        r = json.loads(path.read_text())
        git = r["git"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    rows: dict[str, dict[str, Any]] = {}
    for mode, m in (r.get("modes") or {}).items():
        if isinstance(m, dict) and "error" not in m:
            rows[mode] = {k: m.get(k) for k in FIGURES}
    one = r.get("stacks", {}).get("agent=1")
    if not rows and isinstance(one, dict) and "turn_overhead_ms" in one:
        rows["processes (agent=1)"] = {
            "ready_s_cold": one.get("ready_s"),
            "ready_s_warm": one.get("ready_s_warm"),
            "pss_mb_idle": None,
            "pss_mb_loaded": None,
            "processes": None,  # counted after the load then, not idle
            "turn_p50_ms": one["turn_overhead_ms"].get("p50"),
            "turn_p99_ms": one["turn_overhead_ms"].get("p99"),
            "turns_per_s": {k: t["turns_per_s"] for k, t in one.get("throughput", {}).items()},
        }
    if not rows:
        return None
    changes = len(git.get("uncommitted_changes", []))
    label = f"{git.get('commit', '')[:10] or '?'}" + (f"+{changes} uncommitted" if changes else "")
    return {
        "source": str(path),
        "timestamp": r.get("timestamp"),
        "quick": bool(r.get("config", {}).get("quick")),
        "git": {"commit": git.get("commit"), "uncommitted_changes": changes},
        "label": label,
        "rows": rows,
    }


# --------------------------------------------------------------------------- targets


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def targets(modes: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets for the default mode: figure key, target text, measured value,
    verdict ("PASS"/"MISS"/"n/a") and how the value is shown."""
    one, many = modes.get("one-process", {}), modes.get("processes", {})
    rows: list[dict[str, Any]] = []

    def row(key: str, name: str, target: str, value: float, ok: bool, shown: str) -> None:
        verdict = "n/a" if math.isnan(value) else ("PASS" if ok else "MISS")
        rows.append(
            {
                "key": key,
                "figure": name,
                "target": target,
                "measured": "-" if math.isnan(value) else shown,
                "verdict": verdict,
            }
        )

    def at_most(key: str, name: str, value: float, limit: float, unit: str, digits: int) -> None:
        row(key, name, f"<= {limit:g} {unit}", value, value <= limit, f"{value:.{digits}f} {unit}")

    at_most(
        "pss_mb_idle",
        "one-process PSS idle, with NATS and PostgreSQL",
        _num(one.get("pss_mb_idle")),
        PSS_TARGET_MB,
        "MiB",
        1,
    )
    at_most(
        "pss_mb_loaded",
        "one-process PSS after the load runs",
        _num(one.get("pss_mb_loaded")),
        PSS_LOADED_TARGET_MB,
        "MiB",
        1,
    )
    at_most(
        "",
        "processes mode (one per service) PSS idle",
        _num(many.get("pss_mb_idle")),
        PSS_PROCESSES_TARGET_MB,
        "MiB",
        1,
    )
    at_most(
        "ready_s_warm",
        "one-process ready_s, warm (2nd start of the home)",
        _num(one.get("ready_s_warm")),
        READY_WARM_TARGET_S,
        "s",
        2,
    )
    at_most(
        "ready_s_cold",
        "one-process ready_s, cold (fresh home, initdb)",
        _num(one.get("ready_s_cold")),
        READY_COLD_TARGET_S,
        "s",
        2,
    )
    at_most(
        "",
        "one-process turn p50 (sequential, instant model)",
        _num(one.get("turn_p50_ms")),
        TURN_P50_TARGET_MS,
        "ms",
        1,
    )
    at_most(
        "",
        f"one-process CPU per turn, {CPU_LEVEL} sessions at once",
        _num((one.get("cpu_ms_per_turn") or {}).get(CPU_LEVEL)),
        CPU_PER_TURN_TARGET_MS,
        "ms",
        2,
    )
    for key, what in (("turn_p50_ms", "p50"), ("turn_p99_ms", "p99")):
        a, b = _num(one.get(key)), _num(many.get(key))
        ratio = a / b if b > 0 else math.nan
        row(
            key,
            f"one-process turn {what} vs processes (no regression)",
            f"<= {NO_REGRESSION:.2f}x",
            ratio,
            ratio <= NO_REGRESSION,
            f"{ratio:.2f}x ({a:.1f} vs {b:.1f} ms)",
        )
    runs = [
        (f"{mode}@{level}", run)
        for mode, m in modes.items()
        for level, run in m.get("throughput", {}).items()
    ]
    bad = [n for n, run in runs if run["errors"] or set(run["history_check"]) != {load.EXACT}]
    failed = [mode for mode, m in modes.items() if "error" in m]
    rows.append(
        {
            "key": "",
            "figure": "every turn answered exactly once (mode comparison runs)",
            "target": "no errors, transcripts exact",
            "measured": f"{len(runs) - len(bad)}/{len(runs)} runs clean"
            + (f" ({', '.join(failed + bad)})" if failed or bad else ""),
            "verdict": "n/a" if not runs else ("PASS" if not (bad or failed) else "MISS"),
        }
    )
    return rows


# --------------------------------------------------------------------------- latest.md


def _f(value: Any, digits: int) -> str:
    if not isinstance(value, int | float) or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _get(m: dict[str, Any], key: str) -> Any:
    """``turns_per_s.100`` -> ``m["turns_per_s"]["100"]``."""
    value: Any = m
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def markdown(r: dict[str, Any]) -> list[str]:
    """The modes section of latest.md: one row per figure, the modes side by side."""
    modes: dict[str, Any] = r.get("modes") or {}
    if not modes:
        return []
    levels = [str(lv["concurrent_sessions"]) for lv in r["config"]["levels"]]
    warm_n = r["config"].get("warm_starts", "")
    figures: list[tuple[str, str, int]] = [
        ("ready_s_cold", "ready s, cold (fresh home, initdb)", 2),
        ("ready_s_warm", f"ready s, warm (same home again, median of {warm_n})", 2),
        ("pss_mb_idle", "PSS MiB, idle after ready (every process)", 1),
        ("pss_mb_loaded", "PSS MiB, after the throughput runs", 1),
        ("processes", "processes (idle)", 0),
        ("turn_p50_ms", "turn p50 ms (sequential)", 1),
        ("turn_p99_ms", "turn p99 ms (sequential)", 1),
        *((f"turns_per_s.{lv}", f"turns/s, {lv} at once", 1) for lv in levels),
        *(
            (f"cpu_ms_per_turn.{lv}", f"Switchboard CPU ms per turn, {lv} at once", 2)
            for lv in levels[-1:]
        ),
        ("other_cores", "other programs during the turns, cores busy (noise)", 2),
    ]
    base = r.get("modes_baseline")
    base_rows: dict[str, Any] = base["rows"] if base else {}
    verdicts = {t["key"]: t for t in targets(modes) if t["key"]}
    g = r["git"]
    dirty = len(g["uncommitted_changes"])
    state = f"commit {g['commit'][:10]}" + (f" + {dirty} uncommitted change(s)" if dirty else "")
    lines = [
        "",
        "## Embedded modes: one process vs one process per service (1 agent)",
        "",
        f"This run ({state}): `switchboard up` (**one-process**: every service in the "
        "launcher's process) and `switchboard up --processes` (**processes**), each on a fresh "
        "home, the same phases in the same order. PSS = proportional set size summed over every "
        "process of the stack (launcher, service processes, nats-server, PostgreSQL postmaster "
        "and all its backends): each shared page counts about once (pages the benchmark client "
        "and the fake model map too are partly charged to them); USS (private pages: a floor) "
        "and RSS (shared pages once per process: a ceiling) summed below the table. Turn "
        "figures as in *Turn latency* (instant fake model), turns/s as in *Throughput*.",
        "",
    ]
    header = ["figure", *modes, "one-process / processes", "target (one-process)", "verdict"]
    header += [f"{name} @ {base['label']}" for name in base_rows] if base else []
    lines += [
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(modes) + 1) + "---|---|" + "---:|" * len(base_rows),
    ]
    one, many = modes.get("one-process", {}), modes.get("processes", {})
    for key, name, digits in figures:
        a, b = _num(_get(one, key)), _num(_get(many, key))
        t = verdicts.get(key, {})
        cells = [
            name,
            *(_f(_get(m, key), digits) for m in modes.values()),
            f"{a / b:.2f}x" if b > 0 and not math.isnan(a) else "-",
            t.get("target", ""),
            t.get("verdict", ""),
            *(_f(_get(row, key), digits) for row in base_rows.values()),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for mode, m in modes.items():
        notes = [
            f"{what} {_split(pss)} ({pss['processes']} processes; USS {pss['uss_mb']:.1f}, "
            f"RSS {pss['rss_mb']:.1f} MiB)"
            for what in ("idle", "loaded")
            if (pss := m.get(f"pss_{what}"))
        ]
        if m.get("ready_s_warm_all"):
            notes.append(f"warm starts {', '.join(f'{s:.2f}' for s in m['ready_s_warm_all'])} s")
        if "pss_mb_idle_warm" in m:
            notes.append(f"idle PSS after a warm start {m['pss_mb_idle_warm']:.1f} MiB")
        if notes:
            lines.append(f"- {mode}: " + "; ".join(notes))
        if "error" in m:
            lines.append(f"- **{mode} failed:** {m['error']}")
    if base:
        lines += [
            "",
            f"Comparison column(s): the run of {base['timestamp']} at {base['label']} "
            f"({base['source']}{', --quick' if base['quick'] else ''}).",
        ]
    return lines
