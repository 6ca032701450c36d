"""Tool approvals (``/api/approvals``) and direct tool invocation (``POST /tools/invoke``), both
served by the agent over gRPC: the agent owns tool policy and the ToolCall rows."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Literal

import grpc
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from switchboard.sessions import AgentId, direct_key, parse_session_key
from switchboard.v1 import approvals_pb2, approvals_pb2_grpc

from .errors import AGENT, ApiError, backend_error, checked_session_key

router = APIRouter()
STATUSES = ("awaiting_approval", "approved", "denied", "expired", "cancelled")
# The gRPC statuses of a refused invocation (the agent tags each refusal with its code).
_INVOKE_REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
}
_DECIDED = grpc.StatusCode.FAILED_PRECONDITION  # the approval was decided already
DECIDING = replace(AGENT, ours=frozenset({_DECIDED}), codes={_DECIDED: "already_decided"})


class Decision(BaseModel):
    decision: Literal["approve", "deny"]
    reason: str = Field(default="", max_length=2000)


class Invoke(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    tool: str = Field(min_length=1, max_length=128)
    args: dict[str, Any] = Field(default_factory=dict)
    session_key: str = Field(default="", alias="sessionKey", max_length=512)
    dry_run: bool = Field(default=False, alias="dryRun")
    agent: AgentId | None = None


def approval_json(a: approvals_pb2.Approval) -> dict[str, Any]:
    return {
        "id": a.approval_id,
        "status": a.status,
        "tool": a.tool,
        "args": json.loads(a.args_json) if a.args_json else {},
        "rule": a.rule,
        "session_key": a.session_key,
        "agent": a.agent,
        "run_id": a.run_id,
        "call_id": a.call_id,
        "decided_by": a.decided_by or None,
        "reason": a.reason or None,
        "requested_at_ms": a.requested_at_ms,
        "decided_at_ms": a.decided_at_ms or None,
        "started_at_ms": a.started_at_ms or None,
        "finished_at_ms": a.finished_at_ms or None,
    }


def _stub(request: Request) -> approvals_pb2_grpc.ApprovalsStub:
    stub: approvals_pb2_grpc.ApprovalsStub = request.app.state.approvals
    return stub


@router.get("/api/approvals")
async def list_approvals(
    request: Request, session_key: str = "", status: str = "", limit: int = 100
) -> dict[str, Any]:
    if status and status not in STATUSES:
        raise ApiError(400, f"status must be one of {', '.join(STATUSES)}", param="status")
    if not 1 <= limit <= 1000:
        raise ApiError(400, "limit must be between 1 and 1000", param="limit")
    if session_key:
        checked_session_key(session_key, "session_key")
    try:
        reply = await _stub(request).List(
            approvals_pb2.ListApprovalsRequest(session_key=session_key, status=status, limit=limit),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Approvals.List") from exc
    return {"approvals": [approval_json(a) for a in reply.approvals]}


@router.post("/api/approvals/{approval_id}")
async def decide(approval_id: str, body: Decision, request: Request) -> dict[str, Any]:
    try:
        reply = await _stub(request).Decide(
            approvals_pb2.DecideApprovalRequest(
                approval_id=approval_id,
                approve=body.decision == "approve",
                decided_by="api",
                reason=body.reason,
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            raise ApiError(404, f"No approval {approval_id!r}", code="approval_not_found") from exc
        raise backend_error(exc, DECIDING, "Approvals.Decide") from exc
    return approval_json(reply)


@router.post("/tools/invoke")
async def invoke(body: Invoke, request: Request) -> JSONResponse:
    stub: approvals_pb2_grpc.ToolAccessStub = request.app.state.tool_access
    settings = request.app.state.settings
    key = body.session_key or direct_key(
        body.agent or settings.default_agent, "api", "tools-invoke"
    )
    checked_session_key(key, "sessionKey")
    # The agent named, else the one the session key names (<agent>:<channel>:...), else the
    # default agent.
    agent = body.agent or parse_session_key(key).root.agent or settings.default_agent
    try:
        reply = await stub.Invoke(
            approvals_pb2.InvokeToolRequest(
                tool=body.tool,
                args_json=json.dumps(body.args),
                session_key=key,
                dry_run=body.dry_run,
                agent=agent,
            ),
            timeout=settings.tool_invoke_timeout_s,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "ToolAccess.Invoke", _INVOKE_REFUSALS, marked=True) from exc
    return JSONResponse(
        {
            "ok": reply.ok,
            "content": [{"type": "text", "text": reply.text}],
            "details": json.loads(reply.details_json) if reply.details_json else {},
            "isolation": json.loads(reply.isolation_json) if reply.isolation_json else None,
            **({"error": reply.error} if reply.error else {}),
            **({"dryRun": True} if body.dry_run else {}),
        }
    )
