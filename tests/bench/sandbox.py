"""Per-call sandbox overhead of ``exec``, in this process (no stack): ``echo ok`` through the
exec tool under the plain ProcessSandbox (the baseline), the LayeredSandbox without namespaces
(bubblewrap disabled by a bogus path: rlimits, uid drop, no_new_privs, seccomp, landlock, the
measuring inner Python) and the LayeredSandbox with bubblewrap namespaces, as the executor probes
it at start-up. Calls are interleaved round-robin so a busy machine hurts every variant alike.
Besides the wall time, the CPU this process spends per call (``time.process_time``: the
executor's own share -- spawn, wait, reaping, cgroup; not the sandboxed processes, whose orphans
this process does not reap, see below)."""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.registry import ToolContext, ToolRegistry
from switchboard_tools.sandbox import LayeredSandbox, ProcessSandbox, Sandbox, probe_layers
from switchboard_tools.workspace import ensure_workspace
from tests.bench.stats import summarize

COMMAND = "echo ok"
BASELINE = "process"
NO_NS = "layered, no namespaces"
WITH_NS = "layered + namespaces"
_SHOWN_LAYERS = ("no_new_privs", "seccomp", "landlock", "namespaces")


async def _variants() -> tuple[dict[str, Sandbox], dict[str, Any]]:
    """The sandboxes to compare, and the probe's verdicts (a layer that fails is left out)."""
    # probe_layers rather than probe_sandbox: the latter also makes this process a subreaper,
    # which the benchmark (parent of whole stacks) must not become.
    no_ns = await probe_layers(LayeredSandbox(), bwrap_path="/nonexistent/bwrap")
    with_ns = await probe_layers(LayeredSandbox())
    variants: dict[str, Sandbox] = {BASELINE: ProcessSandbox(), NO_NS: no_ns}
    probe = {NO_NS: dict(no_ns.layers.status), WITH_NS: dict(with_ns.layers.status)}
    if no_ns.layers.python is None:
        del variants[NO_NS]
    if with_ns.available()["namespaces"]:
        variants[WITH_NS] = with_ns
    return variants, probe


def _in_force(details: dict[str, Any]) -> list[str]:
    """The optional layers the call's isolation report says were in force."""
    iso = details.get("isolation") or {}
    shown = [k for k in _SHOWN_LAYERS if iso.get(k) is True]
    return [*shown, "no network"] if iso.get("network") is False else shown


def _f(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def sandbox_overhead(n: int, warmup: int = 5, time_cap_s: float = 120.0) -> dict[str, Any]:
    """``n`` timed ``exec`` calls per variant (after ``warmup`` each), in ms per call."""
    root = Path(tempfile.mkdtemp(prefix="sb-bench-sandbox-"))
    root.chmod(0o711)  # the sandbox's dropped uid must reach the workspace
    try:
        workspace = ensure_workspace(root / "workspaces", "bench")
        return asyncio.run(_measure(workspace, n, warmup, time_cap_s))
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _measure(workspace: Path, n: int, warmup: int, time_cap_s: float) -> dict[str, Any]:
    variants, probe = await _variants()
    registries: dict[str, ToolRegistry] = {k: builtin_registry(v) for k, v in variants.items()}
    times: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    errors: dict[str, Counter[str]] = {k: Counter() for k in variants}
    in_force: dict[str, list[str]] = {}
    args = json.dumps({"command": COMMAND})
    deadline = time.monotonic() + time_cap_s
    for i in range(warmup + n):
        if time.monotonic() > deadline:
            break
        for name, registry in registries.items():
            ctx = ToolContext("bench", "bench:sandbox", f"call-{i}", workspace, 20.0)
            start, cpu_start = time.perf_counter(), time.process_time()
            out = await registry.execute("exec", args, ctx)
            ms = (time.perf_counter() - start) * 1000
            cpu_ms = (time.process_time() - cpu_start) * 1000
            if out.is_error or out.content.strip() != "ok":
                errors[name][out.content.strip()[:120]] += 1
                continue
            in_force.setdefault(name, _in_force(out.details))
            if i >= warmup:
                times[name].append(ms)
                cpu[name].append(cpu_ms)
    per_call = {name: summarize(ms) for name, ms in times.items()}
    base = per_call[BASELINE]
    return {
        "command": COMMAND,
        "per_call_ms": per_call,
        "executor_cpu_ms": {name: summarize(ms) for name, ms in cpu.items()},
        "overhead_vs_process_ms": {
            name: {"p50": round(v["p50"] - base["p50"], 3), "p99": round(v["p99"] - base["p99"], 3)}
            for name, v in per_call.items()
            if name != BASELINE
        },
        "in_force": in_force,
        "errors": {name: dict(c) for name, c in errors.items() if c},
        "probe": probe,
    }


def markdown(s: dict[str, Any]) -> list[str]:
    """The sandbox section of latest.md."""
    lines = [
        "",
        f"## Sandbox overhead per exec call (`{s['command']}`, in process, ms)",
        "",
        "The exec tool end to end (argument checks, spawn, wait, collect) under each sandbox; "
        "overhead = minus the plain process sandbox at the same percentile; executor CPU = this "
        "process's CPU per call (not the sandboxed processes').",
        "",
        "| sandbox | layers measured in force | n | p50 | p90 | p99 | overhead p50 | overhead p99 "
        "| executor CPU p50 | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, v in s["per_call_ms"].items():
        over = s["overhead_vs_process_ms"].get(name, {})
        layers = ", ".join(s["in_force"].get(name, []))
        errors = sum(s["errors"].get(name, {}).values())
        cpu = s.get("executor_cpu_ms", {}).get(name, {}).get("p50")
        lines.append(
            f"| {name} | {layers or '-'} | {v['n']} | {_f(v['p50'])} | {_f(v['p90'])} "
            f"| {_f(v['p99'])} | {_f(over.get('p50'))} | {_f(over.get('p99'))} | {_f(cpu)} "
            f"| {errors or ''} |"
        )
    if (ns := s["probe"].get(WITH_NS, {}).get("namespaces", "ok")) != "ok":
        lines += ["", f"No namespaces variant: the bubblewrap probe said {ns}."]
    return lines
