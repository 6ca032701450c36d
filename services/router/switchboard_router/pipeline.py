"""The router's pipeline for one INBOUND message: admission (security), the role stamp,
chat commands (``chat_commands``: answered here, never queued), debounce, route resolution,
the lane append.

The role (``InboundMessage.role``, docs/trust.md) is the one security decided for the admitted
sender; it replaces whatever the publisher put there, before anything reads it (the chat
commands pass it on, the agent trusts it)."""

from __future__ import annotations

import logging
import time

from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from switchboard import bus
from switchboard.runtime import ServiceRuntime
from switchboard.sessions import inbound_msg_id, session_token
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from .chat_commands import ChatCommands
from .config import RouterSettings
from .debounce import Debouncer, merge
from .metrics import REFUSED, ROUTE_SECONDS, ROUTED
from .ordering import SessionTurns, retrying
from .routing import RouteError, resolve
from .security import AUTHENTICATED_CHANNELS, InboundPolicy

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.router")


class Router:
    def __init__(
        self, rt: ServiceRuntime, settings: RouterSettings, security: InboundPolicy
    ) -> None:
        self.rt = rt
        self.settings = settings
        self.security = security
        self.debouncer = (
            Debouncer(settings.debounce_ms / 1000, settings.debounce_max_ms / 1000)
            if settings.debounce_ms
            else None
        )
        self.commands = ChatCommands(rt, settings)  # /approve, /stop...: answered, not queued
        self.turns = SessionTurns()  # a session's appends in order, across a bus outage

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
            inbound.role = admission.role
            span.set_attribute("sb.role", admission.role)
            if await self.commands.handle(inbound):  # the lane is busy with the waiting run
                await msg.ack()
                ROUTED.labels(inbound.channel, "command").inc()
                return
            if self.debouncer is None or inbound.channel in AUTHENTICATED_CHANNELS:
                outcome = await self._route(inbound, span)
            else:
                batch = await self.debouncer.gather(inbound)
                if batch is None:  # joined another message's batch, which is on the lane now
                    span.set_attribute("sb.debounced", True)
                    await msg.ack()
                    ROUTED.labels(inbound.channel, "debounced").inc()
                    return
                span.set_attribute("sb.debounce.messages", len(batch.messages))
                try:
                    outcome = await self._route(merge(batch.messages), span)
                except BaseException:
                    batch.finish(False)
                    raise
                batch.finish(True)
        if outcome == "unroutable":
            await msg.term()
        else:
            await msg.ack()
            ROUTE_SECONDS.observe(time.perf_counter() - start)
        ROUTED.labels(inbound.channel, outcome).inc()

    async def _route(self, inbound: messages_pb2.InboundMessage, span: Span) -> str:
        try:
            route = resolve(inbound, self.settings.agent_for)
        except RouteError as exc:
            log.warning("dropping unroutable message: %s", exc)
            return "unroutable"
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
            async with self.turns.turn(route.session_key):
                seq = await retrying(
                    lambda: bus.js_publish(self.rt.js, subject, item, msg_id=msg_id),
                    "lane append",
                )
            lane_span.set_attribute("sb.lane.seq", seq)
        log.info(
            "routed to %s",
            route.session_key,
            extra={"session": route.session_key, "channel": inbound.channel, "lane_seq": seq},
        )
        return "routed"
