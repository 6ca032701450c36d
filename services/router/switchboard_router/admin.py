"""gRPC ``RouterAdmin``: the operator's view of DM and group pairing (list, approve (as an
owner with ``PairingDecision.owner``), deny, revoke)."""

from __future__ import annotations

import logging

import grpc

from switchboard.v1 import router_pb2, router_pb2_grpc

from .metrics import PAIRING
from .pairing import NotFound, PairingError, PairingStore

log = logging.getLogger(__name__)


class RouterAdminService(router_pb2_grpc.RouterAdminServicer):
    def __init__(self, store: PairingStore) -> None:
        self.store = store

    async def ListPairing(
        self, request: router_pb2.ListPairingRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.ListPairingResponse:
        try:
            found = await self.store.requests(request.channel)
        except PairingError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return router_pb2.ListPairingResponse(requests=found)

    async def ListPaired(
        self, request: router_pb2.ListPairingRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.ListPairedResponse:
        try:
            found = await self.store.paired(request.channel)
        except PairingError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return router_pb2.ListPairedResponse(senders=found)

    async def Approve(
        self, request: router_pb2.PairingDecision, context: grpc.aio.ServicerContext
    ) -> router_pb2.PairedSender:
        try:
            paired = await self.store.approve(
                request.channel, request.code, request.decided_by or "operator", request.owner
            )
        except NotFound as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except PairingError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        PAIRING.labels(request.channel, "approved").inc()
        log.info(
            "pairing approved",
            extra={"channel": request.channel, "by": paired.approved_by, "role": paired.role},
        )
        return paired

    async def Deny(
        self, request: router_pb2.PairingDecision, context: grpc.aio.ServicerContext
    ) -> router_pb2.PairingRequest:
        try:
            denied = await self.store.deny(request.channel, request.code)
        except NotFound as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except PairingError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        PAIRING.labels(request.channel, "denied").inc()
        return denied

    async def Revoke(
        self, request: router_pb2.RevokeRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.PairedSender:
        try:
            revoked = await self.store.revoke(request.channel, request.sender)
        except NotFound as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except PairingError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        PAIRING.labels(request.channel, "revoked").inc()
        return revoked
