"""Heartbeat runs: a scheduler job of kind ``heartbeat`` wakes the agent with its workspace's
``HEARTBEAT.md`` in the prompt (marked ``reply_context["sb_kind"] = "heartbeat"``); when the
model's whole answer is the no-op token ``HEARTBEAT_OK`` the run delivers nothing to any chat
(its transcript and events still record it)."""

from __future__ import annotations

from switchboard import scheduling
from switchboard.v1 import messages_pb2


def is_heartbeat(inbound: messages_pb2.InboundMessage) -> bool:
    return (
        inbound.channel == scheduling.CHANNEL
        and inbound.reply_context.get(scheduling.KIND_KEY) == scheduling.HEARTBEAT
    )


def silent_heartbeat(inbound: messages_pb2.InboundMessage, reply: str) -> bool:
    """A heartbeat run that answered the no-op token: no reply goes out."""
    return is_heartbeat(inbound) and scheduling.is_heartbeat_ok(reply)
