"""Session endpoints: post a message into any session, read a session's transcript."""

from __future__ import annotations

import json
from typing import Any, Literal

import grpc
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from switchboard.queue_modes import QueueMode
from switchboard.sessions import AgentId
from switchboard.v1 import sessions_pb2, sessions_pb2_grpc

from .conversations import Conversations, Outgoing
from .errors import ApiError, agent_error, checked_session_key

router = APIRouter(prefix="/api/sessions")
# The agent's Sessions servicer aborts with INVALID_ARGUMENT and a message for the caller.
OURS = {grpc.StatusCode.INVALID_ARGUMENT: 400}


class PatchSession(BaseModel):
    # a mode, or "default" to drop the session's override
    queue_mode: QueueMode | Literal["default"] | None = None
    # {"profile", "allow", "deny"}; null clears the override; absent leaves it as it is.
    tool_policy: dict[str, Any] | None = None


class PostMessage(BaseModel):
    text: str = Field(min_length=1, max_length=100_000)
    agent: AgentId | None = None


@router.post("/{key}/messages", status_code=202)
async def post_message(key: str, body: PostMessage, request: Request) -> JSONResponse:
    settings = request.app.state.settings
    if len(body.text) > settings.max_body_chars:
        raise ApiError(
            400,
            f"Too much text: {len(body.text)} characters, at most {settings.max_body_chars} "
            "(SB_MAX_BODY_CHARS).",
            code="too_much_text",
            param="text",
        )
    out = Outgoing(
        "api",
        body.text,
        checked_session_key(key),
        body.agent or settings.default_agent,
        sender="api",
    )
    conversations: Conversations = request.app.state.conversations
    await conversations.post(out)
    return JSONResponse(
        {"message_id": out.message_id, "session_key": out.session_key, "status": "queued"},
        status_code=202,
    )


@router.patch("/{key}")
async def patch_session(key: str, body: PatchSession, request: Request) -> dict[str, Any]:
    if not body.model_fields_set & {"queue_mode", "tool_policy"}:
        raise ApiError(400, "Nothing to change: give queue_mode and/or tool_policy")
    if "queue_mode" in body.model_fields_set and body.queue_mode is None:
        raise ApiError(400, 'queue_mode cannot be null; use "default"', param="queue_mode")
    policy = json.dumps(body.tool_policy) if "tool_policy" in body.model_fields_set else ""
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.Patch(
            sessions_pb2.PatchSessionRequest(
                session_key=checked_session_key(key),
                queue_mode=body.queue_mode or "",
                tool_policy_json=policy,
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise agent_error(exc, "Sessions.Patch", OURS) from exc
    return {
        "session_key": reply.session_key,
        "queue_mode": reply.queue_mode or "default",
        "tool_policy": json.loads(reply.tool_policy_json) if reply.tool_policy_json else None,
    }


@router.get("/{key}/history")
async def history(key: str, request: Request, limit: int = 0) -> dict[str, Any]:
    if limit < 0 or limit > 10_000:
        raise ApiError(400, "limit must be between 0 (all) and 10000", param="limit")
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.History(
            sessions_pb2.HistoryRequest(session_key=checked_session_key(key), limit=limit),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise agent_error(exc, "Sessions.History", OURS) from exc
    return {
        "session_key": reply.session_key,
        "messages": [
            {
                "role": m.role,
                "content": json.loads(m.content_json),
                "run_id": m.run_id,
                "created_at_ms": m.created_at_ms,
            }
            for m in reply.messages
        ],
    }
