"""Router: consumes INBOUND, resolves the session, appends a LaneItem to the session's lane."""

from __future__ import annotations

import asyncio
import logging
import time

from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from switchboard import bus
from switchboard.runtime import ServiceRuntime
from switchboard.sessions import session_token
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from .config import RouterSettings
from .metrics import ROUTE_SECONDS, ROUTED
from .routing import RouteError, resolve

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.router")


class Router:
    def __init__(self, rt: ServiceRuntime, settings: RouterSettings) -> None:
        self.rt = rt
        self.settings = settings

    async def handle(self, msg: Msg) -> None:
        start = time.perf_counter()
        inbound = messages_pb2.InboundMessage()
        try:
            inbound.ParseFromString(msg.data)
        except Exception:
            log.warning("dropping undecodable inbound message on %s", msg.subject)
            ROUTED.labels("unknown", "invalid").inc()
            await msg.term()
            return
        with tracer.start_as_current_span(
            "router.route", context=extract_context(msg.headers), kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("sb.channel", inbound.channel)
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
            with tracer.start_as_current_span("lane.enqueue", kind=SpanKind.PRODUCER) as lane_span:
                seq = await bus.js_publish(
                    self.rt.js, subject, item, msg_id=f"{inbound.channel}:{inbound.message_id}"
                )
                lane_span.set_attribute("sb.lane.seq", seq)
        await msg.ack()
        ROUTED.labels(inbound.channel, "routed").inc()
        ROUTE_SECONDS.observe(time.perf_counter() - start)


async def serve(settings: RouterSettings) -> None:
    async with ServiceRuntime("router", settings) as rt:
        router = Router(rt, settings)
        sub = await bus.durable_pull(
            rt.js, rt.subjects.stream("INBOUND"), "router", f"{settings.subject_prefix}.inbound.>"
        )
        worker = bus.PullWorker(sub, router.handle, settings.concurrency, "router")
        task = asyncio.create_task(worker.run())
        log.info("router ready")
        await rt.wait_stopped()
        task.cancel()
        await worker.drain()


def main() -> None:
    asyncio.run(serve(RouterSettings()))
