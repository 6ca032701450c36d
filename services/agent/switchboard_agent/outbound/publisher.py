"""Publishing a committed run's reply on the OUTBOUND stream (docs/architecture.md).

The reply is chunked (:mod:`.chunker`) and each part goes to ``sb.outbound.<channel>.<account>``
with ``Nats-Msg-Id = <run id>:<part>``, after the run's commit. Publishing the same run again
(a replay after the owner died between commit and publish) yields the same parts under the same
ids, so the stream drops them as duplicates for as long as its dedupe window lasts; past that
window a republish would reach the user twice, hence :attr:`OutboundPublisher.republish_window_s`.

Channels whose replies go back over the request itself (the HTTP API, the OpenAI-compatible API,
WebChat's live events, A2A tasks) get no outbound parts."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2

from .chunker import chunk_text

log = logging.getLogger(__name__)

# Replies of these channels travel back on the request (its response or SSE/WebSocket events);
# a scheduled job's ("cron") goes to its deliver_to chat, if it names one, else nowhere; a
# sub-agent's ("subagent") and a sessions_send message's ("session") stay in their session.
EVENT_ONLY_CHANNELS = frozenset(
    {"api", "openai", "webchat", "hooks", "cron", "subagent", "session", "a2a"}
)
DEFAULT_ACCOUNT = "default"
REPUBLISH_MARGIN_S = 60.0  # republish only this far inside the dedupe window
subject_token = bus.subject_token


def dedupe_window_s(subjects: bus.Subjects) -> float:
    """The OUTBOUND stream's duplicate window, as :func:`switchboard.bus.stream_configs` sets."""
    name = subjects.stream("OUTBOUND")
    config = next(c for c in bus.stream_configs(subjects) if c.name == name)
    return float(config.duplicate_window or 0.0)


class OutboundPublisher:
    def __init__(
        self,
        js: JetStreamContext,
        subjects: bus.Subjects,
        *,
        event_only_channels: Iterable[str] = EVENT_ONLY_CHANNELS,
        min_chars: int = 300,
        max_chars: int = 1000,
        timeout_s: float = 5.0,
    ) -> None:
        self.js = js
        self.subjects = subjects
        self.event_only_channels = frozenset(event_only_channels)
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.timeout_s = timeout_s
        # A run committed longer ago than this is not republished (see the module doc).
        self.republish_window_s = max(0.0, dedupe_window_s(subjects) - REPUBLISH_MARGIN_S)

    def delivers(self, channel: str) -> bool:
        """Does a reply on ``channel`` go out as OUTBOUND parts?"""
        return bool(channel) and channel not in self.event_only_channels

    def delivers_reply(self, inbound: messages_pb2.InboundMessage) -> bool:
        """Does the reply to ``inbound`` go out as OUTBOUND parts (to its chat or its
        ``deliver_to`` target)?"""
        return self.delivers(inbound.deliver_to.channel or inbound.channel)

    def messages(
        self,
        run_id: str,
        item: messages_pb2.LaneItem,
        text: str,
        message_ids: Iterable[str],
        threaded: bool,
    ) -> list[messages_pb2.OutboundMessage]:
        """The parts of a reply to ``item`` (none for an event-only channel or empty text), sent
        to the chat it came from or to its ``deliver_to`` target. ``threaded`` (queue mode
        ``followup``): reply to the inbound message, in its thread (or one started on it);
        otherwise stay in the thread the message came in, if any."""
        inbound = item.message
        target = inbound.deliver_to
        if target.channel:  # a webhook's run whose reply goes to a chat
            channel, account, chat = target.channel, target.account, target.chat
            thread_id, reply_to = target.thread_id, ""
        else:
            channel, account, chat = inbound.channel, inbound.account, inbound.chat
            thread_id, reply_to = inbound.thread_id, ""
            if threaded:
                reply_to = inbound.message_id
                thread_id = thread_id or inbound.message_id
        if not self.delivers(channel):
            return []
        chunks = chunk_text(text, self.min_chars, self.max_chars)
        ids = list(message_ids)
        return [
            messages_pb2.OutboundMessage(
                run_id=run_id,
                part=index,
                parts=len(chunks),
                session_key=item.session_key,
                channel=channel,
                account=account or DEFAULT_ACCOUNT,
                chat=chat,
                thread_id=thread_id,
                reply_to=reply_to,
                text=chunk,
                message_ids=ids,
                reply_context=inbound.reply_context,
            )
            for index, chunk in enumerate(chunks)
        ]

    def subject(self, channel: str, account: str) -> str:
        return self.subjects.outbound(
            subject_token(channel), subject_token(account or DEFAULT_ACCOUNT)
        )

    async def publish(
        self,
        run_id: str,
        item: messages_pb2.LaneItem,
        text: str,
        message_ids: Iterable[str],
        threaded: bool,
    ) -> int:
        """Publish the reply's parts in order, durably, each with ``Nats-Msg-Id =
        <run id>:<part>``; return how many of them were new to the stream (0 when all were
        duplicates of an earlier publish, or nothing goes out on this channel)."""
        parts = self.messages(run_id, item, text, message_ids, threaded)
        if not parts:
            return 0
        subject = self.subject(parts[0].channel, parts[0].account)
        new = 0
        for part in parts:
            msg_id = f"{run_id}:{part.part}"
            ack = await bus.js_publish_ack(self.js, subject, part, msg_id, self.timeout_s)
            new += not ack.duplicate
        if new < len(parts):
            log.info(
                "outbound parts already published",
                extra={"run_id": run_id, "parts": len(parts), "new": new},
            )
        return new
