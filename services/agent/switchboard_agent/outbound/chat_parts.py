"""Single OUTBOUND parts the agent sends besides a run's reply: the ``message`` tool's messages
and the notices of calls waiting for an approval. Each is one part (``part 0 of 1``) under its
own run id, published with ``Nats-Msg-Id = <run id>:0``, so publishing it again (a replayed
run, a resumed wait) within the stream's dedupe window sends nothing twice.

These parts carry no ``reply_context``: they are messages of their own, not the reply to an
inbound message (on Discord, the interaction's reply edits its deferred response, and these
parts must not take its place)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from switchboard import bus
from switchboard.v1 import messages_pb2

from .publisher import DEFAULT_ACCOUNT, OutboundPublisher


@dataclass(frozen=True)
class ChatDestination:
    """A chat on a channel whose messages go out as OUTBOUND parts."""

    channel: str
    account: str
    chat_id: str
    chat_type: str = "direct"
    thread_id: str = ""

    def describe(self) -> str:
        return f"{self.channel} chat {self.chat_id}"


def reply_destination(
    outbound: OutboundPublisher, item: messages_pb2.LaneItem
) -> ChatDestination | None:
    """Where the reply to ``item`` goes (its chat, or its ``deliver_to`` target), in the thread
    it came in; ``None`` when its replies travel back on the request instead (API, WebChat)."""
    inbound = item.message
    target = inbound.deliver_to
    if target.channel:
        channel, account, chat, thread_id = (
            target.channel,
            target.account,
            target.chat,
            target.thread_id,
        )
    else:
        channel, account, chat = inbound.channel, inbound.account, inbound.chat
        thread_id = inbound.thread_id
    if not outbound.delivers(channel) or not chat.id:
        return None
    return ChatDestination(
        channel, account or DEFAULT_ACCOUNT, chat.id, chat.type or "direct", thread_id
    )


async def publish_part(
    outbound: OutboundPublisher,
    destination: ChatDestination,
    *,
    run_id: str,
    text: str,
    session_key: str,
    message_ids: Iterable[str] = (),
    media: Iterable[str] = (),
    approval_id: str = "",
) -> bool:
    """Publish ``text`` (and the ``media:`` references ``media``, sent with it) as the one part
    of ``run_id``; ``False`` when the stream already held it (a duplicate within its dedupe
    window). ``approval_id``: the part announces that approval (channels with buttons add
    Approve and Deny)."""
    part = messages_pb2.OutboundMessage(
        run_id=run_id,
        part=0,
        parts=1,
        session_key=session_key,
        channel=destination.channel,
        account=destination.account,
        chat=messages_pb2.ChatRef(id=destination.chat_id, type=destination.chat_type),
        thread_id=destination.thread_id,
        text=text,
        message_ids=list(message_ids),
        media=list(media),
        approval_id=approval_id,
    )
    subject = outbound.subject(destination.channel, destination.account)
    ack = await bus.js_publish_ack(
        outbound.js, subject, part, f"{run_id}:0", timeout=outbound.timeout_s
    )
    return not ack.duplicate
