"""``GET /api/usage``: token and cost usage from the agent's ``Sessions.Usage`` (operators), with
the agent's budget limits (``SB_BUDGET``) so that a chart can draw them."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import grpc
from fastapi import APIRouter, Request

from switchboard.v1 import sessions_pb2, sessions_pb2_grpc

from .errors import AGENT, ApiError, backend_error, checked_session_key

router = APIRouter(prefix="/api/usage")
OURS = {grpc.StatusCode.INVALID_ARGUMENT}


def _totals(t: sessions_pb2.UsageTotals) -> dict[str, Any]:
    return {
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "tokens": t.input_tokens + t.output_tokens,
        "cost_usd": round(t.cost_usd, 6),
        "calls": t.calls,
    }


@router.get("")
async def usage(
    request: Request, agent: str = "", day: str = "", session: str = "", run: str = ""
) -> dict[str, Any]:
    """Totals and rows per (agent, UTC day, model); every parameter narrows the selection;
    ``budget``: the agent's limits (``null`` without ``SB_BUDGET``)."""
    if day:
        try:
            date.fromisoformat(day)
        except ValueError:
            raise ApiError(400, "day must be a date like 2026-01-31 (UTC)", param="day") from None
    if len(agent) > 200 or len(run) > 200:
        raise ApiError(400, "agent and run are at most 200 characters", param="agent")
    stub: sessions_pb2_grpc.SessionsStub = request.app.state.sessions
    try:
        reply = await stub.Usage(
            sessions_pb2.UsageRequest(
                agent=agent,
                day=day,
                session_key=checked_session_key(session) if session else "",
                run_id=run,
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, AGENT, "Sessions.Usage", OURS) from exc
    return {
        "total": _totals(reply.total),
        "rows": [
            {"agent": r.agent, "day": r.day, "model": r.model, **_totals(r.totals)}
            for r in reply.rows
        ],
        "budget": json.loads(reply.budget_json) if reply.budget_json else None,
    }
