"""Reading what a JetStream stream holds, without consuming it (tests' view of OUTBOUND)."""

from __future__ import annotations

from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2


async def outbound_parts(js: JetStreamContext) -> list[tuple[str, messages_pb2.OutboundMessage]]:
    """Every message in OUTBOUND, in order, with its ``Nats-Msg-Id``."""
    info = await js.stream_info("OUTBOUND")
    parts: list[tuple[str, messages_pb2.OutboundMessage]] = []
    if not info.state.messages:
        return parts
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        raw = await js.get_msg("OUTBOUND", seq)
        part = messages_pb2.OutboundMessage()
        part.ParseFromString(raw.data or b"")
        parts.append(((raw.headers or {}).get(bus.MSG_ID, ""), part))
    return parts
