"""The NATS bus: connection, the JetStream streams and KV of docs/architecture.md, subjects,
publishing with W3C trace context in headers; the consuming side (a pull worker that only
fetches when it has a free slot, decoding) is in :mod:`switchboard.pull`, re-exported here."""

from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass, field
from typing import Any

import nats
from google.protobuf.message import Message
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    PubAck,
)
from nats.js.kv import KeyValue

from .bus_streams import HOUR as HOUR  # the streams' configuration and set-up live in
from .bus_streams import STREAM_NAME_IN_USE as STREAM_NAME_IN_USE  # .bus_streams; services
from .bus_streams import StreamSetupError as StreamSetupError  # use them as bus.ensure_streams
from .bus_streams import ensure_streams as ensure_streams
from .bus_streams import missing_streams as missing_streams
from .bus_streams import stream_configs as stream_configs
from .bus_streams import wait_streams as wait_streams
from .pull import UNDECODABLE as UNDECODABLE  # the consuming side lives in .pull; services
from .pull import Handler as Handler  # use these names as bus.PullWorker, bus.decode...
from .pull import PayloadHandler as PayloadHandler
from .pull import PullWorker as PullWorker
from .pull import decode as decode
from .pull import decoding as decoding
from .subjects import CHANNEL_LEASE_TTL_S as CHANNEL_LEASE_TTL_S  # subject names: .subjects
from .subjects import LEASE_TTL_S as LEASE_TTL_S
from .subjects import OUTBOUND_SENT_TTL_S as OUTBOUND_SENT_TTL_S
from .subjects import Subjects as Subjects
from .telemetry import inject_headers

log = logging.getLogger(__name__)

MSG_ID = "Nats-Msg-Id"


async def bucket_ttl(kv: KeyValue, default: float) -> float:
    """A KV bucket's TTL (its keys expire that long after their last write), ``default`` for a
    bucket without one. Lease holders renew well within it, so the bucket decides the lease
    TTL: the one that created it (the router, or a test wanting short takeovers) sets it."""
    ttl = (await kv.status()).ttl
    return float(ttl) if ttl else default


# ".", "*", ">", whitespace and the C0/C1 controls: written as one class, as
# [^\x21-\x7e\u00a0-\U0010ffff]'s complement, it compiles in 0.2 ms instead of 3-8 ms (the
# negated range made re build a table of the whole of Unicode), in every service's start-up.
_UNSAFE_TOKEN = re.compile(r"[.*>\s\x00-\x20\x7f-\x9f]")


def subject_token(value: str) -> str:
    """``value`` as one NATS subject token: ``.``, ``*``, ``>``, whitespace and control
    characters become ``_`` (the payload keeps the exact value)."""
    return _UNSAFE_TOKEN.sub("_", value)


def inbox_prefix(user: str) -> str:
    """Replies to ``user``'s requests come to subjects under this prefix (its NATS user may
    subscribe only there, so no other service can listen to them)."""
    return f"_INBOX_{user}"


@dataclass(frozen=True)
class Login:
    """Who a service connects to NATS as (switchboard.natsauth): its user, its password and its
    own inbox prefix; empty: anonymous. ``tls_ca``: verify the server with this CA bundle."""

    user: str = ""
    password: str = field(default="", repr=False)
    tls_ca: str | None = None


def servers(url: str) -> list[str]:
    """The server URLs of ``SB_NATS_URL``: one URL, or several comma-separated (every node of
    a cluster: a client connects to any of them and reconnects to another when its node dies).
    """
    found = [part.strip() for part in url.split(",") if part.strip()]
    if not found:
        raise ValueError("SB_NATS_URL holds no server URL")
    return found


async def connect(url: str, name: str, login: Login | None = None) -> NATS:
    """Connect with unlimited reconnects, to any server of ``url`` (:func:`servers`);
    connection state changes are logged."""
    creds = login or Login()

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc)

    async def on_disconnect() -> None:
        log.warning("nats disconnected")

    async def on_reconnect() -> None:
        log.info("nats reconnected")

    options: dict[str, Any] = {}
    if creds.user:
        options.update(
            user=creds.user, password=creds.password, inbox_prefix=inbox_prefix(creds.user)
        )
    if creds.tls_ca:
        options["tls"] = ssl.create_default_context(cafile=creds.tls_ca)
    return await nats.connect(
        servers=servers(url),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        connect_timeout=2,
        allow_reconnect=True,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        **options,
    )


async def js_publish(
    js: JetStreamContext, subject: str, message: Message, msg_id: str | None = None
) -> int:
    """Durably publish a protobuf message with trace context; return its stream sequence."""
    return (await js_publish_ack(js, subject, message, msg_id)).seq


async def js_publish_ack(
    js: JetStreamContext,
    subject: str,
    message: Message,
    msg_id: str | None = None,
    timeout: float = 5.0,
) -> PubAck:
    """:func:`js_publish`, returning the whole ack (``duplicate``: the stream's dedupe window
    already held ``msg_id``)."""
    headers = inject_headers({MSG_ID: msg_id} if msg_id else None)
    return await js.publish(subject, message.SerializeToString(), headers=headers, timeout=timeout)


async def core_publish(nc: NATS, subject: str, message: Message) -> None:
    """Fire-and-forget publish (captured by a stream if one listens on the subject)."""
    await nc.publish(subject, message.SerializeToString(), headers=inject_headers())


async def durable_pull(
    js: JetStreamContext,
    stream: str,
    durable: str,
    filter_subject: str,
    *,
    ack_wait: float = 30.0,
    max_deliver: int = -1,
    max_ack_pending: int = 10_000,
) -> JetStreamContext.PullSubscription:
    config = ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=ack_wait,
        max_deliver=max_deliver,
        max_ack_pending=max_ack_pending,
        filter_subject=filter_subject,
    )
    return await js.pull_subscribe(filter_subject, durable=durable, stream=stream, config=config)
