"""Reading what a JetStream stream holds, without consuming it: the tests' view of INBOUND,
LANES, OUTBOUND, DEADLETTER..."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class Stored(Generic[M]):
    msg_id: str  # its Nats-Msg-Id ("" without one)
    subject: str
    message: M


async def stored(js: JetStreamContext, stream: str, message_type: type[M]) -> list[Stored[M]]:
    """Every message ``stream`` holds, in order, decoded as ``message_type``."""
    info = await js.stream_info(stream)
    found: list[Stored[M]] = []
    if not info.state.messages:
        return found
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        raw = await js.get_msg(stream, seq)
        message = message_type()
        message.ParseFromString(raw.data or b"")
        msg_id = (raw.headers or {}).get(bus.MSG_ID, "")
        found.append(Stored(msg_id, str(raw.subject), message))
    return found


async def outbound_parts(js: JetStreamContext) -> list[tuple[str, messages_pb2.OutboundMessage]]:
    """Every message in OUTBOUND, in order, with its ``Nats-Msg-Id``."""
    return [
        (s.msg_id, s.message) for s in await stored(js, "OUTBOUND", messages_pb2.OutboundMessage)
    ]
