"""Agent-local tools: tools the agent runs itself instead of dispatching them to an executor,
because they need what only the agent has (the run's chat, the right to publish on OUTBOUND).

Their specs are offered to the model next to the executors' (a local tool shadows an executor
tool of the same name), and their calls pass the same gate as every other call (tool policy,
approval rules: :mod:`..approvals.toolgate`); only the dispatch differs (:mod:`..runs.toolphase`).
Arguments are validated against the tool's JSON Schema first: a bad argument is a tool error the
model can read, never an exception in the run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from switchboard.toolspec import ToolSpec, check_groups
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2

from .client import CallRequest, CallResult

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.agent")


@dataclass(frozen=True)
class LocalContext:
    """The run a local call belongs to; ``origin``: the lane item that started the run;
    ``standing``: the run's (docs/trust.md), which every local tool obeys (memory scope,
    session visibility, named message targets, cron jobs it sees)."""

    run_id: str
    session_key: str
    agent: str
    origin: messages_pb2.LaneItem
    standing: Standing = Standing.PERSONAL


class LocalTool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult: ...


@runtime_checkable
class OfferedPerAgent(Protocol):
    """A local tool only some agents are offered (``skill_read``: agents that have skills)."""

    def offered_to(self, agent: str) -> bool: ...


def tool_error(call: CallRequest, text: str, kind: str) -> CallResult:
    return CallResult(call.call_id, text, True, {"error": kind})


class LocalTools:
    def __init__(self, tools: Iterable[LocalTool] = ()) -> None:
        self._tools = {t.spec.name: t for t in tools}
        # Taken once: a tool may build its spec on each read, and a spec encodes its schema once.
        self._specs = {name: t.spec for name, t in self._tools.items()}
        for spec in self._specs.values():
            check_groups(spec)
        # Built at a tool's first call, importing jsonschema then (once per process, 60-100 ms
        # of CPU): its import was 4.5 % of the start-up's instructions (docs/startup.md).
        self._validators: dict[str, Draft202012Validator] = {}
        # Checked once: isinstance against a runtime-checkable Protocol costs ~25 us a tool,
        # and offered() runs before every model call.
        self._gates = {
            name: t.offered_to for name, t in self._tools.items() if isinstance(t, OfferedPerAgent)
        }

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self) -> list[ToolSpec]:
        return list(self._specs.values())

    def offered(self, executor_specs: Iterable[ToolSpec], agent: str) -> list[ToolSpec]:
        """The executors' specs and the local ones ``agent`` is offered (a local tool wins a
        name both have)."""
        gates = self._gates
        local = [
            spec
            for name, spec in self._specs.items()
            if (gate := gates.get(name)) is None or gate(agent)
        ]
        return [s for s in executor_specs if s.name not in self._tools] + local

    def _validator(self, name: str) -> Draft202012Validator:
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator

            schema = self._specs[name].parameters
            validator = self._validators[name] = Draft202012Validator(schema)
        return validator

    async def run_all(self, ctx: LocalContext, calls: list[CallRequest]) -> list[CallResult]:
        """Run the calls concurrently; the results in call order."""
        return list(await asyncio.gather(*(self._run(ctx, c) for c in calls)))

    async def _run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        tool = self._tools.get(call.name)
        if tool is None:
            return tool_error(call, f"Unknown tool {call.name!r}.", "unknown_tool")
        with tracer.start_as_current_span("tool.call") as span:
            span.set_attribute("sb.tool", call.name)
            span.set_attribute("sb.tool.call_id", call.call_id)
            span.set_attribute("sb.tool.local", True)
            errors = sorted(self._validator(call.name).iter_errors(call.args), key=str)
            if errors:
                span.set_status(Status(StatusCode.ERROR, "invalid_arguments"))
                where = "/".join(str(p) for p in errors[0].absolute_path)
                at = f" (at {where})" if where else ""
                text = f"Invalid arguments for {call.name}{at}: {_describe(errors[0])}"
                return tool_error(call, text, "invalid_arguments")
            try:
                result = await tool.run(ctx, call)
            except Exception as exc:
                log.exception("local tool %s failed", call.name, extra={"run_id": ctx.run_id})
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                return tool_error(call, f"{call.name} failed ({type(exc).__name__}).", "tool_error")
            if result.is_error:
                span.set_status(Status(StatusCode.ERROR))
            return result


def _describe(error: ValidationError) -> str:
    """The validator's message, with a long value named by its size instead of repeated."""
    shown = repr(error.instance)
    message = error.message
    if len(shown) > 60 and isinstance(error.instance, str):
        message = message.replace(shown, f"the text ({len(error.instance)} characters)")
    return message[:300]
