"""The NATS bus: connection, the JetStream streams and KV of DESIGN.md section 4, subjects,
publishing with W3C trace context in headers, and a pull worker that only fetches when it has a
free slot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import nats
from google.protobuf.message import DecodeError, Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    KeyValueConfig,
    PubAck,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError
from nats.js.kv import KeyValue
from prometheus_client import Counter

from .errors import InvalidPayload
from .telemetry import inject_headers

log = logging.getLogger(__name__)
M = TypeVar("M", bound=Message)
UNDECODABLE = Counter(
    "sb_bus_undecodable_total", "Messages dropped because they did not decode", ["consumer"]
)

HOUR = 3600.0
MSG_ID = "Nats-Msg-Id"
LEASE_TTL_S = 10.0  # a dead lane owner's lease expires this long after its last renewal
CHANNEL_LEASE_TTL_S = 15.0  # a dead poller's lease on a channel connection expires this late
OUTBOUND_SENT_TTL_S = 86400.0  # how long a sent platform message is remembered


@dataclass(frozen=True)
class Subjects:
    """Every subject name in one place, under a configurable prefix."""

    prefix: str = "sb"

    def inbound(self, channel: str) -> str:
        return f"{self.prefix}.inbound.{channel}"

    def lane(self, agent: str, token: str) -> str:
        return f"{self.prefix}.lane.{agent}.{token}"

    def lanes(self) -> str:
        return f"{self.prefix}.lane.*.*"

    def tools_call(self, profile: str) -> str:
        return f"{self.prefix}.tools.call.{profile}"

    def tools_result(self, run_id: str) -> str:
        return f"{self.prefix}.tools.result.{run_id}"

    def tools_cancel(self, run_id: str) -> str:
        return f"{self.prefix}.tools.cancel.{run_id}"

    def tools_specs(self) -> str:
        return f"{self.prefix}.tools.specs"

    def tools_update(self, call_id: str) -> str:
        """Core subject: partial output of a tool call still running (``ToolUpdate``)."""
        return f"{self.prefix}.tools.update.{call_id}"

    def tools_proc(self, executor: str) -> str:
        """Core request subject: one executor answers poll/kill/list for the processes it runs."""
        return f"{self.prefix}.tools.proc.{executor}"

    def tools_procs(self) -> str:
        """Core subject every executor listens on (no queue group): list processes everywhere."""
        return f"{self.prefix}.tools.procs"

    def approvals(self, run_id: str) -> str:
        """Core subject: an approval of this run was decided (wakes the waiting run)."""
        return f"{self.prefix}.approvals.{run_id}"

    def approvals_decide(self) -> str:
        """Core request subject: a decision typed in a chat (``ChatDecision``), sent by the
        router; any agent replica answers (queue group) with a ``ChatDecisionResult``."""
        return f"{self.prefix}.approvals.decide"

    def events(self, token: str) -> str:
        return f"{self.prefix}.events.{token}"

    def outbound(self, channel: str, account: str) -> str:
        return f"{self.prefix}.outbound.{channel}.{account}"

    def health(self, service: str) -> str:
        return f"{self.prefix}.health.{service}"

    def stream(self, base: str) -> str:
        """Stream/bucket name: the DESIGN names for the default prefix, prefixed otherwise."""
        return base if self.prefix == "sb" else f"{self.prefix.upper()}_{base}"

    def deadletter(self, kind: str, channel: str) -> str:
        """Where an undeliverable ``kind`` (``outbound``) of ``channel`` is kept."""
        return f"{self.prefix}.deadletter.{kind}.{channel}"

    def sessions_command(self) -> str:
        """Core request subject: a session command typed in a chat (``SessionCommand``: /new,
        /reset, /stop, /status, /model), sent by the router (chat channels) or the gateway
        (WebChat); any agent replica answers."""
        return f"{self.prefix}.sessions.command"

    def runs_abort(self) -> str:
        """Where an AbortRun goes (core NATS: every agent replica hears it, the owner acts)."""
        return f"{self.prefix}.runs.abort"

    @property
    def lease_bucket(self) -> str:
        return f"{self.prefix}_lane_leases"

    @property
    def channel_lease_bucket(self) -> str:
        """Leases of the gateway's channel connections (Telegram polling, Discord's gateway):
        one replica holds each."""
        return f"{self.prefix}_channel_leases"

    @property
    def outbound_sent_bucket(self) -> str:
        """The platform messages of reply parts already sent (so none is sent twice)."""
        return f"{self.prefix}_outbound_sent"

    @property
    def pairing_bucket(self) -> str:
        """The router's pairing requests and approved senders."""
        return f"{self.prefix}_pairing"

    def buckets(self) -> dict[str, float]:
        """Every KV bucket and its TTL in seconds (0: keys never expire)."""
        return {
            self.lease_bucket: LEASE_TTL_S,
            self.channel_lease_bucket: CHANNEL_LEASE_TTL_S,
            self.outbound_sent_bucket: OUTBOUND_SENT_TTL_S,
            self.pairing_bucket: 0.0,
        }


