"""Executors on a real nats-server: process handles routed between two replicas sharing the
TOOLS work queue, and exec's partial output streamed as ToolUpdate before the ToolResult."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_tools.builtin import builtin_registry
from switchboard_tools.config import ToolsSettings
from switchboard_tools.procs import ProcessLimits, ProcessManager
from switchboard_tools.sandbox import LayeredSandbox
from switchboard_tools.server import Executor
from switchboard_tools.tools.exec import DEFAULT_EXEC_ALLOWLIST

SUBJECTS = bus.Subjects()


@dataclass
class Runtime:
    """What the Executor uses of a ServiceRuntime: a NATS connection and the subjects."""

    nc: NATS
    subjects: bus.Subjects = SUBJECTS


@dataclass
class Bus:
    """A client of the executors: publishes tool calls to TOOLS, hands each to the executor
    the test chooses (as the shared work queue would), and records what comes back on one
    subscription (so arrival order across subjects is preserved)."""

    nc: NATS
    js: JetStreamContext
    pull: JetStreamContext.PullSubscription
    received: list[Msg] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def listen(self, pattern: str) -> None:
        """Record what arrives on ``pattern``. Not ``sb.tools.>`` where the process routing is
        tested: a subscriber there would count as a responder on ``sb.tools.proc.<id>``."""
        await self.nc.subscribe(pattern, cb=self._record)

    async def _record(self, msg: Msg) -> None:
        self.received.append(msg)
        self.arrived.set()

    async def call(
        self, executor: Executor, tool: str, args: dict[str, Any], agent: str = "agent-1"
    ) -> tuple[messages_pb2.ToolResult, list[messages_pb2.ToolUpdate]]:
        call = messages_pb2.ToolCall(
            call_id=f"call-{uuid.uuid4().hex[:12]}",
            run_id=f"run-{uuid.uuid4().hex[:12]}",
            agent=agent,
            tool=tool,
            args_json=json.dumps(args),
            timeout_s=30,
        )
        await bus.js_publish(self.js, SUBJECTS.tools_call("default"), call)
        [msg] = await self.pull.fetch(1, timeout=5)
        await executor.handle(msg)
        return await self._outcome(call)

    async def _outcome(
        self, call: messages_pb2.ToolCall
    ) -> tuple[messages_pb2.ToolResult, list[messages_pb2.ToolUpdate]]:
        result_subject = SUBJECTS.tools_result(call.run_id)
        update_subject = SUBJECTS.tools_update(call.call_id)
        async with asyncio.timeout(5):
            while not any(m.subject == result_subject for m in self.received):
                self.arrived.clear()
                await self.arrived.wait()
        updates: list[messages_pb2.ToolUpdate] = []
        for msg in self.received:
            if msg.subject == update_subject:
                updates.append(messages_pb2.ToolUpdate.FromString(msg.data))
            elif msg.subject == result_subject:
                return messages_pb2.ToolResult.FromString(msg.data), updates
        raise AssertionError("unreachable")


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-tools-bus-"))
    path.chmod(0o711)  # the sandbox uid must reach the workspaces
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def client(nats_url: str) -> AsyncIterator[Bus]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await bus.ensure_streams(js, SUBJECTS)
    pull = await bus.durable_pull(js, SUBJECTS.stream("TOOLS"), "test-executors", "sb.tools.call.>")
    try:
        yield Bus(nc, js, pull)
    finally:
        await nc.close()


@pytest.fixture
async def replicas(
    nats_url: str, root: Path, layered: LayeredSandbox
) -> AsyncIterator[list[Executor]]:
    """Two executors (own connections, own process managers) on the same NATS."""
    settings = ToolsSettings(workspaces_dir=root / "workspaces", nats_url=nats_url)
    executors: list[Executor] = []
    connections: list[NATS] = []
    for _ in range(2):
        nc = await nats.connect(nats_url)
        connections.append(nc)
        processes = ProcessManager(layered, ProcessLimits(max_lifetime_s=60))
        registry = builtin_registry(
            layered, [*DEFAULT_EXEC_ALLOWLIST, "sleep"], processes=processes
        )
        rt = cast(ServiceRuntime, Runtime(nc))
        executor = Executor(rt, settings, registry, layered, processes)
        await executor.serve_processes()
        executors.append(executor)
    try:
        yield executors
    finally:
        for executor in executors:
            await executor.close()
        for nc in connections:
            await nc.close()


def details(result: messages_pb2.ToolResult) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.details_json)
    return data


async def test_process_calls_are_routed_to_the_owning_replica(
    client: Bus, replicas: list[Executor]
) -> None:
    a, b = replicas
    await client.listen("sb.tools.result.>")
    assert a.processes is not None and b.processes is not None
    command = "echo ready; sleep 0.3; echo later; sleep 30"
    result, _ = await client.call(
        a, "process", {"action": "start", "command": command, "mode": "sandbox", "wait_s": 0}
    )
    assert not result.is_error, result.content
    handle = details(result)["handle"]
    assert handle.startswith(f"p_{a.processes.executor_id}_")

    text = details(result)["output"]
    for _ in range(20):  # polled through B: forwarded to A
        result, _ = await client.call(b, "process", {"action": "poll", "handle": handle})
        assert not result.is_error, result.content
        text += details(result)["output"]
        if "later" in text:
            break
        await asyncio.sleep(0.1)
    assert text == "ready\nlater\n"

    result, _ = await client.call(b, "process", {"action": "list"})
    assert handle in result.content and "running" in result.content
    result, _ = await client.call(b, "process", {"action": "list"}, agent="agent-2")
    assert result.content == "No processes."
    result, _ = await client.call(b, "process", {"action": "kill", "handle": handle}, "agent-2")
    assert result.is_error and "No process" in result.content  # A checks the agent

    result, _ = await client.call(b, "process", {"action": "kill", "handle": handle})
    assert not result.is_error and details(result)["status"] == "killed"
    assert not a.processes.get("agent-1", handle).running


async def test_a_gone_owner_is_reported(client: Bus, replicas: list[Executor]) -> None:
    a, b = replicas
    await client.listen("sb.tools.result.>")
    result, _ = await client.call(
        a, "process", {"action": "start", "command": "sleep 30", "mode": "sandbox", "wait_s": 0}
    )
    handle = details(result)["handle"]
    assert a.processes is not None
    child = a.processes.get("agent-1", handle).child
    await a.close()  # the replica shuts down: its processes die with it
    assert child.finished.is_set() and child.killed
    result, _ = await client.call(b, "process", {"action": "poll", "handle": handle})
    assert result.is_error
    assert "the executor that started this process is gone" in result.content


async def test_exec_streams_partial_output_before_the_result(
    client: Bus, replicas: list[Executor]
) -> None:
    await client.listen("sb.tools.>")  # one subscription: arrival order is publish order
    command = "for i in 1 2 3; do echo part $i; sleep 0.3; done"
    result, updates = await client.call(
        replicas[0], "exec", {"command": command, "mode": "sandbox"}
    )
    assert not result.is_error, result.content
    assert result.content == "part 1\npart 2\npart 3\n"
    assert len(updates) >= 3  # output 0.3 s apart is not coalesced into one piece
    assert [u.seq for u in updates] == list(range(1, len(updates) + 1))
    assert "".join(u.text for u in updates) == result.content
    assert {(u.call_id, u.run_id, u.stream) for u in updates} == {
        (result.call_id, result.run_id, "output")
    }
