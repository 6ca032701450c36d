"""Delivery of reply parts: the gateway's consumer of ``OUTBOUND``. One durable consumer per
channel that has an adapter (``deliver-<channel>``, shared by the gateway replicas): each part
is formatted and sent by the channel's adapter, then acknowledged; a platform that asks to wait
gets the part again after its ``retry_after``; after ``max_attempts`` a part is dead-lettered
(terminated, counted, logged and kept on the DEADLETTER stream).

Never twice: each platform message of a part, once sent, is marked in the KV bucket
``sb_outbound_sent`` (``<channel>.<hash of run id and part>.<index>``), and a redelivered part
(a retry after a later message failed, a replica that died before its ack, a restart) skips the
marked ones. What remains is the moment between the platform's answer and the mark: a replica
killed exactly there sends that one message again.

In order: the parts of a reply are handled concurrently, but part N is sent only once part N-1
is settled (its ``settled`` key in the same bucket), so a chat reads them in order."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from switchboard import bus
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from .channels.base import ChannelAdapter, RetryLater, Undeliverable
from .metrics import OUTBOUND

log = logging.getLogger(__name__)
SETTLED = "settled"  # the sent-bucket key suffix of a part that is done (sent or dead-lettered)
ORDER_POLL_S = 0.02


class Delivery:
    def __init__(
        self,
        adapters: dict[str, ChannelAdapter],
        *,
        concurrency: int,
        max_attempts: int,
        order_wait_s: float = 120.0,
    ) -> None:
        self.adapters = adapters
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.sent: KeyValue | None = None
        self.js: JetStreamContext | None = None
        self.subjects = bus.Subjects()
        self.order_wait_s = order_wait_s

    async def start(self, rt: ServiceRuntime) -> None:
        if self.adapters:
            self.sent = await rt.js.key_value(rt.subjects.outbound_sent_bucket)
            self.js, self.subjects = rt.js, rt.subjects
        for name, adapter in self.adapters.items():

            async def deliver(
                msg: Msg, part: messages_pb2.OutboundMessage, adapter: ChannelAdapter = adapter
            ) -> None:
                await self._deliver(adapter, msg, part)

            await rt.consume(
                "OUTBOUND",
                f"deliver-{name}",
                rt.subjects.outbound(name, "*"),
                messages_pb2.OutboundMessage,
                deliver,
                concurrency=self.concurrency,
                max_deliver=self.max_attempts,
            )

    async def _deliver(
        self, adapter: ChannelAdapter, msg: Msg, part: messages_pb2.OutboundMessage
    ) -> None:
        attempt = msg.metadata.num_delivered
        if part.part > 0:
            await self._after_previous(adapter.name, part, msg)
        try:
            for index, message in enumerate(adapter.format(part)):
                key = self._sent_key(adapter.name, part, index)
                if await self._was_sent(key):
                    continue
                await adapter.send(part.account, message)
                await self._mark_sent(key)
        except RetryLater as exc:
            await self._retry(adapter, msg, part, exc.reason, exc.retry_after_s)
            return
        except Undeliverable as exc:
            await self._dead_letter(adapter, part, str(exc), attempt)
            await self._mark_sent(self._sent_key(adapter.name, part, SETTLED))
            await msg.term()
            return
        except Exception as exc:  # the adapter failed unexpectedly: retried like a 5xx
            log.exception("sending a reply part to %s failed", adapter.name)
            await self._retry(adapter, msg, part, type(exc).__name__, min(2.0**attempt, 60.0))
            return
        await self._mark_sent(self._sent_key(adapter.name, part, SETTLED))
        await msg.ack()
        OUTBOUND.labels(adapter.name, "sent").inc()

    async def _after_previous(
        self, channel: str, part: messages_pb2.OutboundMessage, msg: Msg
    ) -> None:
        """Parts of a reply are handled concurrently (and by any replica): part N waits until
        part N-1 is settled (sent or dead-lettered), so the chat gets them in order. After
        ``order_wait_s`` it goes anyway (a part lost some other way must not block the rest)."""
        previous = messages_pb2.OutboundMessage(run_id=part.run_id, part=part.part - 1)
        key = self._sent_key(channel, previous, SETTLED)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.order_wait_s
        kept_alive = loop.time()
        while not await self._was_sent(key):
            if loop.time() > deadline:
                log.warning(
                    "sending a reply part before the one ahead of it was settled",
                    extra={"channel": channel, "run_id": part.run_id, "part": part.part},
                )
                return
            if loop.time() - kept_alive > 5.0:  # still being handled: no redelivery meanwhile
                await msg.in_progress()
                kept_alive = loop.time()
            await asyncio.sleep(ORDER_POLL_S)

    @staticmethod
    def _sent_key(channel: str, part: messages_pb2.OutboundMessage, index: int | str) -> str:
        digest = hashlib.sha256(f"{part.run_id}\0{part.part}".encode()).hexdigest()[:32]
        return f"{channel}.{digest}.{index}"

    async def _was_sent(self, key: str) -> bool:
        if self.sent is None:
            return False
        try:
            await self.sent.get(key)
        except KeyNotFoundError:
            return False
        return True

    async def _mark_sent(self, key: str) -> None:
        if self.sent is None:
            return
        try:
            await self.sent.put(key, b"1")
        except Exception:  # NATS away: the message is out; a redelivery may repeat it
            log.warning("could not mark a sent platform message", exc_info=True)

    async def _retry(
        self,
        adapter: ChannelAdapter,
        msg: Msg,
        part: messages_pb2.OutboundMessage,
        reason: str,
        delay_s: float,
    ) -> None:
        if msg.metadata.num_delivered >= self.max_attempts:
            await self._dead_letter(
                adapter, part, f"still failing: {reason}", msg.metadata.num_delivered
            )
            await msg.term()
            return
        OUTBOUND.labels(adapter.name, "retry").inc()
        await msg.nak(delay=delay_s)

    async def _dead_letter(
        self, adapter: ChannelAdapter, part: messages_pb2.OutboundMessage, why: str, attempts: int
    ) -> None:
        """Counted, logged, and kept on the DEADLETTER stream (``sb.deadletter.outbound.
        <channel>``) for an operator; the part then leaves OUTBOUND."""
        OUTBOUND.labels(adapter.name, "dead_letter").inc()
        log.error(
            "reply part not delivered: %s",
            why,
            extra={"channel": adapter.name, "run_id": part.run_id, "part": part.part},
        )
        if self.js is None:
            return
        letter = messages_pb2.DeadLetter(
            part=part, reason=why[:500], attempts=attempts, at_ms=int(time.time() * 1000)
        )
        subject = self.subjects.deadletter("outbound", bus.subject_token(adapter.name))
        try:
            await bus.js_publish(self.js, subject, letter, msg_id=f"{part.run_id}:{part.part}")
        except Exception:  # NATS away: the count and the log line above remain
            log.warning("could not keep a dead letter on the stream", exc_info=True)
