"""Reading what a JetStream stream holds, without consuming it: the tests' view of INBOUND,
LANES, OUTBOUND, DEADLETTER..."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError

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


CHANNEL_LEASE_TEST_TTL_S = 5.0


async def ensure_streams_short_leases(
    js: JetStreamContext, ttl_s: float = CHANNEL_LEASE_TEST_TTL_S
) -> None:
    """``bus.ensure_streams`` (what the router does at start) with the channel lease bucket
    made first with a ``ttl_s`` TTL instead of the production 15 s: the gateway takes the lease
    TTL from the bucket, so takeover tests wait for a crashed holder's lease that much less."""
    subjects = bus.Subjects()
    try:
        await js.key_value(subjects.channel_lease_bucket)
    except BucketNotFoundError:
        await js.create_key_value(
            KeyValueConfig(
                bucket=subjects.channel_lease_bucket, ttl=ttl_s, storage=StorageType.FILE
            )
        )
    await bus.ensure_streams(js, subjects)
