"""Per-session order across a bus outage: a message whose lane append failed (NATS restarting,
JetStream not answering yet) keeps trying while it holds its session's turn, so a message of
the same session that arrives after the outage cannot overtake it on the lane.

Without this, the failed message would wait for its redelivery (the consumer's ack wait) while
the next one, fetched after the reconnect, is appended first. The retry stays well inside the
ack wait; past it the message fails as before and is redelivered (the lane's dedupe by
``Nats-Msg-Id`` drops a copy that did get through).

A message that failed for good (its append gave up, or anything before it raised) holds its
session back: while it waits for its redelivery, the session's later messages queue in the
router, in arrival order, instead of going ahead (:class:`SessionGate`); its own success, or
:data:`HOLD_S` without news of it (its copy may be on another router replica), lets them go."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from switchboard import retry

log = logging.getLogger(__name__)
T = TypeVar("T")
Lend = Callable[[], AbstractAsyncContextManager[None]]
RETRY_FOR_S = 20.0  # the INBOUND consumer's ack wait is 30 s
# A failed message holds its session this long after each failure (its redelivery comes after
# the PullWorker's 1 s NAK delay; on another router replica it may never come back here).
HOLD_S = 10.0
RECHECK_S = 0.5  # how often a wait for a missing message asks whether it was handled elsewhere
# A closed connection is tried again too: the client reconnects underneath a NATS restart, and the
# append must hold its session's turn through it. js.publish raises a "no responders" answer (a
# clustered stream electing its leader after a node died) as NoStreamResponseError: without it
# here the append failed at once, and the session's next message overtook it (the fault campaign
# caught this).
TRANSIENT = retry.TRANSIENT_OR_CLOSED


class SessionHeld(Exception):
    """An earlier message of this session failed while this one waited for the session's turn:
    it has to queue behind that message's redelivery (:class:`SessionGate`)."""


@dataclass
class _Hold:
    holder: str  # the failed (or missing) message
    until: float
    gone: Callable[[], Awaitable[bool]] | None = None  # has it been handled elsewhere?
    released: asyncio.Event = field(default_factory=asyncio.Event)
    queue: asyncio.Lock = field(default_factory=asyncio.Lock)  # fair: the arrival order
    users: int = 0


