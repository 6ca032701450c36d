"""Reading what a JetStream stream holds, without consuming it: the tests' view of INBOUND,
LANES, OUTBOUND, DEADLETTER..."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import nats
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
LANE_LEASE_TEST_TTL_S = 4.0
LANE_ACK_WAIT_TEST_S = "5"  # SB_LANE_ACK_WAIT_S for systems whose tests kill an agent


async def _short_bucket(js: JetStreamContext, bucket: str, ttl_s: float) -> None:
    try:
        await js.key_value(bucket)
    except BucketNotFoundError:
        await js.create_key_value(
            KeyValueConfig(bucket=bucket, ttl=ttl_s, storage=StorageType.FILE)
        )


async def ensure_streams_short_leases(
    js: JetStreamContext, ttl_s: float = CHANNEL_LEASE_TEST_TTL_S
) -> None:
    """``bus.ensure_streams`` (what the router does at start) with the channel lease bucket
    made first with a ``ttl_s`` TTL instead of the production 15 s: the gateway takes the lease
    TTL from the bucket, so takeover tests wait for a crashed holder's lease that much less."""
    subjects = bus.Subjects()
    await _short_bucket(js, subjects.channel_lease_bucket, ttl_s)
    await bus.ensure_streams(js, subjects)


async def short_lane_leases(nats_url: str, ttl_s: float = LANE_LEASE_TEST_TTL_S) -> None:
    """Make the lane lease bucket with a ``ttl_s`` TTL (production: 10 s) before the system
    starts (the router then keeps it): the agents take the lease TTL from the bucket, so a
    killed agent's lanes are free sooner. Pair it with ``SB_LANE_ACK_WAIT_S`` =
    ``LANE_ACK_WAIT_TEST_S``, or the dispatch's redelivery stays the wait."""
    nc = await nats.connect(nats_url)
    try:
        await _short_bucket(nc.jetstream(), bus.Subjects().lease_bucket, ttl_s)
    finally:
        await nc.close()
