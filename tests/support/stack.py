"""Run the whole system the way a user does: `switchboard up` as a process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from switchboard import natsauth
from switchboard.cli.home import Home, nats_credentials
from switchboard.embedded import free_port
from tests.support.workers import base_env


@dataclass
class Stack:
    proc: subprocess.Popen[str]
    home: Path
    http_port: int
    token: str
    output: list[str] = field(default_factory=list)
    ready_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def pids(self) -> dict[str, int]:
        """Every process the launcher reports in its pid files."""
        return {p.stem: int(p.read_text().strip()) for p in (self.home / "run").glob("*.pid")}

    def log(self) -> str:
        return "".join(self.output)

    def admin_nats_url(self, nats_url: str) -> str:
        """The stack's NATS (``nats_url``, as its services have it) as the admin, whose
        password the launcher stored in ``$SB_HOME/secrets/nats.json``."""
        return admin_nats_url(self.home, nats_url)


def admin_nats_url(home: Path, nats_url: str) -> str:
    admin = nats_credentials(Home(home)).passwords[natsauth.ADMIN]
    return natsauth.url_as(nats_url, natsauth.ADMIN, admin)


def start_stack(
    home: Path, env: Mapping[str, str], timeout: float = 60.0, args: Sequence[str] = ()
) -> Stack:
    """Run `switchboard up` in ``home``; ``args`` are appended (e.g. ``["--scale", "agent=2"]``)."""
    port = free_port()
    token = "test-token-" + os.urandom(8).hex()
    full_env = base_env()
    full_env.update({"SB_GATEWAY_TOKEN": token, "SB_LOG_LEVEL": "INFO", **env})
    cmd = [
        str(Path(sys.executable).parent / "switchboard"),
        "up",
        "--home",
        str(home),
        "--http-port",
        str(port),
        *args,
    ]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    stack = Stack(proc, home, port, token)
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            stack.output.append(line)
            if "Switchboard ready" in line:
                stack.ready_s = time.monotonic() - start
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout):
        stop_stack(stack)
        raise RuntimeError(f"switchboard up did not become ready:\n{stack.log()}")
    return stack


def stop_stack(stack: Stack, sig: int = signal.SIGINT) -> list[int]:
    """Stop like Ctrl-C; return the pids (services, nats, postgres) still alive afterwards."""
    pids = set(stack.pids().values())
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(stack.home) in cmdline and proc.info["pid"] != stack.proc.pid:
            pids.add(proc.info["pid"])
    if stack.proc.poll() is None:
        stack.proc.send_signal(sig)
        try:
            stack.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(stack.proc.pid, signal.SIGKILL)
            stack.proc.wait(5)
    deadline = time.monotonic() + 5
    alive = [p for p in pids if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in pids if _alive(p)]
    return alive


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
