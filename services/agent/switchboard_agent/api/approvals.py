"""gRPC ``Approvals`` (list and decide tool-call approvals) and ``ToolAccess`` (direct tool
invocation through the same policy and executor path as a run's calls). A refusal is a kind
of :mod:`switchboard.errors` with its ``sb-error`` code (``policy_denied``...), turned into its
status by :func:`.grpc_errors`."""

from __future__ import annotations

import json
import uuid

import grpc

from switchboard import trust
from switchboard.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from switchboard.errors_map import grpc_errors
from switchboard.sessions import validate_session_key
from switchboard.trust import Role
from switchboard.v1 import approvals_pb2, approvals_pb2_grpc, messages_pb2

from ..approvals.store import (
    AlreadyDecided,
    ApprovalNotFound,
    ApprovalRow,
    ApprovalStore,
    ApprovalWaiter,
)
from ..approvals.toolgate import ToolRules
from ..sessions.store import SessionStore
from ..tools.client import CallRequest, ToolDispatcher
from ..tools.local import LocalContext, LocalTools
from .sessions import epoch_ms

INVOKE_CHANNEL = "api"  # an invoke has no chat of its own
statuses = grpc_errors("the agent failed")


def approval_pb(r: ApprovalRow) -> approvals_pb2.Approval:
    return approvals_pb2.Approval(
        approval_id=r.approval_id,
        run_id=r.run_id,
        session_key=r.session_key,
        agent=r.agent,
        call_id=r.call_id,
        tool=r.tool,
        args_json=json.dumps(r.args),
        rule=r.rule,
        status=r.status,
        decided_by=r.decided_by,
        reason=r.reason,
        requested_at_ms=epoch_ms(r.requested_at),
        decided_at_ms=epoch_ms(r.decided_at),
        started_at_ms=epoch_ms(r.started_at),
        finished_at_ms=epoch_ms(r.finished_at),
    )


class ApprovalsService(approvals_pb2_grpc.ApprovalsServicer):
    def __init__(self, store: ApprovalStore, waiter: ApprovalWaiter) -> None:
        self.store = store
        self.waiter = waiter

    @statuses
    async def List(
        self, request: approvals_pb2.ListApprovalsRequest, context: grpc.aio.ServicerContext
    ) -> approvals_pb2.ListApprovalsResponse:
        limit = request.limit if 0 < request.limit <= 1000 else 100
        rows = await self.store.find(request.session_key, request.status, limit)
        return approvals_pb2.ListApprovalsResponse(approvals=[approval_pb(r) for r in rows])

    @statuses
    async def Decide(
        self, request: approvals_pb2.DecideApprovalRequest, context: grpc.aio.ServicerContext
    ) -> approvals_pb2.Approval:
        status = "approved" if request.approve else "denied"
        try:
            row = await self.store.decide(
                request.approval_id, status, request.decided_by, request.reason[:2000]
            )
        except ApprovalNotFound as exc:
            raise NotFound("no such approval") from exc
        except AlreadyDecided as exc:
            raise FailedPrecondition(f"the approval is already {exc.row.status}") from exc
        await self.waiter.notify(row.run_id)
        return approval_pb(row)


class ToolAccessService(approvals_pb2_grpc.ToolAccessServicer):
    def __init__(
        self,
        sessions: SessionStore,
        rules: ToolRules,
        tools: ToolDispatcher,
        local: LocalTools | None = None,
    ) -> None:
        self.sessions = sessions
        self.rules = rules
        self.tools = tools
        self.local = local or LocalTools()  # the agent's own tools (memory_*, message)

    @statuses
    async def Invoke(
        self, request: approvals_pb2.InvokeToolRequest, context: grpc.aio.ServicerContext
    ) -> approvals_pb2.InvokeToolResponse:
        try:
            key = validate_session_key(request.session_key)
            args = json.loads(request.args_json or "{}")
        except ValueError as exc:  # an invalid session key is one too
            raise InvalidArgument(str(exc), code="invalid_request") from exc
        if not isinstance(args, dict):
            raise InvalidArgument("args: not an object", code="invalid_arguments")
        agent = request.agent or "main"
        state = await self.sessions.lane_state(key)
        # The gateway's caller holds its token: the operator's message into the session, which
        # gets no more than the session's own standing (docs/trust.md).
        standing = trust.standing_of(
            key,
            role=Role.OWNER,
            channel=INVOKE_CHANNEL,
            sender="",
            chat_id="",
            chat_type="",
            stored=state.standing,
        )
        offered = self.local.offered(await self.tools.specs(agent), agent)
        policy = self.rules.policy(agent, key, state.tool_policy, standing=standing)
        policy = policy.knowing(offered)
        decision = policy.allows(request.tool)
        if not decision.allowed:
            raise PermissionDenied(decision.reason, code="policy_denied")
        spec = next((s for s in offered if s.name == request.tool), None)
        if spec is None:
            raise NotFound(f"no tool {request.tool!r}", code="unknown_tool")
        # Imported at the first direct call, not at start (docs/startup.md, third round).
        from jsonschema import Draft202012Validator

        errors = sorted(Draft202012Validator(spec.parameters).iter_errors(args), key=str)
        if errors:
            raise InvalidArgument(
                f"Invalid arguments for {request.tool}: {errors[0].message[:300]}",
                code="invalid_arguments",
            )
        rule = self.rules.approvals.requires_approval(request.tool, args, policy.catalogue)
        if rule is not None:
            raise PermissionDenied(
                f"{request.tool} requires approval ({rule}); call it from a session instead",
                code="approval_required",
            )
        if request.dry_run:
            return approvals_pb2.InvokeToolResponse(ok=True, text=decision.reason)
        run_id = f"invoke_{uuid.uuid4().hex}"
        call = CallRequest(f"call_{uuid.uuid4().hex[:24]}", request.tool, args)
        if request.tool in self.local:
            # As if the session's own chat asked: an invoke has no chat of its own ("api").
            origin = messages_pb2.LaneItem(
                session_key=key,
                agent=agent,
                message=messages_pb2.InboundMessage(channel=INVOKE_CHANNEL, session_key=key),
            )
            ctx = LocalContext(run_id, key, agent, origin, standing)
            [result] = await self.local.run_all(ctx, [call])
        else:
            [result] = await self.tools.run_all(run_id, key, agent, [call], standing=standing)
        details = dict(result.details)
        isolation = details.pop("isolation", None)
        return approvals_pb2.InvokeToolResponse(
            ok=not result.is_error,
            text=result.content,
            details_json=json.dumps(details),
            isolation_json=json.dumps(isolation) if isolation is not None else "",
            error=str(details.get("error", "tool_error")) if result.is_error else "",
        )
