"""The ``cron`` tool: the agent manages its own scheduled jobs through the scheduler's gRPC
``Scheduler`` (``SB_SCHEDULER_ADDR``). Actions: ``list`` (the agent's jobs), ``add`` (a message
job: a cron expression with a time zone, an interval ``every`` or a one-shot ``at``), ``remove``
and ``run`` (now). A job it adds wakes the run's own session and, when the run came from a chat,
replies there. Jobs of other agents are invisible to it, and outside the owner's standing
(docs/trust.md) so are the jobs of other conversations: ``list``, ``remove`` and ``run`` see only
the jobs whose session is in the run's own session tree (another one's read as not found). A job
fires into its session and so keeps that session's standing. ``cron`` is ``group:automation``
for the tool policy (not in the group profile); sub-agents are denied it by default."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc

from switchboard import scheduling, trust
from switchboard.errors import InvalidSchedule
from switchboard.toolspec import ToolSpec
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2, scheduler_pb2, scheduler_pb2_grpc

from ..outbound.chat_parts import reply_destination
from ..outbound.publisher import OutboundPublisher
from .client import CallRequest, CallResult
from .local import LocalContext, tool_error

NAME = "cron"
TIMEOUT_S = 10.0
UNAVAILABLE = "The scheduler is unavailable right now; try again later."

SPEC = ToolSpec(
    NAME,
    "Manage scheduled jobs: reminders and recurring work that wake you later in this"
    " conversation. action=add needs a name, a message (what you will be told when it runs)"
    " and one schedule: cron (five fields, e.g. '0 9 * * MON-FRI', with timezone, an IANA"
    " name), every ('30m', '1h30m') or at (ISO 8601 time, or '+10m'). action=list shows your"
    " jobs; action=remove and action=run (now) take a name.",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "add", "remove", "run"]},
            "name": {"type": "string", "pattern": scheduling.JOB_NAME_PATTERN},
            "message": {"type": "string", "minLength": 1, "maxLength": 4000},
            "cron": {"type": "string", "minLength": 1, "maxLength": 200},
            "timezone": {"type": "string", "minLength": 1, "maxLength": 64},
            "every": {"type": "string", "minLength": 2, "maxLength": 32},
            "at": {"type": "string", "minLength": 2, "maxLength": 64},
            "urgent": {"type": "boolean", "description": "run even in quiet hours"},
        },
        "required": ["action"],
        "additionalProperties": False,
    },
    groups=("automation",),
)


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def describe(job: scheduler_pb2.Job) -> str:
    if job.cron:
        schedule = f"cron '{job.cron}' ({job.timezone or 'UTC'})"
    elif job.every_ms:
        schedule = f"every {scheduling.format_duration_ms(job.every_ms)}"
    else:
        schedule = f"at {_when(job.at_ms)}"
    state = f"next {_when(job.next_run_ms)}" if job.enabled else "done/disabled"
    last = f", last: {job.last_result}" if job.last_result else ""
    error = f" (error: {job.last_error})" if job.last_error else ""
    return f"{job.name}: {schedule}, {state}{last}{error} - {job.message[:80]!r}"


def visible(ctx: LocalContext, job: scheduler_pb2.Job) -> bool:
    """Is ``job`` one the run may see: its agent's, and (outside the owner's standing) of a
    session in the run's own session tree?"""
    if job.agent != ctx.agent:
        return False
    return ctx.standing is Standing.OWNER or (
        trust.root_key(job.session_key) == trust.root_key(ctx.session_key)
    )


class CronTool:
    def __init__(self, channel: grpc.aio.Channel, outbound: OutboundPublisher) -> None:
        self.stub = scheduler_pb2_grpc.SchedulerStub(channel)
        self.outbound = outbound

    @property
    def spec(self) -> ToolSpec:
        return SPEC

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        action = str(call.args["action"])
        try:
            if action == "list":
                return await self._list(ctx, call)
            name = str(call.args.get("name") or "")
            if not name:
                return tool_error(call, f"cron: action {action} needs a name.", "invalid_arguments")
            if action == "add":
                return await self._add(ctx, call, name)
            if not await self._own(ctx, name):
                return tool_error(call, f"cron: no job named {name!r}", "not_found")
            if action == "remove":
                await self.stub.Remove(scheduler_pb2.JobName(name=name), timeout=TIMEOUT_S)
                return CallResult(call.call_id, f"removed job {name}", False, {"name": name})
            ran = await self.stub.RunNow(scheduler_pb2.JobName(name=name), timeout=TIMEOUT_S)
            text = f"ran job {name}: {ran.error or ran.result}"
            return CallResult(call.call_id, text, bool(ran.error), {"name": name})
        except InvalidSchedule as exc:
            return tool_error(call, f"cron: {exc}", "invalid_arguments")
        except grpc.aio.AioRpcError as exc:
            return self._refused(call, exc)

    async def _own(self, ctx: LocalContext, name: str) -> bool:
        """May the run see the job? (Another agent's, or another conversation's outside the
        owner's standing, reads as not found.)"""
        try:
            job = await self.stub.Status(scheduler_pb2.JobName(name=name), timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return False  # the same answer as for a job out of sight
            raise
        return visible(ctx, job)

    async def _list(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        found = await self.stub.List(
            scheduler_pb2.ListJobsRequest(agent=ctx.agent), timeout=TIMEOUT_S
        )
        lines = [describe(j) for j in found.jobs if visible(ctx, j)]
        text = "\n".join(lines) if lines else "No scheduled jobs."
        return CallResult(call.call_id, text, False, {"jobs": len(lines)})

    async def _add(self, ctx: LocalContext, call: CallRequest, name: str) -> CallResult:
        args = call.args
        message = str(args.get("message") or "")
        if not message:
            return tool_error(call, "cron: add needs a message.", "invalid_arguments")
        job = scheduler_pb2.Job(
            name=name,
            kind="message",
            agent=ctx.agent,
            session_key=ctx.session_key,
            message=message,
            cron=str(args.get("cron") or ""),
            timezone=str(args.get("timezone") or ""),
            every_ms=scheduling.parse_duration_ms(args["every"]) if args.get("every") else 0,
            at_ms=scheduling.parse_at_ms(args["at"]) if args.get("at") else 0,
            urgent=bool(args.get("urgent", False)),
        )
        destination = reply_destination(self.outbound, ctx.origin)
        if destination is not None:
            job.deliver_to.CopyFrom(
                messages_pb2.DeliveryTarget(
                    channel=destination.channel,
                    account=destination.account,
                    chat=messages_pb2.ChatRef(id=destination.chat_id, type=destination.chat_type),
                    thread_id=destination.thread_id,
                )
            )
        added = await self.stub.Add(job, timeout=TIMEOUT_S)
        return CallResult(
            call.call_id,
            f"scheduled {describe(added)}",
            False,
            {"name": added.name, "next_run_ms": added.next_run_ms},
        )

    @staticmethod
    def _refused(call: CallRequest, exc: grpc.aio.AioRpcError) -> CallResult:
        code = exc.code()
        if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS):
            return tool_error(call, f"cron: {exc.details()}", "invalid_arguments")
        if code == grpc.StatusCode.NOT_FOUND:
            return tool_error(call, f"cron: {exc.details()}", "not_found")
        return tool_error(call, UNAVAILABLE, "scheduler_unavailable")
