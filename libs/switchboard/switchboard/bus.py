"""The NATS bus: connection, the JetStream streams and KV of docs/architecture.md, subjects,
publishing with W3C trace context in headers; the consuming side (a pull worker that only
fetches when it has a free slot, decoding) is in :mod:`switchboard.pull`, re-exported here."""

from __future__ import annotations

import asyncio
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
    KeyValueConfig,
    PubAck,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError
from nats.js.kv import KeyValue

from .pull import UNDECODABLE as UNDECODABLE  # the consuming side lives in .pull; services
from .pull import Handler as Handler  # use these names as bus.PullWorker, bus.decode...
from .pull import PayloadHandler as PayloadHandler
from .pull import PullWorker as PullWorker
from .pull import decode as decode
from .pull import decoding as decoding
from .telemetry import inject_headers

log = logging.getLogger(__name__)

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
        """Stream/bucket name: as docs/architecture.md names them for the default prefix,
        prefixed otherwise."""
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


class StreamSetupError(RuntimeError):
    """The servers refused a stream or bucket as configured; the message says which and why."""


async def ensure_streams(js: JetStreamContext, subjects: Subjects, replicas: int = 1) -> None:
    """Create or update the streams and KV buckets, each at ``replicas`` replicas
    (``SB_NATS_REPLICAS``); safe to run from several services at once. Needs the
    stream-owner's permissions (switchboard.natsauth); others :func:`wait_streams`.

    A stream or bucket created earlier with another replica count is moved to ``replicas`` in
    place (a stream update): JetStream copies a scaled-up stream to its new peers, which catch
    up from the leader, and drops peers on a scale-down, keeping the messages and the durable
    consumers (theirs follow the stream's count). That is why it is done rather than refused:
    turning on a cluster, or growing it, needs no other step. A count the servers cannot host
    (above 1 on a server that is not clustered, more than the cluster has nodes) raises
    :class:`StreamSetupError` naming the stream, the count and the server's reason.
    """
    for config in stream_configs(subjects):
        config.num_replicas = replicas
        try:
            await js.add_stream(config)
        except BadRequestError as exc:
            if exc.err_code != STREAM_NAME_IN_USE:
                raise _refused(config.name, replicas, exc) from exc
            await _update_stream(js, config, replicas)
        except APIError as exc:  # e.g. replicas above 1 on a server that is not clustered
            raise _refused(config.name, replicas, exc) from exc
    for bucket, ttl in subjects.buckets().items():
        name = f"KV_{bucket}"
        try:
            info = await js.stream_info(name)
        except NotFoundError:
            kv = KeyValueConfig(
                bucket=bucket, ttl=ttl or None, storage=StorageType.FILE, replicas=replicas
            )
            try:
                await js.create_key_value(kv)
                continue
            except BadRequestError as exc:  # another service created it meanwhile?
                if exc.err_code != STREAM_NAME_IN_USE:
                    raise _refused(name, replicas, exc) from exc
            except APIError as exc:
                raise _refused(name, replicas, exc) from exc
            info = await js.stream_info(name)
        if (info.config.num_replicas or 1) != replicas:
            await _update_stream(js, info.config, replicas)


STREAM_NAME_IN_USE = 10058  # JetStream: "stream name already in use with a different config"


def _refused(name: str | None, replicas: int, exc: APIError) -> StreamSetupError:
    return StreamSetupError(
        f"NATS refused stream {name} at {replicas} replica(s) (SB_NATS_REPLICAS): "
        f"{exc.description or exc}; a single server holds 1 replica, a cluster at most as "
        "many as it has nodes"
    )


async def _update_stream(js: JetStreamContext, config: StreamConfig, replicas: int) -> None:
    """Update a stream to ``config`` at ``replicas``; a change of replicas is logged."""
    assert config.name is not None
    before = (await js.stream_info(config.name)).config.num_replicas or 1
    config.num_replicas = replicas
    try:
        await js.update_stream(config)
    except APIError as exc:
        raise _refused(config.name, replicas, exc) from exc
    if before != replicas:
        log.warning(
            "stream %s: replicas %s -> %s (SB_NATS_REPLICAS)", config.name, before, replicas
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
