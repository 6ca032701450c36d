"""Dispatching a turn's tool calls to the executors over NATS and collecting their results."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from switchboard import bus, trust
from switchboard.toolspec import ToolSpec
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.agent")
# Tools whose partial output executors stream on sb.tools.update.<call id>.
STREAMING_TOOLS = frozenset({"exec", "process"})


@dataclass(frozen=True)
class CallRequest:
    call_id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class CallResult:
    call_id: str
    content: str
    is_error: bool
    details: dict[str, Any]


# How long the executors' tool specs are reused: a request-reply over NATS each run would cost
# about a millisecond; an MCP server's tools appearing a minute late surprised. An executor whose
# tools change says so on sb.tools.changed (see watch_changes): the next run asks again.
SPECS_TTL_S = 5.0

OnUpdate = Callable[[CallRequest, str], Awaitable[None]]


class ToolDispatcher:
    def __init__(self, nc: NATS, js: JetStreamContext, subjects: bus.Subjects, timeout_s: float):
        self.nc = nc
        self.js = js
        self.subjects = subjects
        self.timeout_s = timeout_s
        self._specs: dict[str | None, tuple[float, list[ToolSpec]]] = {}
        self._generation = 0  # counts the executors' notices that their tools changed

    async def watch_changes(self) -> Subscription:
        """Drop the kept specs whenever an executor says its tools changed (an MCP server
        added, removed, restarted or re-listed: ``sb.tools.changed``), so that the next run
        asks again. The TTL still bounds a notice that was lost."""

        async def changed(_: Msg) -> None:
            self._generation += 1
            # Stale, not forgotten: still the answer when no executor answers.
            self._specs = {agent: (0.0, kept) for agent, (_, kept) in self._specs.items()}

        return await self.nc.subscribe(self.subjects.tools_changed(), cb=changed)

    async def specs(self, agent: str | None = None) -> list[ToolSpec]:
        """The executors' tool specs for ``agent`` (the MCP servers offered to it; ``None``:
        those offered to every agent), kept for ``SPECS_TTL_S`` per agent or until an
        executor says its tools changed (:meth:`watch_changes`); the last known (else empty)
        when no executor answers."""
        at, cached = self._specs.get(agent, (0.0, []))
        if cached and time.monotonic() - at < SPECS_TTL_S:
            return cached
        request = json.dumps({"agent": agent}).encode() if agent else b""
        generation = self._generation
        try:
            reply = await self.nc.request(self.subjects.tools_specs(), request, timeout=2.0)
        except Exception:
            log.warning("no tool executor answered the spec request; running without tools")
            return cached
        specs = [ToolSpec.from_wire(s) for s in json.loads(reply.data)]
        if generation == self._generation:  # else a change came while asking: not kept
            self._specs[agent] = (time.monotonic(), specs)
        return specs

    async def run_all(
        self,
        run_id: str,
        session_key: str,
        agent: str,
        calls: list[CallRequest],
        on_update: OnUpdate | None = None,
        *,
        standing: Standing,
    ) -> list[CallResult]:
        """Send all calls of one turn at once and wait for every result (in call order);
        ``on_update`` receives the partial output of streaming tools as it arrives. A run not
        of the owner's ``standing`` has its calls run in its session's private workspace."""
        pending: dict[str, asyncio.Future[CallResult]] = {
            c.call_id: asyncio.get_running_loop().create_future() for c in calls
        }

        async def on_result(_: Msg, result: messages_pb2.ToolResult) -> None:
            future = pending.get(result.call_id)
            if future and not future.done():
                details = json.loads(result.details_json) if result.details_json else {}
                if result.isolation_json:
                    details["isolation"] = json.loads(result.isolation_json)
                if result.duration_ms:  # the executor's own timing of the call
                    details["duration_ms"] = round(result.duration_ms, 1)
                future.set_result(
                    CallResult(result.call_id, result.content, result.is_error, details)
                )

        subs = [
            await self.nc.subscribe(
                self.subjects.tools_result(run_id),
                cb=bus.decoding(messages_pb2.ToolResult, on_result, "tool results"),
            )
        ]
        if on_update is not None:
            for call in calls:
                if call.name in STREAMING_TOOLS:
                    subs.append(await self._follow(call, on_update))
        workspace = trust.private_workspace(session_key, standing)
        sent = [
            self._call(c, pending[c.call_id], run_id, session_key, agent, workspace) for c in calls
        ]
        try:
            # A single call is awaited here, not in a task of gather's: it is published in the
            # same loop iteration as the subscription, so both go out in one socket write.
            return [await sent[0]] if len(sent) == 1 else list(await asyncio.gather(*sent))
        finally:
            for sub in subs:
                await sub.unsubscribe()

    async def _follow(self, call: CallRequest, on_update: OnUpdate) -> Subscription:
        async def on_message(_: Msg, update: messages_pb2.ToolUpdate) -> None:
            await on_update(call, update.text)

        return await self.nc.subscribe(
            self.subjects.tools_update(call.call_id),
            cb=bus.decoding(messages_pb2.ToolUpdate, on_message, "tool updates"),
        )

    async def _call(
        self,
        call: CallRequest,
        future: asyncio.Future[CallResult],
        run_id: str,
        session_key: str,
        agent: str,
        workspace: str,
    ) -> CallResult:
        with tracer.start_as_current_span("tool.call", kind=SpanKind.PRODUCER) as span:
            span.set_attribute("sb.tool", call.name)
            span.set_attribute("sb.tool.call_id", call.call_id)
            message = messages_pb2.ToolCall(
                call_id=call.call_id,
                run_id=run_id,
                session_key=session_key,
                agent=agent,
                tool=call.name,
                args_json=json.dumps(call.args),
                profile="default",
                timeout_s=self.timeout_s,
                workspace_session=workspace,
            )
            await bus.js_publish(
                self.js,
                self.subjects.tools_call("default"),
                message,
                msg_id=f"{run_id}:{call.call_id}",
            )
            try:
                result = await asyncio.wait_for(future, self.timeout_s + 5)
            except TimeoutError:
                span.set_status(Status(StatusCode.ERROR, "timeout"))
                return CallResult(
                    call.call_id,
                    f"Tool {call.name} did not answer within {self.timeout_s:.0f}s",
                    True,
                    {},
                )
            if result.is_error:
                span.set_status(Status(StatusCode.ERROR))
            return result


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
