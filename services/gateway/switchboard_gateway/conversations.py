"""Sending a message into the system and following its run's events back."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus
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


class Conversations:
    def __init__(self, nc: NATS, js: JetStreamContext, subjects: bus.Subjects) -> None:
        self.nc = nc
        self.js = js
        self.subjects = subjects

    async def post(self, out: Outgoing) -> bool:
        """Publish ``out``; False when INBOUND had its message id already (a retry)."""
        return await self.publish(out.to_proto())

    async def publish(self, message: messages_pb2.InboundMessage) -> bool:
        """Publish durably; the INBOUND stream drops a retransmit with the same id (then this
        returns False: the message was there already)."""
        msg_id = inbound_msg_id(message.channel, message.account, message.message_id)
        try:
            ack = await bus.js_publish_ack(
                self.js, self.subjects.inbound(message.channel), message, msg_id=msg_id
            )
        except (nats.errors.Error, TimeoutError) as exc:
            raise BusUnavailable from exc
        INBOUND.labels(message.channel).inc()
        return not ack.duplicate

    async def converse(
        self, out: Outgoing, timeout_s: float
    ) -> AsyncIterator[messages_pb2.AgentEvent]:
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
            deadline = time.monotonic() + timeout_s
            while True:
                remaining = deadline - time.monotonic()
                try:
                    event = await asyncio.wait_for(queue.get(), max(remaining, 0.001))
                except TimeoutError as exc:
                    raise ReplyTimeout from exc
                yield event
                if event.stream == "lifecycle" and event.phase == "end":
                    return
        finally:
            await sub.unsubscribe()
