"""Per-call sandbox overhead of ``exec``, in this process (no stack): ``echo ok`` through the
exec tool under the plain ProcessSandbox (the baseline), the LayeredSandbox without namespaces
(bubblewrap disabled by a bogus path: rlimits, uid drop, no_new_privs, seccomp, landlock, the
measuring inner Python) and the LayeredSandbox with bubblewrap namespaces, as the executor probes
it at start-up, with the Python wrapper and (when built) the compiled one
(``switchboard_tools.sandbox.native``). Calls are interleaved round-robin so a busy machine hurts
every variant alike.
Besides the wall time, the CPU this process spends per call (``time.process_time``: the
executor's own share -- spawn, wait, reaping, cgroup; not the sandboxed processes, whose orphans
this process does not reap, see below).

Alone, ``python -m tests.bench.sandbox --rounds 3 --calls 40`` compares the wrappers on the whole
CPU of a call as the executor pays it in production: this process becomes the subreaper (as the
executor does), runs each wrapper's calls in a block, waits for every delayed orphan reap, and
counts its own CPU plus all it reaped; blocks alternate wrappers from round to round, and each
line carries the load average (the machine may be shared). With ``--alone``, the wrappers
themselves: each run directly (no executor, no bubblewrap) with seccomp and Landlock and ``true``
as the command, the CPU of all this process reaped per run (the spawn included)."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.registry import ToolContext, ToolRegistry
from switchboard_tools.sandbox import LayeredSandbox, ProcessSandbox, Sandbox, native, probe_layers
from switchboard_tools.sandbox.launch import DEV_FILES, INNER_SOURCE, SYSTEM_RO
from switchboard_tools.sandbox.orphans import become_subreaper, reap_orphans
from switchboard_tools.sandbox.probe import Wrapper
from switchboard_tools.workspace import ensure_workspace
from tests.bench.stats import summarize

COMMAND = "echo ok"
BASELINE = "process"
NO_NS = "layered, no namespaces"
WITH_NS = "layered + namespaces"
WITH_NS_NATIVE = "layered + namespaces, compiled wrapper"
_SHOWN_LAYERS = ("no_new_privs", "seccomp", "landlock", "namespaces")


async def _variants() -> tuple[dict[str, Sandbox], dict[str, Any]]:
    """The sandboxes to compare, and the probe's verdicts (a layer that fails is left out)."""
    # probe_layers rather than probe_sandbox: the latter also makes this process a subreaper,
    # which the benchmark (parent of whole stacks) must not become.
    no_ns = await probe_layers(LayeredSandbox(), "/nonexistent/bwrap", wrapper="python")
    with_ns = await probe_layers(LayeredSandbox(), wrapper="python")
    variants: dict[str, Sandbox] = {BASELINE: ProcessSandbox(), NO_NS: no_ns}
    probe = {NO_NS: dict(no_ns.layers.status), WITH_NS: dict(with_ns.layers.status)}
    if no_ns.layers.python is None:
        del variants[NO_NS]
    if with_ns.available()["namespaces"]:
        variants[WITH_NS] = with_ns
    if native.find() is not None:
        compiled = await probe_layers(LayeredSandbox(), wrapper="native")
        probe[WITH_NS_NATIVE] = dict(compiled.layers.status)
        if compiled.layers.wrapper == "native" and compiled.available()["namespaces"]:
            variants[WITH_NS_NATIVE] = compiled
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


# --------------------------------------------------------------------------- alone: wrappers

# The orphan reaps a call asks for run up to 10 s after it (sandbox/coalesce.py): wait them out.
_REAPS_DONE_S = 11.0


