"""The router's pipeline for one INBOUND message: admission (security), the role stamp,
chat commands (``chat_commands``: answered here, never queued), debounce, route resolution,
the lane append.

The role (``InboundMessage.role``, docs/trust.md) is the one security decided for the admitted
sender; it replaces whatever the publisher put there, before anything reads it (the chat
commands pass it on, the agent trusts it)."""

from __future__ import annotations

import functools
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

from .chat_commands import ChatCommands, answer_refused_click
from .config import RouterSettings
from .debounce import Debouncer, merge
from .gaps import Gaps
from .metrics import REFUSED, ROUTE_SECONDS, ROUTED
from .ordering import Lend, SessionGate, SessionTurns, in_order, retrying
from .routing import RouteError, resolve
from .security import AUTHENTICATED_CHANNELS, InboundPolicy

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.router")
DURABLE = "router"  # the INBOUND consumer the replicas share
INBOUND_ACK_WAIT_S = 30.0


class Router:
    def __init__(
        self,
        rt: ServiceRuntime,
        settings: RouterSettings,
        security: InboundPolicy,
        ack_wait_s: float = INBOUND_ACK_WAIT_S,
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
        self.gate = SessionGate()  # a session's messages wait for its failed one
        self.lend: Lend | None = None  # the consumer's lend_slot, set once it consumes
        self.turns = SessionTurns(self.gate)  # a session's appends in order, across an outage
        # Messages handed out but never received (lost in flight when a NATS node died): they
        # come back after the ack wait; the session's later ones wait for them.
        self.gaps = Gaps(
            rt.js, rt.subjects.stream("INBOUND"), DURABLE, self._session_of, ack_wait_s + 5.0
        )

    def reload(self, settings: RouterSettings) -> None:
        """New bindings (the configuration file changed), for routing and the chat commands."""
        self.settings = self.commands.settings = self.commands.sessions.settings = settings

    async def handle(self, msg: Msg, inbound: messages_pb2.InboundMessage) -> None:
        """One delivery. A failure holds the session's later messages in the router until its
        redelivery gets through (``ordering``), so that they do not overtake it."""
        session = self._session_of(inbound)
        message = inbound_msg_id(inbound.channel, inbound.account, inbound.message_id)
        work = functools.partial(self._handle, msg, inbound, message)
        seq = self._note(msg)
        if session is None:
            await work()
            return
        if seq is not None and self.gaps.open:
            await self._behind_missing(seq, session)

        def held() -> None:
            log.info(
                "an earlier message of %s failed; this one waits for its redelivery",
                session,
                extra={"session": session, "channel": inbound.channel},
            )
            ROUTED.labels(inbound.channel, "held").inc()

        await in_order(self.gate, session, message, work, held, self.lend)

    def _note(self, msg: Msg) -> int | None:
        """This delivery's place in the stream, noted for ``gaps`` (every delivery's, an
        unroutable one's too: else its sequence would look like a gap)."""
        if not msg.reply.startswith("$JS.ACK."):
            return None
        meta = msg.metadata
        self.gaps.seen(meta.sequence.stream, meta.num_delivered == 1)
        return meta.sequence.stream

    async def _behind_missing(self, seq: int, session: str) -> None:
        """If an older message of ``session`` was handed out but never arrived, the session
        waits for it (``gaps``)."""
        missing = await self.gaps.before(seq, session)
        if missing:
            oldest = missing[0]
            log.warning(
                "an older message of %s was handed out but never arrived (stream sequence %d); "
                "the session waits for its redelivery",
                session,
                oldest.seq,
                extra={"session": session},
            )
            gone = functools.partial(self.gaps.acked, oldest.seq)
            self.gate.expect(session, oldest.message, self.gaps.forget_s, gone)

    def _session_of(self, inbound: messages_pb2.InboundMessage) -> str | None:
        try:
            return resolve(inbound, self.settings.agent_for).session_key
        except RouteError:
            return None  # refused later, where it is logged

    async def _handle(self, msg: Msg, inbound: messages_pb2.InboundMessage, holder: str) -> None:
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
                await answer_refused_click(self.rt, inbound, admission.reason)  # a click: told
                await msg.term()
                return
            inbound.role = admission.role
            span.set_attribute("sb.role", admission.role)
            if await self.commands.handle(inbound):  # the lane is busy with the waiting run
                await msg.ack()
                ROUTED.labels(inbound.channel, "command").inc()
                return
            if self.debouncer is None or inbound.channel in AUTHENTICATED_CHANNELS:
                outcome = await self._route(inbound, span, holder)
            else:
                batch = await self.debouncer.gather(inbound)
                if batch is None:  # joined another message's batch, which is on the lane now
                    span.set_attribute("sb.debounced", True)
                    await msg.ack()
                    ROUTED.labels(inbound.channel, "debounced").inc()
                    return
                span.set_attribute("sb.debounce.messages", len(batch.messages))
                try:
                    outcome = await self._route(merge(batch.messages), span, holder)
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

    async def _route(self, inbound: messages_pb2.InboundMessage, span: Span, holder: str) -> str:
        """``holder``: the delivery's own message id (``inbound`` may merge several)."""
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
            async with self.turns.turn(route.session_key, holder):
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