async def bucket_ttl(kv: KeyValue, default: float) -> float:
    """A KV bucket's TTL (its keys expire that long after their last write), ``default`` for a
    bucket without one. Lease holders renew well within it, so the bucket decides the lease
    TTL: the one that created it (the router, or a test wanting short takeovers) sets it."""
    ttl = (await kv.status()).ttl
    return float(ttl) if ttl else default


_UNSAFE_TOKEN = re.compile(r"[.*>\s]|[^\x21-\x7e\u00a0-\U0010ffff]")


def subject_token(value: str) -> str:
    """``value`` as one NATS subject token: ``.``, ``*``, ``>``, whitespace and control
    characters become ``_`` (the payload keeps the exact value)."""
    return _UNSAFE_TOKEN.sub("_", value)


def stream_configs(s: Subjects) -> list[StreamConfig]:
    file = StorageType.FILE
    return [
        StreamConfig(
            name=s.stream("INBOUND"),
            subjects=[f"{s.prefix}.inbound.>"],
            retention=RetentionPolicy.LIMITS,
            max_age=24 * HOUR,
            duplicate_window=120.0,
            storage=file,
        ),
        StreamConfig(
            name=s.stream("LANES"),
            subjects=[s.lanes()],
            retention=RetentionPolicy.LIMITS,
            max_age=7 * 24 * HOUR,
            duplicate_window=120.0,
            storage=file,
            allow_direct=True,  # lane owners read their lane with direct gets (no JS API)
        ),
        StreamConfig(
            name=s.stream("TOOLS"),
            subjects=[f"{s.prefix}.tools.call.>"],
            retention=RetentionPolicy.WORK_QUEUE,
            max_age=HOUR,
            storage=file,
        ),
        StreamConfig(
            name=s.stream("OUTBOUND"),
            subjects=[f"{s.prefix}.outbound.>"],
            retention=RetentionPolicy.WORK_QUEUE,
            max_age=24 * HOUR,
            duplicate_window=600.0,
            storage=file,
        ),
        StreamConfig(
            name=s.stream("EVENTS"),
            subjects=[f"{s.prefix}.events.>"],
            retention=RetentionPolicy.LIMITS,
            max_age=HOUR,
            storage=file,
        ),
        StreamConfig(  # what could not be delivered, kept for an operator (a week)
            name=s.stream("DEADLETTER"),
            subjects=[f"{s.prefix}.deadletter.>"],
            retention=RetentionPolicy.LIMITS,
            max_age=7 * 24 * HOUR,
            storage=file,
            duplicate_window=600.0,
        ),
    ]


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


async def connect(url: str, name: str, login: Login | None = None) -> NATS:
    """Connect with unlimited reconnects; connection state changes are logged."""
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
        servers=[url],
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


async def ensure_streams(js: JetStreamContext, subjects: Subjects) -> None:
    """Create or update the streams and KV buckets; safe to run from several services at once.
    Needs the stream-owner's permissions (switchboard.natsauth); others :func:`wait_streams`."""
    for config in stream_configs(subjects):
        try:
            await js.add_stream(config)
        except BadRequestError:
            await js.update_stream(config)
    for bucket, ttl in subjects.buckets().items():
        try:
            await js.key_value(bucket)
        except NotFoundError:
            with contextlib.suppress(BadRequestError):
                await js.create_key_value(
                    KeyValueConfig(bucket=bucket, ttl=ttl or None, storage=StorageType.FILE)
                )


async def missing_streams(js: JetStreamContext, subjects: Subjects) -> list[str]:
    """The streams and KV buckets that do not exist (yet)."""
    names = [c.name for c in stream_configs(subjects) if c.name]
    names += [f"KV_{bucket}" for bucket in subjects.buckets()]
    missing = []
    for name in names:
        try:
            await js.stream_info(name)
        except NotFoundError:
            missing.append(name)
    return missing


