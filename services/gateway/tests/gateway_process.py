"""The gateway as Compose and Kubernetes run it: ``python -m switchboard_gateway``, a process of
its own serving HTTP on a free loopback port (uvicorn, real sockets: chunked bodies, streamed
responses) against a real nats-server. No agent or router listens at its ``SB_AGENT_ADDR`` and
``SB_ROUTER_ADDR``.

``with gateway_process(nats_url, home, SB_SOME_SETTING="1") as gw`` gives a
:class:`GatewayProcess`; the process is stopped (SIGTERM, then SIGKILL) when the block ends.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import nats
import psutil

from switchboard.embedded import free_port
from tests.support.servers import run_sync, service_nats_env
from tests.support.streams import ensure_streams_short_leases

from .gateway_harness import absent_address

NOT_INHERITED = ("SB_", "OPENAI_", "ANTHROPIC_", "OTEL_")


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    token: str = field(repr=False)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def rss(self) -> int:
        """Resident memory of the gateway process, in bytes."""
        return int(psutil.Process(self.proc.pid).memory_info().rss)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


async def _create_streams(nats_url: str) -> None:
    """What the router does at start (the gateway's NATS user may not create streams)."""
    nc = await nats.connect(nats_url)
    try:
        await ensure_streams_short_leases(nc.jetstream())
    finally:
        await nc.close()


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the gateway exited ({proc.returncode}):\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the gateway did not answer /healthz in {timeout:g}s:\n{log.read_text()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextmanager
def gateway_process(nats_url: str, home: Path, **env: str) -> Iterator[GatewayProcess]:
    """The gateway process, once the NATS streams exist; ``env``: settings added to (or
    overriding) the ones it gets."""
    token = f"gw-{secrets.token_urlsafe(24)}"
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    run_sync(_create_streams(nats_url))
    with absent_address() as agent_addr, absent_address() as router_addr:
        environ = {
            **{k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)},
            **service_nats_env(nats_url, "gateway"),
            "SB_HOME": str(home),
            "SB_GATEWAY_TOKEN": token,
            "SB_SERVICE_TOKEN": secrets.token_urlsafe(32),
            "SB_HTTP_HOST": "127.0.0.1",
            "SB_HTTP_PORT": str(port),
            "SB_AGENT_ADDR": agent_addr,
            "SB_ROUTER_ADDR": router_addr,
            "SB_LOG_JSON": "false",
            **env,
        }
        log = home / "gateway.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "switchboard_gateway"],
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(proc, url, log, timeout=60)
            yield GatewayProcess(proc, url, log, environ["SB_GATEWAY_TOKEN"])
        finally:
            _stop(proc)
