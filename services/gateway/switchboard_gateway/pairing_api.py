"""DM and group pairing for operators (``/api/pairing``), served by the router's gRPC
RouterAdmin: list the pending requests, approve (as an owner with the body ``{"owner": true}``)
or deny one by its code, list and revoke approved senders and groups (a group's sender is
``group:<chat id>``). An approval belongs to the channel's account the request came from
(``account``; revoke one of a named account with ``?account=``)."""

from __future__ import annotations

from typing import Any

import grpc
from fastapi import APIRouter, Request

from switchboard import jsonsafe
from switchboard.v1 import router_pb2, router_pb2_grpc

from .errors import ROUTER, ApiError, backend_error

router = APIRouter(prefix="/api/pairing")
TIMEOUT_S = 5.0
MAX_DECISION_BYTES = 4096  # {"owner": true} and room to spare


def _stub(request: Request) -> router_pb2_grpc.RouterAdminStub:
    stub: router_pb2_grpc.RouterAdminStub = request.app.state.router_admin
    return stub


def request_json(r: router_pb2.PairingRequest) -> dict[str, Any]:
    return {
        "channel": r.channel,
        "account": r.account,
        "sender": r.sender,
        "code": r.code,
        "chat_id": r.chat_id,
        "text": r.text,
        "created_at_ms": r.created_at_ms,
        "expires_at_ms": r.expires_at_ms,
    }


def paired_json(p: router_pb2.PairedSender) -> dict[str, Any]:
    return {
        "channel": p.channel,
        "account": p.account or "default",
        "sender": p.sender,
        "approved_by": p.approved_by,
        "approved_at_ms": p.approved_at_ms,
        "role": p.role or "user",  # approvals from before roles: a user (docs/trust.md)
    }


async def _as_owner(request: Request) -> bool:
    """The approve body's ``owner`` (no body, or ``{}``: false); anything else is a 400."""
    body = await request.body()  # bounded by the BodyLimit middleware
    if not body.strip():
        return False
    try:
        data = jsonsafe.loads(body, max_bytes=MAX_DECISION_BYTES)
    except jsonsafe.JsonRefused as exc:
        raise ApiError(400, f"The body must be a JSON object: {exc}.") from None
    if not isinstance(data, dict) or set(data) - {"owner"}:
        raise ApiError(400, 'The body must be a JSON object like {"owner": true}.')
    owner = data.get("owner", False)
    if not isinstance(owner, bool):
        raise ApiError(400, '"owner" must be true or false.', param="owner")
    return owner


@router.get("")
async def list_requests(request: Request, channel: str = "") -> dict[str, Any]:
    try:
        reply = await _stub(request).ListPairing(
            router_pb2.ListPairingRequest(channel=channel), timeout=TIMEOUT_S
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, ROUTER, "ListPairing") from exc
    return {"requests": [request_json(r) for r in reply.requests]}


@router.post("/{channel}/{code}/approve")
async def approve(channel: str, code: str, request: Request) -> dict[str, Any]:
    owner = await _as_owner(request)
    try:
        reply = await _stub(request).Approve(
            router_pb2.PairingDecision(channel=channel, code=code, decided_by="api", owner=owner),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, ROUTER, "Approve") from exc
    return paired_json(reply)


@router.post("/{channel}/{code}/deny")
async def deny(channel: str, code: str, request: Request) -> dict[str, Any]:
    try:
        reply = await _stub(request).Deny(
            router_pb2.PairingDecision(channel=channel, code=code, decided_by="api"),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, ROUTER, "Deny") from exc
    return request_json(reply)


@router.get("/paired")
async def list_paired(request: Request, channel: str = "") -> dict[str, Any]:
    try:
        reply = await _stub(request).ListPaired(
            router_pb2.ListPairingRequest(channel=channel), timeout=TIMEOUT_S
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, ROUTER, "ListPaired") from exc
    return {"senders": [paired_json(p) for p in reply.senders]}


@router.delete("/paired/{channel}/{sender}")
async def revoke(channel: str, sender: str, request: Request, account: str = "") -> dict[str, Any]:
    """``account``: the channel's account the approval is on (none: ``default``)."""
    try:
        reply = await _stub(request).Revoke(
            router_pb2.RevokeRequest(channel=channel, sender=sender, account=account),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, ROUTER, "Revoke") from exc
    return paired_json(reply)
