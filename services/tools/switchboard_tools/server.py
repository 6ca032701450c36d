"""Tool executor: pulls TOOLS when it has a free slot, validates and runs the call in the
sandbox, and publishes the result (with the isolation attestation) on sb.tools.result.<run>.

Besides the built-in tools it offers the tools of the MCP servers in ``SB_MCP_SERVERS``
(:mod:`switchboard_tools.mcp`), which it starts (stdio, in the sandbox) or connects to
(streamable HTTP) and supervises. The spec request (``sb.tools.specs``) may carry
``{"agent": "<id>"}``: the answer then holds the MCP tools offered to that agent; an empty
request (older agents) gets the built-in tools and those of servers offered to every agent.
A change of ``SB_MCP_SERVERS`` in the configuration file is applied while it runs
(:mod:`switchboard_tools.mcp.running`)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import TYPE_CHECKING

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

import switchboard.registry
from switchboard import bus
from switchboard.runtime import ServiceRuntime
from switchboard.telemetry import enter_service, extract_context
from switchboard.toolspec import ToolSpec
from switchboard.v1 import messages_pb2

from .builtin import builtin_registry
from .config import CONSUMER, ToolsSettings
from .errors import ToolError
from .mcp.running import RunningServers
from .metrics import BUSY_SLOTS, EXECUTION_SECONDS, EXECUTIONS
from .procbus import ProcessBus
from .procs import ProcessLimits, ProcessManager
from .registry import ToolContext, ToolOutput, ToolRegistry
from .sandbox import Sandbox
from .updates import update_publisher
from .workspace import WorkspaceScope, open_workspace

if TYPE_CHECKING:
    from .mcp.hub import McpHub
    from .sandbox.layered import LayeredSandbox

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.tools")
# How long a spec request waits for MCP servers still making their first connection (the
# agent asks with a 2 s deadline).
_FIRST_LIST_WAIT_S = 1.0


class Executor:
    def __init__(
        self,
        nc: NATS,
        subjects: bus.Subjects,
        settings: ToolsSettings,
        registry: ToolRegistry,
        sandbox: Sandbox,
        processes: ProcessManager | None = None,
        mcp: McpHub | None = None,
    ) -> None:
        """``processes``: the manager of the process tool, served to the other replicas
        by :meth:`serve_processes` and killed by :meth:`close`; ``mcp``: the MCP servers."""
        self.nc = nc
        self.subjects = subjects
        self.settings = settings
        self.registry = registry
        self.isolation = json.dumps(sandbox.attestation())
        self.running: dict[str, set[asyncio.Task[ToolOutput]]] = {}
        self.processes = processes
        self.process_bus: ProcessBus | None = None
        self.mcp = mcp

    async def serve_processes(self) -> None:
        """Answer poll/kill/list for this executor's processes on sb.tools.proc.<id>."""
        if self.processes is not None and self.process_bus is None:
            self.process_bus = ProcessBus(self.nc, self.subjects, self.processes)
            await self.process_bus.start()

    async def close(self) -> None:
        """Stop serving process requests and kill every process this executor runs."""
        try:
            if self.process_bus is not None:
                await self.process_bus.stop()
        finally:
            self.process_bus = None
            if self.processes is not None:
                await self.processes.shutdown()

    async def cancel_run(self, _: Msg, cancel: messages_pb2.ToolCancel) -> None:
        """A run was interrupted: cancel its calls in flight (the sandbox kills their process
        groups)."""
        for task in self.running.get(cancel.run_id, set()):
            task.cancel()

    async def answer_specs(self, msg: Msg) -> None:
        if self.mcp is not None:
            await self.mcp.first_attempts(_FIRST_LIST_WAIT_S)
        specs = self.specs(_asking_agent(msg.data))
        await msg.respond(json.dumps([spec.wire() for spec in specs]).encode())

    def specs(self, agent: str | None) -> list[ToolSpec]:
        """The built-in tools and the MCP tools offered to ``agent`` (see the module
        docstring), sorted by name."""
        specs = self.registry.specs()
        if self.mcp is not None:
            specs += self.mcp.specs(agent)
        return sorted(specs, key=lambda spec: spec.name)

    async def handle(self, msg: Msg, call: messages_pb2.ToolCall) -> None:
        BUSY_SLOTS.inc()
        start = time.perf_counter()
        try:
            with tracer.start_as_current_span(
                "tools.execute", context=extract_context(msg.headers), kind=SpanKind.CONSUMER
            ) as span:
                span.set_attribute("sb.tool", call.tool)
                span.set_attribute("sb.tool.call_id", call.call_id)
                task = asyncio.create_task(self._execute(call))
                self.running.setdefault(call.run_id, set()).add(task)
                try:
                    output = await task
                except asyncio.CancelledError:
                    if not task.cancelled():
                        raise  # this handler itself is being cancelled (shutdown)
                    output = ToolOutput("cancelled: the run was interrupted", is_error=True)
                finally:
                    tasks = self.running.get(call.run_id, set())
                    tasks.discard(task)
                    if not tasks:
                        self.running.pop(call.run_id, None)
                log.info(
                    "%s %s",
                    call.tool,
                    "failed" if output.is_error else "done",
                    extra={"call_id": call.call_id, "run_id": call.run_id},
                )
                measured = output.details.get("isolation")
                isolation = json.dumps(measured) if measured else self.isolation
                span.set_attribute("sb.isolation", isolation)
                if output.is_error:
                    span.set_status(Status(StatusCode.ERROR))
            duration_ms = (time.perf_counter() - start) * 1000
            result = messages_pb2.ToolResult(
                call_id=call.call_id,
                run_id=call.run_id,
                is_error=output.is_error,
                content=output.content,
                details_json=json.dumps(output.details),
                isolation_json=isolation,
                duration_ms=duration_ms,
            )
            await bus.core_publish(self.nc, self.subjects.tools_result(call.run_id), result)
            await msg.ack()
            EXECUTIONS.labels(call.tool, "error" if output.is_error else "ok").inc()
            EXECUTION_SECONDS.labels(call.tool).observe(duration_ms / 1000)
        finally:
            BUSY_SLOTS.dec()

    async def _execute(self, call: messages_pb2.ToolCall) -> ToolOutput:
        session = workspace_session(call, self.settings.workspace_scope)
        try:
            workspace, fd = open_workspace(
                self.settings.workspace_root(), call.agent or "main", session
            )
        except ToolError as exc:
            return ToolOutput(str(exc), is_error=True)
        try:
            timeout = min(call.timeout_s or 60.0, self.settings.tools_max_timeout_s)
            on_update = update_publisher(self.nc, self.subjects, call)
            ctx = ToolContext(
                call.agent,
                call.session_key,
                call.call_id,
                workspace,
                timeout,
                on_update,
                workspace_fd=fd,
                workspace_session=session or "",
            )
            args = call.args_json or "{}"
            if self.mcp is not None and call.tool not in self.registry and self.mcp.owns(call.tool):
                return await self.mcp.execute(call.tool, args, ctx)
            return await self.registry.execute(call.tool, args, ctx)
        finally:
            os.close(fd)


