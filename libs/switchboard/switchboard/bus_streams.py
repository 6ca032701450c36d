"""The JetStream streams and KV buckets of docs/architecture.md: their configuration, and their
creation by the stream owner (the router) or the wait for them (every other service). Split out
of :mod:`switchboard.bus`, which re-exports these names (``bus.ensure_streams``...)."""

from __future__ import annotations

import asyncio
import logging

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import APIError, BadRequestError, NotFoundError

from .subjects import Subjects

log = logging.getLogger("switchboard.bus")  # the logger these lines always had

HOUR = 3600.0


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