async def wait_streams(js: JetStreamContext, subjects: Subjects, poll_s: float = 0.2) -> None:
    """Wait until the stream owner has created every stream and bucket."""
    logged = False
    while missing := await missing_streams(js, subjects):
        if not logged:
            log.info("waiting for the streams %s (the router creates them)", missing)
            logged = True
        await asyncio.sleep(poll_s)


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


def decode(message_type: type[M], data: bytes | None) -> M:
    """Parse a protobuf payload; :class:`InvalidPayload` when it is not one (only decode
    errors are caught: anything else is a bug and propagates)."""
    message = message_type()
    try:
        message.ParseFromString(data or b"")
    except DecodeError as exc:
        raise InvalidPayload(f"not a {message_type.DESCRIPTOR.full_name}: {exc}") from exc
    return message


Handler = Callable[[Msg], Awaitable[None]]
PayloadHandler = Callable[[Msg, M], Awaitable[None]]


def decoding(message_type: type[M], handler: PayloadHandler[M], consumer: str) -> Handler:
    """A message handler (for a pull consumer or a core subscription) that receives the decoded
    payload. An undecodable message is logged, counted and dropped: a stream's is terminated
    (it would fail the same way on every redelivery)."""

    async def handle(msg: Msg) -> None:
        try:
            payload = decode(message_type, msg.data)
        except InvalidPayload as exc:
            log.warning("%s: dropping a message on %s: %s", consumer, msg.subject, exc)
            UNDECODABLE.labels(consumer).inc()
            if msg.reply.startswith("$JS.ACK."):
                await msg.term()
            return
        await handler(msg, payload)

    return handle


class PullWorker:
    """Fetches from a pull consumer only while it has a free slot, handling messages
    concurrently up to ``concurrency``. The handler acks; an exception NAKs with a delay."""

    def __init__(
        self, sub: JetStreamContext.PullSubscription, handler: Handler, concurrency: int, name: str
    ) -> None:
        self.sub = sub
        self.handler = handler
        self.slots = asyncio.Semaphore(concurrency)
        self.name = name
        self.tasks: set[asyncio.Task[None]] = set()
        self._owed = 0  # lent slots not taken back (cancelled meanwhile): not released again

    @property
    def saturated(self) -> bool:
        """Every slot is taken: further deliveries wait in the consumer for one to free up.

        One message per fetch: nats-py's fetch(n > 1) turns into a lingering pull for n
        messages when none is ready, and then holds the first one until all n came or the
        request expired (seconds of latency at low load)."""
        return self.slots.locked()

    @contextlib.asynccontextmanager
    async def lend_slot(self) -> AsyncIterator[None]:
        """For a handler that waits on something outside the system (a person's approval):
        its slot serves other deliveries meanwhile, and it takes a slot back before going on
        (waiting for one if all are busy)."""
        self.slots.release()
        try:
            yield
        finally:
            try:
                await self.slots.acquire()
            except asyncio.CancelledError:
                self._owed += 1
                raise

    async def run(self) -> None:
        while True:
            await self.slots.acquire()
            try:
                msgs = await self.sub.fetch(1, timeout=5.0)
            except (TimeoutError, nats.errors.TimeoutError):
                self.slots.release()
                continue
            except (nats.errors.ConnectionClosedError, asyncio.CancelledError):
                self.slots.release()
                raise
            except Exception as exc:  # connection trouble: back off and retry
                self.slots.release()
                log.warning("%s: fetch failed (%s); retrying", self.name, type(exc).__name__)
                await asyncio.sleep(0.5)
                continue
            for i, msg in enumerate(msgs):
                if i:  # fetch(1) returns one message; keep the slot accounting right anyway
                    await self.slots.acquire()
                task = asyncio.create_task(self._handle(msg))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _handle(self, msg: Msg) -> None:
        try:
            await self.handler(msg)
        except Exception:
            log.exception("%s: handler failed on %s; will be redelivered", self.name, msg.subject)
            with contextlib.suppress(Exception):
                await msg.nak(delay=1.0)
        finally:
            if self._owed:
                self._owed -= 1
            else:
                self.slots.release()

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for in-flight handlers (used at shutdown)."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=timeout)
