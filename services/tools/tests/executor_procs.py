"""Real tool executors for tests: ``python -m switchboard_tools`` processes against a given NATS
(a tools-only variant of ``tests.support.services.ServiceProcesses``), and a client that reaches
them only over the bus, as the agent does: a ``ToolCall`` on the TOOLS stream, the
``ToolResult`` on ``sb.tools.result.<run>`` and ``ToolUpdate``s on ``sb.tools.update.<call>``.
Each process's own ``/metrics`` and log say what it did."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import nats
import psutil
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from prometheus_client.parser import text_string_to_metric_families

from switchboard import bus, registry
from switchboard.embedded import free_port
from switchboard.v1 import messages_pb2
from tests.support.servers import service_nats_env
from tests.support.workers import base_env

SUBJECTS = bus.Subjects()
READY_LINE = "tool executor ready"  # logged once the TOOLS consumer is set up


@dataclass
class Replica:
    """One running executor process."""

    name: str
    proc: subprocess.Popen[bytes]
    ops_port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def _get(self, path: str) -> httpx.Response:
        async with httpx.AsyncClient(timeout=5) as client:
            return await client.get(f"http://127.0.0.1:{self.ops_port}{path}")

    async def ready(self) -> bool:
        try:
            return (await self._get("/readyz")).status_code == 200
        except httpx.HTTPError:
            return False

    async def metric(self, sample: str, **labels: str) -> float:
        """The sum of ``sample`` over the series matching ``labels``, from this process's own
        ``/metrics``."""
        response = await self._get("/metrics")
        response.raise_for_status()
        total = 0.0
        for family in text_string_to_metric_families(response.text):
            for s in family.samples:
                if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total

    async def executions(self, tool: str) -> float:
        return await self.metric("sb_tool_executions_total", tool=tool)

    async def busy_slots(self) -> float:
        return await self.metric("sb_tools_busy_slots")

    def sandboxed(self, marker: str) -> list[psutil.Process]:
        """This executor's descendants (its sandboxed commands) whose command line contains
        ``marker``; zombies excluded."""
        found = []
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(self.pid).children(recursive=True):
                try:
                    if child.status() != psutil.STATUS_ZOMBIE and marker in " ".join(
                        child.cmdline()
                    ):
                        found.append(child)
                except psutil.Error:
                    continue
        return found


class ExecutorProcesses:
    """Tool executor processes sharing one NATS, their workspaces root (0755, in /tmp, so the
    sandbox uid can reach it) and a home for their logs; everything is stopped and removed on
    exit. ``env`` adds settings (the test's own SB_*/model/OTEL variables never leak in)."""

    def __init__(self, nats_url: str, env: Mapping[str, str] | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="sb-tools-home-"))
        self.workspaces = Path(tempfile.mkdtemp(prefix="sb-tools-ws-"))
        self.workspaces.chmod(0o755)
        self.env = {
            **base_env(),
            "SB_NATS_URL": nats_url,
            "SB_HOME": str(self.home),
            "SB_WORKSPACES_DIR": str(self.workspaces),
            "SB_OPS_HOST": "127.0.0.1",
            **(env or {}),
        }
        self.replicas: dict[str, Replica] = {}

    def workspace(self, agent: str = "agent-1") -> Path:
        return self.workspaces / agent

    async def start(self, name: str, timeout: float = 60.0) -> Replica:
        """Spawn one executor and wait until it is ready: ``/readyz`` answers 200 and it has
        logged that its TOOLS consumer is set up (so it takes calls from now on)."""
        replica = self.replicas[name] = self._spawn(name)
        proc = replica.proc
        deadline = asyncio.get_running_loop().time() + timeout
        while not (READY_LINE in replica.log() and await replica.ready()):
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{replica.log()}")
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"{name} not ready within {timeout:g}s:\n{replica.log()}")
            await asyncio.sleep(0.1)
        return replica

    def _spawn(self, name: str) -> Replica:
        logs = self.home / "logs"
        logs.mkdir(exist_ok=True)
        port = free_port()
        log_path = logs / f"{name}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", registry.get("tools").module],
                env={
                    **self.env,
                    **service_nats_env(self.env["SB_NATS_URL"], "tools"),
                    "SB_OPS_PORT": str(port),
                    "SB_INSTANCE": name,
                },
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Replica(name, proc, port, log_path)

    def kill(self, name: str) -> None:
        """SIGKILL one executor process (only it: its sandboxed commands are in sessions of
        their own and must die with it by themselves), as a crash would."""
        proc = self.replicas[name].proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        """SIGTERM every executor's group, SIGKILL what is left after 10 s."""
        live = [r.proc for r in self.replicas.values() if r.proc.poll() is None]
        for proc in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in live:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)
            shutil.rmtree(self.workspaces, ignore_errors=True)

    async def __aenter__(self) -> ExecutorProcesses:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def details(result: messages_pb2.ToolResult) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.details_json)
    return data


