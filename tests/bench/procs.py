"""The processes a benchmark run starts: the fake model and `switchboard up` stacks.

Everything started here is stopped by the matching ``stop`` (call it in a ``finally``), by pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from switchboard.embedded import free_port
from tests.support.stack import Stack, start_stack, stop_stack

REPO = Path(__file__).resolve().parents[2]


@dataclass
class FakeModel:
    """``python -m tests.fakes.llm`` in its own process (its own GIL)."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def allow_bytecode() -> None:
    """Let the processes the benchmark starts cache their bytecode (drop PYTHONDONTWRITEBYTECODE
    from this process's environment, which they inherit). An installed Switchboard keeps its
    modules' ``.pyc`` files as any Python program does; with the variable set, as some
    sandboxes and CI images set it, every start compiled the ~260 modules of Switchboard's own
    packages again: measured on 2026-11-28, warm ready 4.7-5.7 s with it against 3.1-3.2 s
    without, on the same busy machine (docs/footprint.md)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def start_fake_model(
    script: str = "tool_then_text", timeout: float = 20.0, extra_args: Sequence[str] = ()
) -> FakeModel:
    """``extra_args``: more options of ``python -m tests.fakes.llm`` (``--tool my --args
    {...}``: the peers benchmark has nanobot call a tool of its own)."""
    port = free_port()
    argv = [sys.executable, "-m", "tests.fakes.llm", "--port", str(port), "--script", script]
    argv += extra_args
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # Ctrl-C reaches us; we stop it in order
    )
    fake = FakeModel(proc, port)
    announced = threading.Event()
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if len(lines) < 200:
                lines.append(line)
            if "fake LLM" in line:
                announced.set()

    threading.Thread(target=pump, name="fake-llm-output", daemon=True).start()
    try:
        if not announced.wait(timeout):
            raise RuntimeError(f"fake LLM did not start:\n{''.join(lines)}")
    except BaseException:
        fake.stop()
        raise
    return fake


def launch_stack(
    home: Path, fake: FakeModel, args: Sequence[str] = (), extra_env: dict[str, str] | None = None
) -> Stack:
    """`switchboard up` against the fake model; on any failure or Ctrl-C nothing stays running."""
    env = {
        "OPENAI_API_KEY": "bench-key",
        "OPENAI_BASE_URL": fake.openai_base_url,
        **(extra_env or {}),
    }
    try:
        stack = start_stack(home, env, timeout=90.0, args=args)
    except BaseException:
        _stop_launchers(home)
        raise
    return stack


def shutdown_stack(stack: Stack) -> list[int]:
    """Stop like Ctrl-C; SIGKILL (by pid) whatever of ours is still alive after that."""
    alive = stop_stack(stack)
    for pid in alive:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    return alive


def _stop_launchers(home: Path) -> None:
    """A `switchboard up` of ``home`` that we started but got no Stack for (start interrupted)."""
    mine = psutil.Process().children(recursive=False)
    for proc in mine:
        with contextlib.suppress(psutil.Error):
            cmdline = proc.cmdline()
            if "up" in cmdline and str(home) in cmdline:
                family = [proc, *proc.children(recursive=True)]
                proc.send_signal(signal.SIGINT)
                _, alive = psutil.wait_procs([proc], timeout=30)
                for p in [*alive, *family]:
                    with contextlib.suppress(psutil.Error):
                        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                            p.kill()


# --------------------------------------------------------------------------- introspection


def service_env(stack: Stack, instance: str, name: str) -> str:
    """An environment variable of a running service process (e.g. gateway-0's SB_NATS_URL)."""
    pid = stack.pids()[instance]
    value = psutil.Process(pid).environ().get(name, "")
    if not value:
        raise RuntimeError(f"{instance} (pid {pid}) has no {name} in its environment")
    return value


def _family(name: str, pid: int) -> list[psutil.Process]:
    """The process and its children; only itself for the launcher (the parent of everything)
    and for this benchmark process."""
    proc = psutil.Process(pid)
    if name in ("launcher", "bench-client"):
        return [proc]
    return [proc, *proc.children(recursive=True)]


def rss_mb(stack: Stack) -> dict[str, dict[str, float]]:
    """Per pid file: RSS and USS (MiB) of the process plus its children (postgres: postmaster
    and backends; RSS sums count shared memory once per process, USS does not)."""
    out: dict[str, dict[str, float]] = {}
    for name, pid in sorted(stack.pids().items()):
        rss = uss = 0
        procs = 0
        with contextlib.suppress(psutil.NoSuchProcess):
            for proc in _family(name, pid):
                with contextlib.suppress(psutil.Error):
                    info = proc.memory_full_info()
                    rss += info.rss
                    uss += info.uss
                    procs += 1
        out[name] = {
            "rss_mb": round(rss / 2**20, 1),
            "uss_mb": round(uss / 2**20, 1),
            "procs": procs,
        }
    return out


class CpuMeter:
    """CPU seconds (user+system) used by each stack process (with children) over an interval,
    plus this benchmark process, the fake model, and everything else on the machine (other
    programs compete for the same cores and make the figures worse)."""

    def __init__(self, stack: Stack, fake: FakeModel, reaped_children: bool = False) -> None:
        """``reaped_children``: also count children that exited and were waited for (the
        executor's sandboxed commands); without it their CPU shows as other processes'."""
        self.pids = {**stack.pids(), "fake-llm": fake.proc.pid, "bench-client": os.getpid()}
        self.reaped_children = reaped_children
        self.start_cpu = self._sample()
        self.start_busy = _machine_busy_s()
        self.start_wall = time.monotonic()

    def _sample(self) -> dict[str, float]:
        sample: dict[str, float] = {}
        for name, pid in self.pids.items():
            total = 0.0
            with contextlib.suppress(psutil.NoSuchProcess):
                for proc in _family(name, pid):
                    with contextlib.suppress(psutil.Error):
                        t = proc.cpu_times()
                        total += t.user + t.system
                        if self.reaped_children and name != "bench-client":
                            total += t.children_user + t.children_system
            sample[name] = total
        return sample

    def stop(self) -> dict[str, float]:
        """CPU seconds per process since construction, and ``wall_s``."""
        end = self._sample()
        used = {k: round(max(0.0, end[k] - self.start_cpu.get(k, 0.0)), 3) for k in end}
        busy = _machine_busy_s() - self.start_busy
        used["other processes"] = round(max(0.0, busy - sum(used.values())), 3)
        used["wall_s"] = round(time.monotonic() - self.start_wall, 3)
        return used


def _machine_busy_s() -> float:
    """CPU seconds all cores spent busy since boot."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


def wait_for_quiet(max_wait_s: float, busy_cores: float = 0.25) -> dict[str, float]:
    """Before a stack starts (nothing of ours busy): wait, at most ``max_wait_s``, until other
    programs keep fewer than ``busy_cores`` cores busy over a second; what was seen."""
    start = time.monotonic()
    while True:
        before = _machine_busy_s()
        time.sleep(1.0)
        busy = _machine_busy_s() - before
        waited = time.monotonic() - start
        if busy < busy_cores or waited >= max_wait_s:
            return {"busy_cores": round(busy, 2), "waited_s": round(waited, 1)}


# --------------------------------------------------------------------------- the whole stack

CORE = ("launcher", "nats", "postgres")  # pid files every embedded mode writes


def service_instances(stack: Stack) -> list[str]:
    """The pid files of service processes (``agent-0``...); none when the launcher hosts the
    services itself (``switchboard up`` without ``--processes``)."""
    return sorted(name for name in stack.pids() if name not in CORE)


def stack_processes(stack: Stack) -> dict[str, list[psutil.Process]]:
    """Every process of the stack, once, by the pid file it is found under: the launcher, each
    service process, nats-server, the PostgreSQL postmaster with all its backends and helpers
    (``postgres``); a process running for this home that none of them leads to: ``other``."""
    pids = {"launcher": stack.proc.pid, **stack.pids()}
    # The launcher last: nats-server (and, when the launcher became a subreaper, the
    # postmaster) are its children too, but belong to their own pid file.
    order = [*(n for n in pids if n not in CORE), "postgres", "nats", "launcher"]
    seen: set[int] = set()
    groups: dict[str, list[psutil.Process]] = {}
    for name in order:
        if name not in pids:  # the postmaster's pid file comes once PostgreSQL is up
            continue
        try:
            root = psutil.Process(pids[name])
            family = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        groups[name] = [p for p in family if p.pid not in seen]
        seen.update(p.pid for p in groups[name])
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["pid"] not in seen and str(stack.home) in cmdline:
            groups.setdefault("other", []).append(proc)
            seen.add(proc.info["pid"])
    return groups


def pss_mb(stack: Stack) -> dict[str, Any]:
    """PSS (MiB) summed over every process of the stack (:func:`stack_processes`), and per
    pid file. PSS charges each shared page to the processes mapping it in equal parts, so the
    sum counts PostgreSQL's shared buffers and the stack's libraries about once; pages also
    mapped by processes outside the stack (this benchmark and the fake model run the same
    Python and libraries) are partly charged to those. USS (private pages only: a floor) and
    RSS (shared pages once per process: a ceiling) are summed alongside."""
    by: dict[str, dict[str, float]] = {}
    total = {"pss": 0, "uss": 0, "rss": 0}
    count = 0
    for name, family in stack_processes(stack).items():
        mine = {"pss": 0, "uss": 0, "rss": 0}
        procs = 0
        for proc in family:
            with contextlib.suppress(psutil.Error):  # a backend may exit while we look
                info = proc.memory_full_info()
                mine = {k: v + getattr(info, k) for k, v in mine.items()}
                procs += 1
        by[name] = {"pss_mb": round(mine["pss"] / 2**20, 1), "procs": procs}
        total = {k: v + mine[k] for k, v in total.items()}
        count += procs
    return {
        "pss_mb": round(total["pss"] / 2**20, 1),
        "uss_mb": round(total["uss"] / 2**20, 1),
        "rss_mb": round(total["rss"] / 2**20, 1),
        "processes": count,
        "by_pid_file": by,
    }


def settle(stack: Stack, max_s: float = 10.0, cores: float = 0.1) -> float:
    """After ready: wait, at most ``max_s``, until the stack's processes together use fewer
    than ``cores`` cores over half a second (start-up work done); the seconds waited."""
    start = time.monotonic()

    def cpu() -> dict[int, float]:
        times: dict[int, float] = {}
        for family in stack_processes(stack).values():
            for proc in family:
                with contextlib.suppress(psutil.Error):
                    t = proc.cpu_times()
                    times[proc.pid] = t.user + t.system
        return times

    while True:
        before = cpu()
        time.sleep(0.5)
        after = cpu()
        used = sum(after[pid] - before[pid] for pid in after.keys() & before.keys())
        waited = time.monotonic() - start
        if used / 0.5 < cores or waited >= max_s:
            return round(waited, 1)
