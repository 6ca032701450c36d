"""gRPC ``RouterAdmin``: the operator's view of DM and group pairing (list, approve (as an
owner with ``PairingDecision.owner``), deny, revoke). A refused decision (a
:class:`.PairingError`: INVALID_ARGUMENT, or NOT_FOUND) reaches the operator with its text
through :func:`.grpc_errors`."""

from __future__ import annotations

import logging

import grpc

from switchboard.errors_map import grpc_errors
from switchboard.v1 import router_pb2, router_pb2_grpc

from .metrics import PAIRING
from .pairing import PairingStore

log = logging.getLogger(__name__)
statuses = grpc_errors("the router failed")


class RouterAdminService(router_pb2_grpc.RouterAdminServicer):
    def __init__(self, store: PairingStore) -> None:
        self.store = store

    @statuses
    async def ListPairing(
        self, request: router_pb2.ListPairingRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.ListPairingResponse:
        found = await self.store.requests(request.channel)
        return router_pb2.ListPairingResponse(requests=found)

    @statuses
    async def ListPaired(
        self, request: router_pb2.ListPairingRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.ListPairedResponse:
        found = await self.store.paired(request.channel)
        return router_pb2.ListPairedResponse(senders=found)

    @statuses
    async def Approve(
        self, request: router_pb2.PairingDecision, context: grpc.aio.ServicerContext
    ) -> router_pb2.PairedSender:
        paired = await self.store.approve(
            request.channel, request.code, request.decided_by or "operator", request.owner
        )
        PAIRING.labels(request.channel, "approved").inc()
        log.info(
            "pairing approved",
            extra={"channel": request.channel, "by": paired.approved_by, "role": paired.role},
        )
        return paired

    @statuses
    async def Deny(
        self, request: router_pb2.PairingDecision, context: grpc.aio.ServicerContext
    ) -> router_pb2.PairingRequest:
        denied = await self.store.deny(request.channel, request.code)
        PAIRING.labels(request.channel, "denied").inc()
        return denied

    @statuses
    async def Revoke(
        self, request: router_pb2.RevokeRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.PairedSender:
        revoked = await self.store.revoke(request.channel, request.sender, request.account)
        PAIRING.labels(request.channel, "revoked").inc()
        return revoked
