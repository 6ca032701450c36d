"""NATS request/reply with protobuf on both sides: one helper, so that every caller gets the
same timeout handling and the same error (the router's and the gateway's session commands,
the router's chat decisions asked the agents this way, each with its own except clause)."""

from __future__ import annotations

from typing import TypeVar

import nats.errors
from google.protobuf.message import Message
from nats.aio.client import Client as NATS

from .errors import InvalidPayload, Unavailable
from .pull import decode

M = TypeVar("M", bound=Message)


class NoAnswer(Unavailable):
    """No service answered a request on the bus in time (none listening, a timeout, the
    connection gone), or its answer was not the message expected. The message names the
    subject and the failure's type only."""


async def request(
    nc: NATS, subject: str, message: Message, reply_type: type[M], timeout: float
) -> M:
    """Send ``message`` to ``subject`` and return the answer parsed as ``reply_type``;
    :class:`NoAnswer` (UNAVAILABLE) for any failure of the bus or of the answer's payload."""
    try:
        reply = await nc.request(subject, message.SerializeToString(), timeout=timeout)
        return decode(reply_type, reply.data)
    except (nats.errors.Error, TimeoutError, InvalidPayload) as exc:
        raise NoAnswer(f"no answer on {subject} ({type(exc).__name__})") from exc
