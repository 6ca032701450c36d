"""Trying a JetStream publish again while the bus recovers, for every service that publishes.

A publish fails for a moment when a NATS node dies (its streams elect a new leader and answer
"no responders" or 503 until then) or does not answer in time; the same message, with the same
``Nats-Msg-Id``, may then go through a little later and is stored once. The gateway and the
router both wait this out; they differ in how long, in the first pause, and in whether a closed
connection is worth waiting for, so those are parameters here and the loop is written once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.errors import ConnectionClosedError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

__all__ = ["TRANSIENT", "TRANSIENT_OR_CLOSED", "retrying"]

T = TypeVar("T")

# A publish that may succeed if tried again: no stream leader yet (a node died and the stream is
# electing one: "no responders", which js.publish raises as NoStreamResponseError, not
# NoRespondersError, or JetStream's 503), or no answer in time (nats.py's TimeoutError is also
# the builtin one; both are named so that neither depends on the other's ancestry).
TRANSIENT: tuple[type[Exception], ...] = (
    NatsTimeout,
    NoRespondersError,
    NoStreamResponseError,
    ServiceUnavailableError,
    TimeoutError,
)
# The same, plus a closed connection: for a caller whose client reconnects underneath it (the
# router's lane append holds its session's turn through a NATS restart). Where a closed
# connection is final (the gateway answering a client), use TRANSIENT.
TRANSIENT_OR_CLOSED: tuple[type[Exception], ...] = (*TRANSIENT, ConnectionClosedError)


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    *,
    within_s: float | None,
    first_delay_s: float,
    max_delay_s: float = 2.0,
    transient: tuple[type[Exception], ...] = TRANSIENT,
    on_retry: Callable[[Exception], None] | None = None,
) -> T:
    """``attempt()`` until it returns; its result.

    An error in ``transient`` is tried again after a pause that starts at ``first_delay_s`` and
    doubles up to ``max_delay_s``, as long as the pause ends within ``within_s`` of the first
    attempt (``None``: no deadline, the caller bounds it, e.g. by cancelling); past that the
    last error is raised as it was, so each caller maps it to its own answer. Any other error
    is raised at once. ``on_retry`` sees each error that is about to be tried again (to log it,
    or to note that a timed-out attempt may have been stored after all)."""
    deadline = None if within_s is None else time.monotonic() + within_s
    delay = first_delay_s
    while True:
        try:
            return await attempt()
        except transient as exc:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            if on_retry is not None:
                on_retry(exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay_s)
