"""Router: consumes INBOUND, admits (security), resolves the session, appends a LaneItem to the
session's lane."""

from __future__ import annotations

import asyncio
import logging
import time

from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from switchboard import bus, registry, rpc
from switchboard.runtime import ServiceRuntime
from switchboard.sessions import inbound_msg_id, session_token
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2, router_pb2, router_pb2_grpc

from .admin import RouterAdminService
from .config import RouterSettings
from .metrics import PAIRING, REFUSED, ROUTE_SECONDS, ROUTED
from .pairing import PairingStore
from .routing import RouteError, resolve
from .security import ChannelPolicy, InboundPolicy

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.router")


class Router:
    def __init__(
        self, rt: ServiceRuntime, settings: RouterSettings, security: InboundPolicy
    ) -> None:
        self.rt = rt
        self.settings = settings
        self.security = security

    async def handle(self, msg: Msg, inbound: messages_pb2.InboundMessage) -> None:
        start = time.perf_counter()
        with tracer.start_as_current_span(
            "router.route", context=extract_context(msg.headers), kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("sb.channel", inbound.channel)
            admission = await self.security.admit(inbound)
            if not admission.admitted:
                log.info(
                    "refused an inbound message: %s",
                    admission.reason,
                    extra={"channel": inbound.channel, "reason": admission.reason},
                )
                span.set_attribute("sb.refused", admission.reason)
                ROUTED.labels(inbound.channel, "refused").inc()
                REFUSED.labels(inbound.channel, admission.reason).inc()
                await msg.term()
                return
            try:
                route = resolve(inbound, self.settings.default_agent)
            except RouteError as exc:
                log.warning("dropping unroutable message: %s", exc)
                ROUTED.labels(inbound.channel, "unroutable").inc()
                await msg.term()
                return
            span.set_attribute("sb.session", route.session_key)
            item = messages_pb2.LaneItem(
                session_key=route.session_key,
                agent=route.agent,
                message=inbound,
                queue_mode=self.settings.channel_queue_modes.get(inbound.channel, ""),
                enqueued_at_ms=int(time.time() * 1000),
            )
            subject = self.rt.subjects.lane(route.agent, session_token(route.session_key))
            msg_id = inbound_msg_id(inbound.channel, inbound.account, inbound.message_id)
            with tracer.start_as_current_span("lane.enqueue", kind=SpanKind.PRODUCER) as lane_span:
                seq = await bus.js_publish(self.rt.js, subject, item, msg_id=msg_id)
                lane_span.set_attribute("sb.lane.seq", seq)
            log.info(
                "routed to %s",
                route.session_key,
                extra={"session": route.session_key, "channel": inbound.channel, "lane_seq": seq},
            )
        await msg.ack()
        ROUTED.labels(inbound.channel, "routed").inc()
        ROUTE_SECONDS.observe(time.perf_counter() - start)


def pairing_text(request: router_pb2.PairingRequest) -> str:
    minutes = max(1, round((request.expires_at_ms - request.created_at_ms) / 60_000))
    return (
        "I don't know you yet, so I can't answer here.\n"
        f"Your pairing code: {request.code}\n"
        "Ask the owner of this assistant to approve it "
        f"(switchboard pairing approve {request.channel} {request.code}). "
        f"The code is valid for {minutes} minutes."
    )


class CodeSender:
    """Sends a new pairing request's code to the sender's chat as an OUTBOUND part (the
    gateway delivers it like a reply), once per request (``Nats-Msg-Id`` from the code)."""

    def __init__(self, rt: ServiceRuntime) -> None:
        self.rt = rt

    async def __call__(
        self, msg: messages_pb2.InboundMessage, request: router_pb2.PairingRequest
    ) -> None:
        run_id = f"pairing:{request.channel}:{request.code}"
        part = messages_pb2.OutboundMessage(
            run_id=run_id,
            part=0,
            parts=1,
            channel=msg.channel,
            account=msg.account or "default",
            chat=msg.chat,
            thread_id=msg.thread_id,
            text=pairing_text(request),
            message_ids=[msg.message_id],
            reply_context=msg.reply_context,
        )
        subject = self.rt.subjects.outbound(
            bus.subject_token(part.channel), bus.subject_token(part.account)
        )
        await bus.js_publish(self.rt.js, subject, part, msg_id=f"{run_id}:0")
        PAIRING.labels(msg.channel, "requested").inc()
        log.info("pairing code sent", extra={"channel": msg.channel})


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
        router = Router(rt, settings, ChannelPolicy(settings, pairing, CodeSender(rt)))
        await rt.consume(
            "INBOUND",
            "router",
            f"{settings.subject_prefix}.inbound.>",
            messages_pb2.InboundMessage,
            router.handle,
            concurrency=settings.concurrency,
            track_backlog=False,
        )
        log.info("router ready")
        await rt.wait_stopped()