@dataclass
class ToolBus:
    """A client of the executors: publishes tool calls on ``sb.tools.call.default`` (TOOLS, the
    work queue every replica pulls from) and records what comes back on the subscriptions it
    was told to make, in arrival order."""

    nc: NATS
    js: JetStreamContext
    received: list[Msg] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def connect(cls, nats_url: str) -> ToolBus:
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        await bus.ensure_streams(js, SUBJECTS)
        return cls(nc, js)

    async def close(self) -> None:
        await self.nc.close()

    async def listen(self, pattern: str) -> None:
        """Record what arrives on ``pattern`` (one subscription: arrival order is publish
        order). Not ``sb.tools.>`` where processes are routed between replicas: a subscriber
        there would count as a responder on ``sb.tools.proc.<executor id>``."""
        await self.nc.subscribe(pattern, cb=self._record)
        await self.nc.flush()

    async def _record(self, msg: Msg) -> None:
        self.received.append(msg)
        self.arrived.set()

    async def publish(
        self, tool: str, args: dict[str, Any], agent: str = "agent-1", timeout_s: float = 30
    ) -> messages_pb2.ToolCall:
        call = messages_pb2.ToolCall(
            call_id=f"call-{uuid.uuid4().hex[:12]}",
            run_id=f"run-{uuid.uuid4().hex[:12]}",
            agent=agent,
            tool=tool,
            args_json=json.dumps(args),
            timeout_s=timeout_s,
        )
        await bus.js_publish(self.js, SUBJECTS.tools_call("default"), call)
        return call

    def _messages(self, subject: str) -> list[Msg]:
        return [m for m in self.received if m.subject == subject]

    async def _wait(self, done: Any, timeout: float, what: str) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not done():
                    self.arrived.clear()
                    await self.arrived.wait()
        except TimeoutError:
            raise AssertionError(f"no {what} within {timeout:g}s") from None

    async def updates(
        self, call: messages_pb2.ToolCall, count: int, timeout: float = 30.0
    ) -> list[messages_pb2.ToolUpdate]:
        """The first ``count`` updates of ``call`` (waiting for them, bounded)."""
        subject = SUBJECTS.tools_update(call.call_id)
        await self._wait(lambda: len(self._messages(subject)) >= count, timeout, "update")
        return [messages_pb2.ToolUpdate.FromString(m.data) for m in self._messages(subject)]

    async def result(
        self, call: messages_pb2.ToolCall, timeout: float = 60.0
    ) -> messages_pb2.ToolResult:
        subject = SUBJECTS.tools_result(call.run_id)
        await self._wait(lambda: bool(self._messages(subject)), timeout, f"result of {call.tool}")
        [msg] = self._messages(subject)
        return messages_pb2.ToolResult.FromString(msg.data)

    def order(self, call: messages_pb2.ToolCall) -> list[str]:
        """What arrived for ``call``, in order: ``"update"`` and ``"result"``."""
        kinds = {
            SUBJECTS.tools_update(call.call_id): "update",
            SUBJECTS.tools_result(call.run_id): "result",
        }
        return [kinds[m.subject] for m in self.received if m.subject in kinds]

    async def call(
        self, tool: str, args: dict[str, Any], agent: str = "agent-1"
    ) -> messages_pb2.ToolResult:
        return await self.result(await self.publish(tool, args, agent))
