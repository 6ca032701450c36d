"""Session endpoints: list the sessions, post a message into any session, read a session's
transcript, change its settings, and reset, delete, abort or compact it (the agent's Sessions
gRPC)."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import grpc
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from switchboard.queue_modes import QueueMode
from switchboard.sessions import AGENT_ID_PATTERN, AgentId
from switchboard.v1 import sessions_pb2, sessions_pb2_grpc

from .conversations import Conversations, Outgoing
from .errors import AGENT, ApiError, backend_error, checked_session_key
from .hooks_auth import message_id_for

router = APIRouter(prefix="/api/sessions")
# The agent's Sessions servicer aborts with INVALID_ARGUMENT and a message for the caller.
OURS = {grpc.StatusCode.INVALID_ARGUMENT}
# ... and Reset/Delete with NOT_FOUND for a session that does not exist.
OURS_FOUND = {*OURS, grpc.StatusCode.NOT_FOUND}
COMPACT_TIMEOUT_S = 300.0  # a flush and a summary: two model calls


class PatchSession(BaseModel):
    # a mode, or "default" to drop the session's override
    queue_mode: QueueMode | Literal["default"] | None = None
    # {"profile", "allow", "deny"}; null clears the override; absent leaves it as it is.
    tool_policy: dict[str, Any] | None = None
    # "provider:model" the session uses instead of the agent's; "default" goes back to it.
    model: str | None = Field(default=None, min_length=1, max_length=200)


class CompactSession(BaseModel):
    # recent user turns kept as they are; absent: SB_COMPACTION_KEEP_TURNS
    keep_turns: int | None = Field(default=None, ge=1, le=100)


class PostMessage(BaseModel):
    text: str = Field(min_length=1, max_length=100_000)
    agent: AgentId | None = None


@router.get("")
async def list_sessions(request: Request, agent: str = "", limit: int = 100) -> dict[str, Any]:
    """The sessions with a transcript, most recently active first (``agent``: only its)."""
    if limit < 1 or limit > 1000:
        raise ApiError(400, "limit must be between 1 and 1000", param="limit")
    if agent and not re.fullmatch(AGENT_ID_PATTERN, agent):
        raise ApiError(400, f"agent must match {AGENT_ID_PATTERN}", param="agent")
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.List(
            sessions_pb2.ListSessionsRequest(agent=agent, limit=limit), timeout=5.0
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.List", OURS) from exc
    return {"sessions": [session_summary(s) for s in reply.sessions]}


def session_summary(s: sessions_pb2.SessionInfo) -> dict[str, Any]:
    """One session of a ``Sessions.List`` reply, as the HTTP API and the MCP server show it."""
    return {
        "session_key": s.session_key,
        "agent": s.agent,
        "updated_at_ms": s.updated_at_ms,
        "message_count": s.message_count,
        "usage": {
            "input_tokens": s.usage.input_tokens,
            "output_tokens": s.usage.output_tokens,
            "cost_usd": s.usage.cost_usd,
            "calls": s.usage.calls,
        },
    }


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
    session_key = checked_session_key(key)
    out = Outgoing(
        "api",
        body.text,
        session_key,
        body.agent or settings.default_agent,
        sender="api",
        # A client that lost the answer (a dropped connection) sends the same key again: the
        # INBOUND stream drops the copy (within its 2-minute duplicate window).
        message_id=message_id_for(request, f"session:{session_key}"),
    )
    conversations: Conversations = request.app.state.conversations
    new = await conversations.post(out)
    answer = {"message_id": out.message_id, "session_key": out.session_key, "status": "queued"}
    return JSONResponse({**answer, "duplicate": not new}, status_code=202)


@router.patch("/{key}")
async def patch_session(key: str, body: PatchSession, request: Request) -> dict[str, Any]:
    if not body.model_fields_set & {"queue_mode", "tool_policy", "model"}:
        raise ApiError(400, "Nothing to change: give queue_mode, tool_policy and/or model")
    if "model" in body.model_fields_set and body.model is None:
        raise ApiError(400, 'model cannot be null; use "default"', param="model")
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
                model=body.model or "",
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.Patch", OURS) from exc
    return {
        "session_key": reply.session_key,
        "queue_mode": reply.queue_mode or "default",
        "tool_policy": json.loads(reply.tool_policy_json) if reply.tool_policy_json else None,
        "model": reply.model or "default",
    }


@router.post("/{key}/reset")
async def reset_session(key: str, request: Request) -> dict[str, Any]:
    """A fresh transcript for the session (pending messages are still answered, once)."""
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.Reset(
            sessions_pb2.ResetSessionRequest(session_key=checked_session_key(key)), timeout=5.0
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.Reset", OURS_FOUND) from exc
    return {"session_key": reply.session_key, "messages_removed": reply.messages_removed}


@router.delete("/{key}")
async def delete_session(key: str, request: Request) -> dict[str, Any]:
    """Abort the session's run and delete its transcript and settings."""
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.Delete(
            sessions_pb2.DeleteSessionRequest(
                session_key=checked_session_key(key), requested_by="api"
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.Delete", OURS_FOUND) from exc
    return {
        "session_key": reply.session_key,
        "deleted": True,
        "messages_removed": reply.messages_removed,
    }


@router.post("/{key}/abort")
async def abort_session(key: str, request: Request) -> dict[str, Any]:
    """Interrupt the session's run in progress (``aborted``: false when none was running)."""
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.Abort(
            sessions_pb2.AbortSessionRequest(
                session_key=checked_session_key(key), requested_by="api"
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.Abort", OURS) from exc
    return {"session_key": reply.session_key, "aborted": reply.aborted}


@router.post("/{key}/compact")
async def compact_session(
    key: str, request: Request, body: CompactSession | None = None
) -> dict[str, Any]:
    """Compact the transcript now: durable facts flushed to memory, older turns summarised
    (two model calls: the answer can take a while)."""
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    keep = body.keep_turns if body is not None and body.keep_turns else 0
    try:
        reply = await stub.Compact(
            sessions_pb2.CompactSessionRequest(
                session_key=checked_session_key(key), keep_turns=keep
            ),
            timeout=COMPACT_TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.Compact", OURS_FOUND) from exc
    return {
        "session_key": reply.session_key,
        "compacted": reply.compacted,
        "note": reply.note,
        "messages_compacted": reply.messages_compacted,
        "summary": reply.summary,
        "facts_flushed": reply.facts_flushed,
        "flushed_to": reply.flushed_to,
        "tokens_before": reply.tokens_before,
        "tokens_after": reply.tokens_after,
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
        raise backend_error(exc, AGENT, "Sessions.History", OURS) from exc
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