class SessionGate:
    """Where a session's messages queue while an earlier one of it failed and waits for its
    redelivery (the PullWorker NAKs it with a delay). They wait here, in arrival order, instead
    of being appended ahead of it; the failed message's success releases them one at a time.
    Each failure of it holds the session for :data:`HOLD_S` more: on another router replica
    its redelivery never comes back here, and the session must not stay shut."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._holds: dict[str, _Hold] = {}
        self._clock = clock

    def holds(self, session: str, message: str) -> bool:
        """Does ``message``, arriving, have to queue: another message of its session failed,
        or the messages that queued behind it are still going?"""
        hold = self._holds.get(session)
        return hold is not None and hold.holder != message

    def active(self, session: str, message: str) -> bool:
        """Is another message of ``session`` failed and not yet through?"""
        hold = self._holds.get(session)
        return hold is not None and hold.holder != message and not hold.released.is_set()

    def fail(self, session: str, message: str) -> None:
        hold = self._holds.get(session)
        until = self._clock() + HOLD_S
        if hold is None:
            self._holds[session] = _Hold(message, until)
        elif hold.holder == message or hold.released.is_set():
            hold.holder, hold.until, hold.gone = message, until, None
            hold.released.clear()

    def expect(
        self, session: str, message: str, hold_s: float, gone: Callable[[], Awaitable[bool]]
    ) -> None:
        """An older ``message`` of ``session`` was handed out but never reached this router
        (``gaps``): the session waits for it as for a failed one, until it is handled here,
        ``gone()`` says it was handled elsewhere, or ``hold_s`` passes."""
        hold = self._holds.get(session)
        if hold is None:
            self._holds[session] = _Hold(message, self._clock() + hold_s, gone)
        elif hold.released.is_set():
            hold.holder, hold.until, hold.gone = message, self._clock() + hold_s, gone
            hold.released.clear()

    def done(self, session: str, message: str) -> None:
        hold = self._holds.get(session)
        if hold is not None and hold.holder == message:
            self._release(session, hold)

    def _release(self, session: str, hold: _Hold) -> None:
        hold.released.set()
        if hold.users == 0:
            del self._holds[session]

    async def queue(
        self, session: str, work: Callable[[], Awaitable[T]], lend: Lend | None = None
    ) -> T:
        """``work()`` once the failed message got through (or its hold ran out) and every
        message that queued before this one went. ``lend``: the consumer's slot is lent while
        this waits (the PullWorker's ``lend_slot``), so the failed message's redelivery can
        be fetched however many wait."""
        hold = self._holds.get(session)
        if hold is None:  # released and gone meanwhile
            return await work()
        hold.users += 1
        try:
            async with lend() if lend is not None else contextlib.nullcontext():
                await hold.queue.acquire()
                try:
                    await self._wait(session, hold)
                except BaseException:
                    hold.queue.release()
                    raise
            try:
                return await work()
            finally:
                hold.queue.release()
        finally:
            hold.users -= 1
            if hold.users == 0 and hold.released.is_set() and self._holds.get(session) is hold:
                del self._holds[session]

    async def _wait(self, session: str, hold: _Hold) -> None:
        while not hold.released.is_set():
            left = hold.until - self._clock()
            if left <= 0:
                log.warning("session %s: gave up waiting for an earlier message", session)
                hold.released.set()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hold.released.wait(), min(left, RECHECK_S))
            if not hold.released.is_set() and hold.gone is not None and await hold.gone():
                hold.released.set()


class SessionTurns:
    """One append at a time per session, in the order the messages asked (asyncio locks are
    fair); a lock is dropped when nobody holds or waits for it. An append that fails marks its
    session failed in ``gate`` before the next waiter gets the turn; that one then raises
    :class:`SessionHeld` instead of going ahead."""

    def __init__(self, gate: SessionGate) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self.gate = gate

    @asynccontextmanager
    async def turn(self, session: str, message: str = "") -> AsyncIterator[None]:
        lock, users = self._locks.get(session, (asyncio.Lock(), 0))
        self._locks[session] = (lock, users + 1)
        try:
            async with lock:
                if self.gate.active(session, message):
                    raise SessionHeld(session)
                try:
                    yield
                except Exception:
                    self.gate.fail(session, message)
                    raise
        finally:
            lock, users = self._locks[session]
            if users <= 1:
                del self._locks[session]
            else:
                self._locks[session] = (lock, users - 1)


async def in_order(
    gate: SessionGate,
    session: str,
    message: str,
    work: Callable[[], Awaitable[None]],
    on_held: Callable[[], None] = lambda: None,
    lend: Lend | None = None,
) -> None:
    """``work()`` for one delivery of ``message``: at once, or (``on_held``) queued behind a
    failed message of its session. Its failure holds the session (the caller's consumer
    redelivers it); its success releases the session."""
    try:
        try:
            if gate.holds(session, message):
                raise SessionHeld(session)
            await work()
        except SessionHeld:
            on_held()
            await gate.queue(session, work, lend)
    except Exception:
        gate.fail(session, message)
        raise
    gate.done(session, message)


async def retrying(attempt: Callable[[], Awaitable[T]], what: str) -> T:
    """``attempt()`` until it works or :data:`RETRY_FOR_S` passes (then its error)."""

    def logged(exc: Exception) -> None:
        log.info("%s failed (%s); retrying", what, type(exc).__name__)

    return await retry.retrying(
        attempt, within_s=RETRY_FOR_S, first_delay_s=0.1, transient=TRANSIENT, on_retry=logged
    )
