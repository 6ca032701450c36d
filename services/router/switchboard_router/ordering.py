"""Per-session order across a bus outage: a message whose lane append failed (NATS restarting,
JetStream not answering yet) keeps trying while it holds its session's turn, so a message of
the same session that arrives after the outage cannot overtake it on the lane.

Without this, the failed message would wait for its redelivery (the consumer's ack wait) while
the next one, fetched after the reconnect, is appended first. The retry stays well inside the
ack wait; past it the message fails as before and is redelivered (the lane's dedupe by
``Nats-Msg-Id`` drops a copy that did get through)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from switchboard import retry

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_FOR_S = 20.0  # the INBOUND consumer's ack wait is 30 s
# A closed connection is tried again too: the client reconnects underneath a NATS restart, and the
# append must hold its session's turn through it. js.publish raises a "no responders" answer (a
# clustered stream electing its leader after a node died) as NoStreamResponseError: without it
# here the append failed at once, and the session's next message overtook it (the fault campaign
# caught this).
TRANSIENT = retry.TRANSIENT_OR_CLOSED


class SessionTurns:
    """One append at a time per session, in the order the messages asked (asyncio locks are
    fair); a lock is dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def turn(self, session: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(session, (asyncio.Lock(), 0))
        self._locks[session] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[session]
            if users <= 1:
                del self._locks[session]
            else:
                self._locks[session] = (lock, users - 1)


async def retrying(attempt: Callable[[], Awaitable[T]], what: str) -> T:
    """``attempt()`` until it works or :data:`RETRY_FOR_S` passes (then its error)."""

    def logged(exc: Exception) -> None:
        log.info("%s failed (%s); retrying", what, type(exc).__name__)

    return await retry.retrying(
        attempt, within_s=RETRY_FOR_S, first_delay_s=0.1, transient=TRANSIENT, on_retry=logged
    )
