"""Router: consumes INBOUND, admits (security), resolves the session, appends a LaneItem to the
session's lane."""

from __future__ import annotations

import asyncio
import logging
import time

from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from switchboard import bus, registry
from switchboard.runtime import ServiceRuntime
from switchboard.sessions import inbound_msg_id, session_token
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from .config import RouterSettings
from .metrics import REFUSED, ROUTE_SECONDS, ROUTED
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


async def serve(settings: RouterSettings, stop: asyncio.Event) -> None:
    async with ServiceRuntime(registry.get("router"), settings, stop) as rt:
        router = Router(rt, settings, ChannelPolicy(settings))
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
