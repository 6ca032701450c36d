"""Router: consumes INBOUND, admits (security), resolves the session, appends a LaneItem to the
session's lane; serves gRPC RouterAdmin (pairing)."""

from __future__ import annotations

import asyncio
import logging

from switchboard import registry, rpc
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2, router_pb2_grpc

from .admin import RouterAdminService
from .config import RouterSettings
from .pairing import PairingStore
from .pairing_notice import CodeSender
from .pipeline import DURABLE, INBOUND_ACK_WAIT_S, Router
from .security import ChannelPolicy

log = logging.getLogger(__name__)


async def serve(settings: RouterSettings, stop: asyncio.Event) -> None:
    async with ServiceRuntime(registry.get("router"), settings, stop) as rt:
        pairing = PairingStore(
            await rt.js.key_value(rt.subjects.pairing_bucket),
            settings.pairing_ttl_s,
            settings.pairing_max_pending,
        )
        await rt.serve_grpc(
            settings.router_grpc_host,
            settings.router_grpc_port,
            rpc.Servicer(
                router_pb2_grpc.add_RouterAdminServicer_to_server, RouterAdminService(pairing)
            ),
        )
        policy = ChannelPolicy(settings, pairing, CodeSender(rt))
        router = Router(rt, settings, policy)

        async def reload(new: RouterSettings) -> None:  # configfile.reload.RELOADABLE's
            policy.reload(new)
            router.reload(new)

        rt.on_reload(reload)
        worker = await rt.consume(
            "INBOUND",
            DURABLE,
            f"{settings.subject_prefix}.inbound.>",
            messages_pb2.InboundMessage,
            router.handle,
            concurrency=settings.concurrency,
            ack_wait=INBOUND_ACK_WAIT_S,
            track_backlog=False,
        )
        router.lend = worker.lend_slot  # a message waiting for an earlier one frees its slot
        log.info("router ready")
        await rt.wait_stopped()
