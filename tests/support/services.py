"""Every service of the registry as a plain process against given NATS and PostgreSQL URLs
(what the launcher does, minus supervision), for tests that restart the servers under them."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

from switchboard import registry
from switchboard.embedded import free_port
from tests.fakes.llm import FakeLLM, Script
from tests.support.servers import service_nats_env
from tests.support.workers import base_env


class ServiceProcesses:
    def __init__(self, home: Path, nats_url: str, database_url: str, env: Mapping[str, str]):
        self.home = home
        self.http_port = free_port()
        self.token = "test-token-" + os.urandom(8).hex()
        self.env = {
            **base_env(),
            "SB_NATS_URL": nats_url,
            "SB_DATABASE_URL": database_url,
            "SB_HOME": str(home),
            "SB_GATEWAY_TOKEN": self.token,
            "SB_SERVICE_TOKEN": "test-service-" + os.urandom(12).hex(),
            "SB_HTTP_PORT": str(self.http_port),
        }
        # Every port of every service on loopback; a free one each (public: the HTTP port).
        for service in registry.SERVICES:
            for port in service.ports:
                self.env[port.host_setting] = "127.0.0.1"
                if port.name == "grpc":
                    number = free_port()
                    self.env[port.setting] = str(number)
                    self.env[service.addr_setting] = f"127.0.0.1:{number}"
        self.env.update(env)
        self.nats_url = nats_url  # the admin's: each service connects as its own NATS user
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ops_ports: dict[str, int] = {}  # each service's /healthz, /readyz, /metrics

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 120.0) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        for service in registry.SERVICES:
            self._spawn(service.name)
        if not self.wait_ready(True, timeout, fail_on_exit=True):
            report = self.not_ready_report()
            self.stop()
            raise RuntimeError(f"services did not become ready in {timeout:.0f} s\n{report}")

    def not_ready_report(self) -> str:
        """What a failed start looks like: the gateway's /readyz answer, which processes
        exited, and the last lines of each service's log."""
        try:
            answer = httpx.get(f"{self.url}/readyz", timeout=5).text
        except httpx.HTTPError as exc:
            answer = f"no answer ({type(exc).__name__})"
        lines = [f"/readyz: {answer[:2000]}"]
        for name, proc in self.procs.items():
            code = proc.poll()
            lines.append(f"--- {name}: {'running' if code is None else f'exited {code}'}")
            log = self.home / "logs" / f"{name}.log"
            if log.exists():
                lines.extend(log.read_text(errors="replace").splitlines()[-8:])
        return "\n".join(lines)

    def _spawn(
        self, name: str, service: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        """Start process ``name`` of ``service`` (default: the service called ``name``) with
        ``env`` added to the common settings."""
        log = open(self.home / "logs" / f"{name}.log", "ab")  # noqa: SIM115 (child owns it)
        self.ops_ports[name] = free_port()
        own = {
            "SB_OPS_PORT": str(self.ops_ports[name]),
            "SB_INSTANCE": name,
            **service_nats_env(self.nats_url, service or name),
            **(env or {}),
        }
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", registry.get(service or name).module],
            env={**self.env, **own},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def kill(self, name: str) -> None:
        """SIGKILL one service (and its process group), as a crash would."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):  # killed already
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def restart(self, name: str, timeout: float = 120.0) -> None:
        """Kill one service with SIGKILL and start it again; wait until all are ready."""
        self.kill(name)
        self._spawn(name)
        if not self.wait_ready(True, timeout):
            raise RuntimeError(
                f"{name} did not become ready after a restart\n{self.not_ready_report()}"
            )

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, wanted: bool, timeout: float, fail_on_exit: bool = False) -> bool:
        """Whether /readyz reached ``wanted`` within ``timeout``; ``fail_on_exit``: give up as
        soon as a service process has exited (nothing restarts it here)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready() == wanted:
                return True
            if fail_on_exit and any(p.poll() is not None for p in self.procs.values()):
                return False
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


@contextlib.contextmanager
def with_fake_model(
    home: Path,
    nats_url: str,
    database_url: str,
    script: Script,
    env: Mapping[str, str],
    processes: type[ServiceProcesses] = ServiceProcesses,
) -> Iterator[ServiceProcesses]:
    """The services (as ``processes``) against a fake OpenAI-compatible model running
    ``script`` (as ``.llm``), with their own workspaces root (removed afterwards); ``env``
    adds settings."""
    workspaces = Path(tempfile.mkdtemp(prefix="sb-ws-", dir="/tmp"))
    workspaces.chmod(0o755)  # the sandbox's unprivileged uid must be able to reach it
    try:
        with FakeLLM(script) as llm:
            settings = {
                "OPENAI_API_KEY": "sk-test",
                "OPENAI_BASE_URL": f"{llm.base_url}/v1",
                "SB_WORKSPACES_DIR": str(workspaces),
                # The tests publish chat-channel DMs from made-up senders; the router's
                # inbound security has tests of its own (services/router/tests).
                "SB_DM_POLICY": "open",
                **env,
            }
            procs = processes(home, nats_url, database_url, settings)
            procs.llm = llm  # type: ignore[attr-defined]
            procs.start()
            try:
                yield procs
            finally:
                procs.stop()
    finally:
        shutil.rmtree(workspaces, ignore_errors=True)


def fresh_model(procs: ServiceProcesses) -> FakeLLM:
    """The fake model of ``procs`` (from :func:`with_fake_model`), its recorded calls and
    scripted failures cleared and its streaming back to FakeLLM's defaults: for the next test
    of a module sharing one system."""
    llm: FakeLLM = procs.llm  # type: ignore[attr-defined]
    llm.reset()
    llm.text_chunks, llm.arg_chunks, llm.stream_delay_s = 4, 3, 0.0
    return llm