def _cpu_s() -> tuple[float, float]:
    """CPU seconds of this process, and of every child it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime


async def _block(registry: ToolRegistry, workspace: Path, n: int) -> dict[str, Any]:
    """``n`` calls in a row; CPU per call of this process and of all it reaped (after the
    delayed reaps ran)."""
    args = json.dumps({"command": COMMAND})
    own0, reaped0 = _cpu_s()
    load = os.getloadavg()[0]
    wall: list[float] = []
    errors: Counter[str] = Counter()
    for i in range(n):
        ctx = ToolContext("bench", "bench:sandbox", f"call-{i}", workspace, 20.0)
        start = time.perf_counter()
        out = await registry.execute("exec", args, ctx)
        wall.append((time.perf_counter() - start) * 1000)
        if out.is_error or out.content.strip() != "ok":
            errors[out.content.strip()[:120]] += 1
    await asyncio.sleep(_REAPS_DONE_S)
    reap_orphans()
    own1, reaped1 = _cpu_s()
    return {
        "n": n,
        "wall_p50_ms": round(statistics.median(wall), 1),
        "executor_cpu_ms": round((own1 - own0) * 1000 / n, 1),
        "reaped_cpu_ms": round((reaped1 - reaped0) * 1000 / n, 1),
        "total_cpu_ms": round((own1 - own0 + reaped1 - reaped0) * 1000 / n, 1),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "errors": dict(errors),
    }


async def compare_wrappers(
    workspace: Path, wrappers: list[Wrapper], rounds: int, calls: int, warmup: int
) -> list[dict[str, Any]]:
    """Blocks of ``calls`` per wrapper (every layer, namespaces included), alternating the
    order from round to round."""
    registries = {}
    for wrapper in wrappers:
        sandbox = await probe_layers(LayeredSandbox(), wrapper=wrapper)
        if sandbox.layers.wrapper != wrapper:
            raise SystemExit(f"the {wrapper} wrapper does not run here: {sandbox.layers.status}")
        registries[wrapper] = builtin_registry(sandbox)
        await _block(registries[wrapper], workspace, warmup)
    rows = []
    for r in range(rounds):
        order = wrappers if r % 2 == 0 else wrappers[::-1]
        for wrapper in order:
            row = {
                "round": r + 1,
                "wrapper": wrapper,
                **await _block(registries[wrapper], workspace, calls),
            }
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def _alone_once(wrapper: Wrapper) -> None:
    """One run of ``wrapper`` by itself, as the executor would start it minus bubblewrap."""
    read, write = os.pipe()
    cfg = {
        "report_fd": write,
        "seccomp": True,
        "landlock": True,
        "network": False,
        "ro": list(SYSTEM_RO),
        "rw": ["/tmp"],
        "dev": list(DEV_FILES),
        "require": ["landlock", "no_new_privs", "seccomp"],
        "host_cgroupns": os.stat("/proc/self/ns/cgroup").st_ino,
        "host_net": os.stat("/proc/self/ns/net").st_ino,
    }
    if wrapper == "native":
        argv = [str(native.default_path()), *native.wrapper_args(cfg, ["true"])]
    else:
        argv = ["/usr/bin/python3", "-I", "-S", "-c", INNER_SOURCE, json.dumps(cfg), "true"]
    try:
        done = subprocess.run(
            argv, pass_fds=(write,), capture_output=True, check=False, preexec_fn=_no_new_privs
        )
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as report:
        ok = json.loads(report.read() or b"{}").get("ok")
    if done.returncode != 0 or not ok:
        raise SystemExit(f"the {wrapper} wrapper failed: {done.stderr.decode()[-300:]}")


def _no_new_privs() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def wrappers_alone(wrappers: list[Wrapper], rounds: int, calls: int) -> list[dict[str, Any]]:
    """Blocks of ``calls`` runs per wrapper, alternating the order from round to round."""
    rows = []
    for r in range(rounds):
        for wrapper in wrappers if r % 2 == 0 else wrappers[::-1]:
            own0, reaped0 = _cpu_s()
            load = os.getloadavg()[0]
            wall = []
            for _ in range(calls):
                start = time.perf_counter()
                _alone_once(wrapper)
                wall.append((time.perf_counter() - start) * 1000)
            time.sleep(1.5)  # the seccomp supervisors exit within a second of their command
            reap_orphans()
            own1, reaped1 = _cpu_s()
            row = {
                "round": r + 1,
                "wrapper": wrapper,
                "n": calls,
                "wall_p50_ms": round(statistics.median(wall), 1),
                "executor_cpu_ms": round((own1 - own0) * 1000 / calls, 1),
                "reaped_cpu_ms": round((reaped1 - reaped0) * 1000 / calls, 1),
                "total_cpu_ms": round((own1 - own0 + reaped1 - reaped0) * 1000 / calls, 1),
                "load_before": round(load, 2),
                "load_after": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.sandbox", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40, help="calls per block")
    parser.add_argument("--warmup", type=int, default=5, help="calls per wrapper first")
    parser.add_argument("--wrappers", default="python,native", help="comma-separated")
    parser.add_argument("--alone", action="store_true", help="the wrappers alone (see above)")
    args = parser.parse_args(argv)
    become_subreaper()  # as the executor: every orphan's CPU is then reaped, and counted, here
    wrappers: list[Wrapper] = []
    for name in (w.strip() for w in args.wrappers.split(",") if w.strip()):
        if name not in ("python", "native"):
            parser.error(f"unknown wrapper {name!r}: python or native")
        wrappers.append("native" if name == "native" else "python")
    if args.alone:
        rows = wrappers_alone(wrappers, args.rounds, args.calls)
    else:
        root = Path(tempfile.mkdtemp(prefix="sb-bench-wrappers-"))
        root.chmod(0o711)  # the sandbox's dropped uid must reach the workspace
        try:
            workspace = ensure_workspace(root / "workspaces", "bench")
            rows = asyncio.run(
                compare_wrappers(workspace, wrappers, args.rounds, args.calls, args.warmup)
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(
        "| round | wrapper | calls | wall p50 ms | executor CPU ms | reaped CPU ms "
        "| total CPU ms/call | load avg |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row['round']} | {row['wrapper']} | {row['n']} | {row['wall_p50_ms']} "
            f"| {row['executor_cpu_ms']} | {row['reaped_cpu_ms']} | {row['total_cpu_ms']} "
            f"| {row['load_before']}-{row['load_after']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