def workspace_session(call: messages_pb2.ToolCall, scope: WorkspaceScope) -> str | None:
    """The session whose private workspace ``call`` works in (``None``: the agent's).

    ``call.workspace_session`` is set by the agent for a run that is not the owner's
    (docs/trust.md, ``trust.private_workspace``): it wins over ``SB_WORKSPACE_SCOPE``, so such a
    run never reaches the agent's workspace (the owner's ``MEMORY.md`` and ``USER.md``) nor
    another session's, in either scope. Without it, the operator's scope decides, as before."""
    if call.workspace_session:
        return call.workspace_session
    return call.session_key if scope == "session" else None


def _asking_agent(data: bytes) -> str | None:
    """The agent a spec request names (``None``: an empty or unreadable request)."""
    if not data.strip():
        return None
    try:
        request = json.loads(data)
    except ValueError:
        log.warning("unreadable tool spec request; answering for every agent")
        return None
    agent = request.get("agent") if isinstance(request, dict) else None
    return agent if isinstance(agent, str) and agent else None


async def serve(settings: ToolsSettings, stop: asyncio.Event) -> None:
    service = switchboard.registry.get("tools")
    # The sandbox probe (sandboxed commands under each layer: the longest part of this start-up)
    # needs no connection: it runs while the runtime connects to NATS.
    enter_service(service.name)  # the probe's logs and spans are the executor's
    probing = asyncio.ensure_future(settings.probe_sandbox())
    try:
        async with ServiceRuntime(service, settings, stop) as rt:
            await _serve(settings, rt, await probing)
    finally:
        probing.cancel()  # the runtime failed or was stopped first; nothing once it is done
        await asyncio.wait({probing})  # its sandboxed processes are gone once it has ended
        if not probing.cancelled():
            probing.exception()  # retrieved: the runtime's own error is the one raised


async def _serve(settings: ToolsSettings, rt: ServiceRuntime, sandbox: LayeredSandbox) -> None:
    """The executor's start-up once connected and its sandbox probed, then its life."""
    processes = ProcessManager(
        sandbox,
        ProcessLimits(
            max_per_agent=settings.process_max_per_agent,
            max_lifetime_s=settings.process_max_lifetime_s,
            output_cap=settings.process_output_cap,
        ),
    )
    tools = builtin_registry(
        sandbox,
        settings.exec_allowlist,
        web=settings,
        processes=processes,
        max_args_bytes=settings.tool_args_max_bytes,
        exec_mode=settings.exec_mode,
        a2a=settings,
    )
    servers = RunningServers(settings, sandbox, rt.nc, rt.subjects.tools_changed())
    rt.stack.push_async_callback(servers.close)
    executor = Executor(rt.nc, rt.subjects, settings, tools, sandbox, processes, servers.start())
    servers.user = executor
    rt.on_reload(servers.reload)  # SB_MCP_SERVERS changed in the configuration file
    await executor.serve_processes()
    rt.stack.push_async_callback(executor.close)
    await rt.nc.subscribe(rt.subjects.tools_specs(), queue="tools", cb=executor.answer_specs)
    await rt.nc.subscribe(
        rt.subjects.tools_cancel("*"),
        cb=bus.decoding(messages_pb2.ToolCancel, executor.cancel_run, "tool cancels"),
    )
    await rt.consume(
        "TOOLS",
        CONSUMER,
        f"{settings.subject_prefix}.tools.call.>",
        messages_pb2.ToolCall,
        executor.handle,
        concurrency=settings.tools_max_concurrency,
        ack_wait=settings.tools_max_timeout_s + 30,
        max_deliver=3,
    )
    log.info("tool executor ready", extra={"isolation": sandbox.attestation()})
    await rt.wait_stopped()
