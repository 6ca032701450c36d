"""Service processes of embedded mode: spawn, restart with backoff, stop cleanly.

Each process runs in its own session (so Ctrl-C reaches only the launcher, and a stop signal
reaches the whole process group, grandchildren included), writes to its own log file, and has a
pid file in ``$SB_HOME/run`` while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from switchboard import registry
from switchboard.cli.home import Home, remove_pid, write_pid
from switchboard.embedded import free_port
from switchboard.host import Backoff


@dataclass(frozen=True)
class ServiceSpec:
    """One service of the registry and how many processes of it to run."""

    service: registry.Service
    scale: int = 1

    @property
    def name(self) -> str:
        return self.service.name


@dataclass
class Instance:
    """One process of a service (``<service>-<i>``), its environment and restart history."""

    name: str
    service: registry.Service
    env: dict[str, str]
    log_file: Path
    pid_file: Path
    backoff: Backoff
    proc: asyncio.subprocess.Process | None = None
    starts: list[float] = field(default_factory=list)  # monotonic time of every spawn

    @property
    def argv(self) -> list[str]:
        return [sys.executable, "-m", self.service.module]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def restarts(self) -> int:
        return max(0, len(self.starts) - 1)


def plan_instances(
    specs: Sequence[ServiceSpec],
    common_env: Mapping[str, str],
    home: Home,
    backoff: Backoff,
    reserved_ports: Iterable[int] = (),
) -> list[Instance]:
    """One Instance per process (``<service>-<i>``) with its environment, log and pid file.

    Each gets SB_INSTANCE, OTEL_SERVICE_NAME and a free port for every port of its service
    (its ops server, its gRPC server...) but the public ones, which ``common_env`` sets; they
    stay across restarts. Every instance learns where each gRPC service's instances listen
    (``SB_<SERVICE>_ADDR``, comma-separated).
    """
    used = set(reserved_ports)

    def port() -> int:
        while (p := free_port()) in used:
            pass
        used.add(p)
        return p

    instances = []
    for spec in specs:
        for i in range(spec.scale):
            name = f"{spec.name}-{i}"
            env = {**common_env, "SB_INSTANCE": name}
            env["OTEL_SERVICE_NAME"] = spec.service.otel_name
            env.update({p.setting: str(port()) for p in spec.service.ports if not p.public})
            log, pid = home.logs_dir / f"{name}.log", home.pid_file(name)
            instances.append(Instance(name, spec.service, env, log, pid, replace(backoff)))
    addresses: dict[str, list[str]] = {}
    for inst in instances:
        grpc = inst.service.port("grpc")
        if grpc is not None:
            addresses.setdefault(inst.service.addr_setting, []).append(
                f"127.0.0.1:{inst.env[grpc.setting]}"
            )
    for inst in instances:
        inst.env.update({setting: ",".join(addrs) for setting, addrs in addresses.items()})
    return instances


def start_line(inst: Instance) -> str:
    """The line a (re)start adds to the instance's log, shaped like the service's own lines."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    line = {
        "ts": stamp,
        "level": "INFO",
        "service": inst.service.name,
        "logger": "switchboard.supervisor",
        "msg": f"starting {inst.name}",
    }
    return json.dumps(line) + "\n"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "could not be started"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class Supervisor:
    """Runs the instances; restarts one that exits unexpectedly; stops them all on request."""

    def __init__(
        self, instances: Sequence[Instance], *, stop_timeout: float = 5.0, err: TextIO | None = None
    ) -> None:
        self.instances = list(instances)
        self.stop_timeout = stop_timeout
        self._err = err or sys.stderr
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def say(self, message: str) -> None:
        print(f"switchboard: {message}", file=self._err, flush=True)

    def pids(self) -> dict[str, int]:
        return {i.name: i.pid for i in self.instances if i.pid is not None}

    async def start(self) -> None:
        """Spawn every instance, then watch them."""
        for inst in self.instances:
            await self._spawn(inst)
        self._tasks = [
            asyncio.create_task(self._watch(inst), name=f"watch-{inst.name}")
            for inst in self.instances
        ]

    async def _spawn(self, inst: Instance) -> None:
        inst.starts.append(time.monotonic())
        inst.log_file.parent.mkdir(parents=True, exist_ok=True)
        with inst.log_file.open("ab") as log:
            log.write(start_line(inst).encode())
            log.flush()
            try:
                inst.proc = await asyncio.create_subprocess_exec(
                    *inst.argv,
                    env=inst.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                inst.proc = None
                self.say(f"{inst.name}: cannot run {inst.argv[0]}: {exc}")
                return
        write_pid(inst.pid_file, inst.proc.pid)
        if self._stopping.is_set():  # stop() ran while we were spawning
            self._signal(inst, signal.SIGTERM)

    async def _watch(self, inst: Instance) -> None:
        while True:
            code = await inst.proc.wait() if inst.proc is not None else None
            if self._stopping.is_set():
                return
            remove_pid(inst.pid_file)
            uptime = time.monotonic() - inst.starts[-1]
            delay = inst.backoff.delay_after(uptime)
            self.say(
                f"{inst.name} {describe_exit(code)} after {uptime:.1f}s; "
                f"restarting in {delay:g}s (log: {inst.log_file})"
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set():
                return
            await self._spawn(inst)

    def restart(self, inst: Instance) -> None:
        """Ask a running instance to exit; the watcher starts it again (e.g. with new env)."""
        self._signal(inst, signal.SIGTERM)

    def _signal(self, inst: Instance, sig: signal.Signals) -> None:
        """Signal the instance's whole process group (its pid is the group id)."""
        if inst.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(inst.proc.pid, sig)

    async def stop(self) -> None:
        """SIGTERM every process group, wait up to ``stop_timeout``, SIGKILL what is left."""
        self._stopping.set()
        running = [i for i in self.instances if i.proc is not None and i.proc.returncode is None]
        exits = {}
        for inst in running:
            assert inst.proc is not None
            self._signal(inst, signal.SIGTERM)
            exits[inst.name] = asyncio.ensure_future(inst.proc.wait())
        pending: set[asyncio.Future[int]] = set()
        if exits:
            _, pending = await asyncio.wait(exits.values(), timeout=self.stop_timeout)
        for inst in self.instances:  # leaders that ignored SIGTERM, and any grandchildren
            self._signal(inst, signal.SIGKILL)
        if pending:
            await asyncio.wait(pending, timeout=self.stop_timeout)
            late = [name for name, waiter in exits.items() if waiter in pending]
            self.say(f"killed {', '.join(late)} after {self.stop_timeout:g}s")
        if self._tasks:  # the watchers return now that their processes are gone
            _, stuck = await asyncio.wait(self._tasks, timeout=self.stop_timeout)
            for task in stuck:
                task.cancel()
        for inst in self.instances:
            remove_pid(inst.pid_file)
