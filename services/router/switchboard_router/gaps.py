"""Deliveries this router never received: a message the INBOUND consumer handed out while a NATS
node died (the consumer's leader moving, the route to this router's node gone) can be lost in
flight. JetStream sends it again only after the consumer's ack wait, and meanwhile the same
session's later messages would be appended before it (the fault campaign saw a Slack message
answered 25 s late, after three later ones).

The consumer hands out first deliveries in stream order, so a first delivery whose stream
sequence jumps past the last one seen leaves a gap: those messages went to another router
replica or were lost. When a gap is open, each delivery asks whether an older message of its
own session is in it (the message is read from the stream, once) and not acknowledged yet (the
consumer's ack floor); if so, the delivery waits behind it (``ordering.SessionGate``) until it
comes back here, or for ``hold_s``. A router that is the only replica, with no fault, never
opens a gap and pays nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from switchboard import bus
from switchboard.errors import InvalidPayload
from switchboard.sessions import inbound_msg_id
from switchboard.v1 import messages_pb2

log = logging.getLogger(__name__)
MAX_GAP = 1_000  # a wider jump (a router starting behind, a purge) is not tracked
FLOOR_TTL_S = 0.2  # the consumer's ack floor is asked at most this often


@dataclass(frozen=True)
class Missing:
    seq: int
    session: str
    message: str  # its inbound message id


class Gaps:
    def __init__(
        self,
        js: JetStreamContext,
        stream: str,
        durable: str,
        session_of: Callable[[messages_pb2.InboundMessage], str | None],
        forget_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.js, self.stream, self.durable = js, stream, durable
        self.session_of = session_of
        self.forget_s = forget_s  # past the ack wait: it was redelivered, here or elsewhere
        self.clock = clock
        self.last = 0  # the highest stream sequence of a first delivery seen
        self.open: dict[int, float] = {}  # a gap's sequences, with when they were noticed
        self.read: dict[int, Missing | None] = {}  # what a gap's message is (None: no session)
        self._floor = (0, -1.0)  # (ack floor, when asked)

    def seen(self, seq: int, first: bool) -> None:
        """A delivery of stream sequence ``seq`` (``first``: its first delivery)."""
        now = self.clock()
        self.open.pop(seq, None)
        self.read.pop(seq, None)
        if first and seq > self.last:
            if self.last and 1 < seq - self.last <= MAX_GAP:
                for missing in range(self.last + 1, seq):
                    self.open[missing] = now
            self.last = seq
        for old in [s for s, at in self.open.items() if now - at > self.forget_s]:
            del self.open[old]
            self.read.pop(old, None)

    async def before(self, seq: int, session: str) -> list[Missing]:
        """The unacknowledged messages of ``session`` in a gap before ``seq``."""
        older = sorted(s for s in self.open if s < seq)
        if not older:
            return []
        floor = await self._ack_floor()
        found: list[Missing] = []
        for s in older:
            if s <= floor:  # handled (by another replica)
                del self.open[s]
                self.read.pop(s, None)
                continue
            if s not in self.read:
                self.read[s] = await self._read(s)
            missing = self.read[s]
            if missing is not None and missing.session == session:
                found.append(missing)
        return found

    async def acked(self, seq: int) -> bool:
        """Has the consumer's ack floor passed ``seq`` (another replica handled it)? Not
        known while NATS does not answer: then no (the wait's bound still ends it)."""
        try:
            return await self._ack_floor() >= seq
        except (NatsError, TimeoutError) as exc:
            log.info("could not read the router consumer's ack floor (%s)", type(exc).__name__)
            return False

    async def _ack_floor(self) -> int:
        floor, asked = self._floor
        if self.clock() - asked > FLOOR_TTL_S:
            info = await self.js.consumer_info(self.stream, self.durable)
            floor = info.ack_floor.stream_seq if info.ack_floor else 0
            self._floor = (floor or 0, self.clock())
        return self._floor[0]

    async def _read(self, seq: int) -> Missing | None:
        try:
            raw = await self.js.get_msg(self.stream, seq=seq)  # INBOUND has no direct gets
        except NotFoundError:
            return None
        try:
            inbound = bus.decode(messages_pb2.InboundMessage, raw.data)
        except InvalidPayload:  # dropped when it is delivered
            return None
        session = self.session_of(inbound)
        if session is None:
            return None
        message = inbound_msg_id(inbound.channel, inbound.account, inbound.message_id)
        return Missing(seq, session, message)
