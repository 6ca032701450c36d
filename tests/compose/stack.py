"""The Compose stack of the smoke run under podman-compose: start it in the order its health
checks allow, read its containers' logs, tear it down.

Compose waits for ``condition: service_healthy``; podman-compose does so only on podman 4.6 or
later, and podman runs health checks from systemd timers, which a machine without systemd
lacks. So the smoke run starts the services level by level of their ``depends_on`` graph and
runs each container's own health check (``podman healthcheck run``: the test of the compose
file) until it passes before starting the next level: the start order Compose gives.
"""

from __future__ import annotations

import json
import resource
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

Say = Callable[[str], None]
PROJECT_LABEL = "io.podman.compose.project"
SERVICE_LABEL = "com.docker.compose.service"


class StackError(Exception):
    """The stack did not come up (or down) as it should; the message says where."""


def start_levels(depends_on: dict[str, set[str]], services: Iterable[str]) -> list[list[str]]:
    """``services`` in the order Compose starts them: each level only after every service it
    depends on (within ``services``; the others are not started) is in an earlier level."""
    wanted = set(services)
    pending = {name: depends_on.get(name, set()) & wanted for name in wanted}
    levels: list[list[str]] = []
    done: set[str] = set()
    while pending:
        ready = sorted(name for name, needs in pending.items() if needs <= done)
        if not ready:
            raise StackError(f"depends_on has a cycle among {sorted(pending)}")
        levels.append(ready)
        done.update(ready)
        for name in ready:
            del pending[name]
    return levels


@dataclass
class Container:
    name: str
    service: str
    state: str


class Stack:
    """One podman-compose project (``-p``) of the compose files, with its own env file."""

    def __init__(
        self,
        compose: list[str],
        project: str,
        files: list[Path],
        env_file: Path,
        env: dict[str, str],
        cwd: Path,
    ) -> None:
        self.base = [*compose, "-p", project, "--in-pod", "false", "--env-file", str(env_file)]
        for path in files:
            self.base += ["-f", str(path)]
        self.project = project
        self.env = env
        self.cwd = cwd

    def compose(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(
            [*self.base, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise StackError(f"podman-compose {' '.join(args)} failed:\n{output[-4000:]}")
        return done.stdout

    def config(self) -> dict[str, Any]:
        """The merged compose configuration (the files, interpolated from the env file)."""
        config: dict[str, Any] = YAML(typ="safe").load(self.compose("config"))
        return config

    def containers(self) -> list[Container]:
        out = podman(
            "ps", "-a", "--filter", f"label={PROJECT_LABEL}={self.project}", "--format", "json"
        )
        return [
            Container(c["Names"][0], c.get("Labels", {}).get(SERVICE_LABEL, ""), c.get("State", ""))
            for c in json.loads(out or "[]")
        ]

    def of(self, service: str) -> list[Container]:
        return [c for c in self.containers() if c.service == service]

    def up(self, levels: list[list[str]], say: Say, timeout: float = 300) -> None:
        """Start level after level; each waits until every container of the level before it
        passes its health check."""
        for level in levels:
            say(f"starting {', '.join(level)}")
            self.compose("up", "-d", "--no-deps", *level, timeout=timeout)
            self.wait_healthy(level, say, timeout)

    def wait_healthy(self, services: list[str], say: Say, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = {c.name: c for s in services for c in self.of(s)}
        missing = [s for s in services if not any(c.service == s for c in waiting.values())]
        if missing:
            raise StackError(f"no container for {missing}")
        while waiting:
            for name in list(waiting):
                if health_check(name):
                    say(f"  {name}: healthy")
                    del waiting[name]
            if not waiting:
                return
            if time.monotonic() > deadline:
                states = {c.name: c.state for c in self.containers() if c.name in waiting}
                tails = "\n".join(f"--- {name}:\n{tail(name)}" for name in waiting)
                raise StackError(f"not healthy after {timeout:.0f} s: {states}\n{tails}")
            time.sleep(2)

    def logs(self, service: str) -> list[str]:
        """Every line each container of ``service`` wrote (stdout and stderr)."""
        return [line for c in self.of(service) for line in self.container_logs(c.name)]

    def container_logs(self, container: str) -> list[str]:
        """Every line one container wrote (stdout and stderr)."""
        done = subprocess.run(
            ["podman", "logs", container], capture_output=True, text=True, timeout=120
        )
        return (done.stdout + done.stderr).splitlines()

    def address(self, service: str) -> str:
        """The IP address of a service's (first) container on the project's network."""
        (container, *_) = self.of(service)
        info = json.loads(podman("inspect", container.name))[0]
        networks = info["NetworkSettings"]["Networks"]
        for network in networks.values():
            if network.get("IPAddress"):
                return str(network["IPAddress"])
        raise StackError(f"{container.name} has no IP address: {list(networks)}")

    def down(self) -> list[str]:
        """Remove containers, network and volumes; what is left of the project."""
        self.compose("down", "-v", "--remove-orphans", timeout=600)
        left = [c.name for c in self.containers()]
        volumes = podman("volume", "ls", "-q", "--filter", f"label={PROJECT_LABEL}={self.project}")
        return left + volumes.split()


CAP_SYS_RESOURCE = 24
NPROC_CEILING = 32768  # podman's processes could not set more here (runc: "rlimit type 6")


def podman_conf(directory: Path) -> Path | None:
    """A containers.conf for what podman's defaults assume and this machine may lack: crun
    refuses hybrid cgroups (v1 controllers plus a v2 hierarchy holding one), runc copes; and
    without CAP_SYS_RESOURCE the containers cannot get podman's default limits, only ours."""
    engine, containers = [], []
    if Path("/sys/fs/cgroup/unified").is_dir():
        engine.append('runtime = "runc"')
    if not capability(CAP_SYS_RESOURCE):
        nofile = hard_limit(resource.RLIMIT_NOFILE, 1 << 20)
        nproc = hard_limit(resource.RLIMIT_NPROC, NPROC_CEILING)
        containers.append(
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]'
        )
    if not engine and not containers:
        return None
    path = directory / "containers.conf"
    path.write_text("\n".join(["[containers]", *containers, "", "[engine]", *engine, ""]))
    return path


def capability(bit: int) -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def hard_limit(kind: int, ceiling: int) -> int:
    hard = resource.getrlimit(kind)[1]
    return ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)


def podman(*args: str) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise StackError(f"podman {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def tail(container: str, lines: int = 15) -> str:
    """The last lines a container wrote."""
    done = subprocess.run(
        ["podman", "logs", "--tail", str(lines), container],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return (done.stdout + done.stderr).strip()


def health_check(container: str) -> bool:
    """Run the container's compose health check once (what systemd's timer would run)."""
    done = subprocess.run(
        ["podman", "healthcheck", "run", container], capture_output=True, text=True, timeout=60
    )
    return done.returncode == 0
