"""Sending a message into the system and following its run's events back."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus, retry
from switchboard.sessions import inbound_msg_id, session_token
from switchboard.v1 import messages_pb2

from .metrics import INBOUND


@dataclass
class Outgoing:
    channel: str
    text: str
    session_key: str = ""
    agent: str = ""
    sender: str = ""
    account: str = "default"
    context: Sequence[tuple[str, str]] = ()
    media: Sequence[str] = ()  # media: references (switchboard.media)
    message_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_proto(self) -> messages_pb2.InboundMessage:
        return messages_pb2.InboundMessage(
            channel=self.channel,
            account=self.account,
            sender=self.sender,
            chat=messages_pb2.ChatRef(id=self.sender or self.session_key, type="direct"),
            text=self.text,
            media=list(self.media),
            message_id=self.message_id,
            received_at_ms=int(time.time() * 1000),
            session_key=self.session_key,
            agent=self.agent,
            context=[messages_pb2.ContextMessage(role=r, text=t) for r, t in self.context],
        )


class ReplyTimeout(Exception):
    """The run did not finish in time."""


class BusUnavailable(Exception):
    """NATS did not take the message (it is down or restarting); nothing was accepted."""


# A publish the gateway tries again (switchboard.retry): not a closed connection, which is final
# here (the client gets 503 bus_unavailable at once rather than wait on a bus that is gone).
_TRANSIENT = retry.TRANSIENT
# What ends a publish as BusUnavailable: a transient error past the deadline, or any NATS error.
_FAILED: tuple[type[Exception], ...] = (*_TRANSIENT, nats.errors.Error)


class Conversations:
    def __init__(
        self,
        nc: NATS,
        js: JetStreamContext,
        subjects: bus.Subjects,
        publish_retry_s: float = 10.0,
    ) -> None:
        self.nc = nc
        self.js = js
        self.subjects = subjects
        self.publish_retry_s = publish_retry_s

    async def post(self, out: Outgoing) -> bool:
        """Publish ``out``; False when INBOUND had its message id already (a retry)."""
        return await self.publish(out.to_proto())

    async def publish(self, message: messages_pb2.InboundMessage) -> bool:
        """Publish durably; the INBOUND stream drops a retransmit with the same id (then this
        returns False: the message was there already).

        A transient failure is tried again with the same message id for ``publish_retry_s``
        (a stream electing a new leader after a NATS node died takes a few seconds), so a
        caller sees a node's death as a slower answer, not a 503. The id keeps it once: if an
        attempt that timed out had in fact been stored, the next one is acked as a duplicate,
        which is this call's own message, not a client's retry."""
        msg_id = inbound_msg_id(message.channel, message.account, message.message_id)
        subject = self.subjects.inbound(message.channel)
        maybe_stored = False

        def timed_out(exc: Exception) -> None:
            nonlocal maybe_stored
            maybe_stored = maybe_stored or isinstance(exc, TimeoutError)

        try:
            ack = await retry.retrying(
                lambda: bus.js_publish_ack(self.js, subject, message, msg_id=msg_id),
                within_s=self.publish_retry_s,
                first_delay_s=0.25,
                transient=_TRANSIENT,
                on_retry=timed_out,
            )
        except _FAILED as exc:
            raise BusUnavailable from exc
        INBOUND.labels(message.channel).inc()
        return not ack.duplicate or maybe_stored

    async def converse(
        self, out: Outgoing, timeout_s: float
    ) -> AsyncGenerator[messages_pb2.AgentEvent, None]:
        """Post ``out`` and yield its run's events up to and including lifecycle end."""
        queue: asyncio.Queue[messages_pb2.AgentEvent] = asyncio.Queue()

        async def on_event(_: Msg, event: messages_pb2.AgentEvent) -> None:
            if event.message_id == out.message_id or out.message_id in event.message_ids:
                queue.put_nowait(event)

        subject = self.subjects.events(session_token(out.session_key))
        sub = await self.nc.subscribe(
            subject, cb=bus.decoding(messages_pb2.AgentEvent, on_event, "run events")
        )
        try:
            await self.post(out)
            deadline = asyncio.get_running_loop().time() + timeout_s
            while True:
                try:
                    # timeout_at, not wait_for: wait_for wraps each get in a task of its own
                    # (five per turn), timeout_at only schedules the deadline.
                    async with asyncio.timeout_at(deadline):
                        event = await queue.get()
                except TimeoutError as exc:
                    raise ReplyTimeout from exc
                yield event
                if event.stream == "lifecycle" and event.phase == "end":
                    return
        finally:
            await sub.unsubscribe()
