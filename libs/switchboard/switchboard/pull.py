"""Consuming from the bus: decoding protobuf payloads and a pull worker that only fetches
when it has a free slot. Apart from :mod:`switchboard.bus` (which re-exports every name) to keep
each file readable; nothing here knows the streams or subjects."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import nats
from google.protobuf.message import DecodeError, Message
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from prometheus_client import Counter

from .errors import InvalidPayload

__all__ = ["UNDECODABLE", "Handler", "PayloadHandler", "PullWorker", "decode", "decoding"]

log = logging.getLogger("switchboard.bus")  # the logger these lines always had
M = TypeVar("M", bound=Message)
UNDECODABLE = Counter(
    "sb_bus_undecodable_total", "Messages dropped because they did not decode", ["consumer"]
)


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
