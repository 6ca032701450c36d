"""Leases on the gateway's channel connections (Telegram polling, Discord's gateway socket):
exactly one gateway replica holds each, in the NATS KV bucket ``rt.subjects.channel_lease_bucket``
(keys expire after the bucket's TTL, ``bus.CHANNEL_LEASE_TTL_S`` as the router creates it;
the lease reads it from the bucket: :func:`bucket_ttl`).

A lease is a key created only if absent (``kv.create``) whose value names the owner. The owner
renews it every TTL/3 by compare-and-set on its revision (``kv.update(last=revision)``); it is
lost when that update is refused (someone else holds the key now) or when renewals keep failing
until the key may have expired. A clean stop deletes the key at its revision, so another replica
takes over at once; a crashed owner's key expires after the TTL.

:class:`LeasedWork` runs a connection under a lease: every ``retry_s`` it tries to acquire the
lease; while it holds it the work runs, and the moment the lease is lost the work is cancelled
and acquisition resumes. The same pattern as the agent's lane leases
(``switchboard_agent/runs/lease.py``), with state that lives as long as the lease
(:meth:`ChannelLease.put_state`) and the ``sb_channel_lease_held`` gauge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Coroutine
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from switchboard import bus

from ..metrics import CHANNEL_LEASE_HELD

log = logging.getLogger(__name__)

_UNSAFE_KEY = re.compile(r"[^-_=a-zA-Z0-9]")


def lease_key(channel: str, account: str) -> str:
    """The KV key of a channel account's lease: ``<channel>.<account>``, each part reduced to
    the characters a key token may hold (others become ``_``)."""
    return f"{_UNSAFE_KEY.sub('_', channel)}.{_UNSAFE_KEY.sub('_', account) or '_'}"


class ChannelLease:
    """A lease held on ``key``: renewed in the background until released, abandoned or lost
    (then :attr:`lost` is set)."""

    def __init__(
        self, kv: KeyValue, key: str, owner: bytes, revision: int, ttl_s: float, since: float
    ) -> None:
        self.kv = kv
        self.key = key
        self.owner = owner
        self.revision = revision
        self.ttl_s = ttl_s
        self.lost = asyncio.Event()
        self._renewed_at = since  # monotonic time of the last write known to have landed
        self._state: dict[str, bytes] = {}
        self._stopped = False
        self._task = asyncio.create_task(self._renew_forever(), name=f"lease-{key}")

    @property
    def interval_s(self) -> float:
        return self.ttl_s / 3

    async def _renew_forever(self) -> None:
        # The flag, not only cancel(): a cancel that lands while a NATS request completes can
        # be swallowed (asyncio.wait_for on 3.11), and the loop must still end.
        while not self._stopped:
            await asyncio.sleep(self.interval_s)
            if self._stopped:
                return
            started = time.monotonic()
            try:
                self.revision = await self.kv.update(self.key, self.owner, last=self.revision)
            except KeyWrongLastSequenceError:
                self._lose("taken by another owner")
                return
            except Exception as exc:  # NATS briefly away: retry on the next tick, unless...
                log.warning(
                    "channel lease renewal failed (%s)", type(exc).__name__, extra=self._log
                )
                # ...the key may expire before the next tick lands: another replica may
                # take it, so stop now rather than run beside it.
                if time.monotonic() + self.interval_s >= self._renewed_at + self.ttl_s:
                    self._lose("renewals failed until the key could expire")
                    return
                continue
            self._renewed_at = started
            await self._rewrite_state()

    async def _rewrite_state(self) -> None:
        for key, value in list(self._state.items()):
            try:
                await self.kv.put(key, value)
            except Exception as exc:  # rewritten again at the next renewal
                log.warning("channel lease state not rewritten (%s)", type(exc).__name__)

    def _lose(self, why: str) -> None:
        log.warning("channel lease lost: %s", why, extra=self._log)
        self.lost.set()

    @property
    def _log(self) -> dict[str, str]:
        return {"lease": self.key}

    @property
    def held(self) -> bool:
        return not (self._stopped or self.lost.is_set())

    async def put_state(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key`` in the lease bucket now, and write it again with each
        renewal so it does not expire while the lease is held (the bucket's TTL applies to
        every key). Once the lease is gone it expires a TTL after its last write, long
        enough for the next owner to read it when it takes over."""
        if not self.held:
            return
        self._state[key] = value
        await self.kv.put(key, value)

    async def get_state(self, key: str) -> bytes | None:
        """What :meth:`put_state` stored under ``key`` (this owner or the previous one)."""
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:  # also KeyDeletedError
            return None
        return entry.value

    async def _stop_renewing(self) -> None:
        self._stopped = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task  # renewal has really stopped: self.revision is final

    async def release(self) -> None:
        """Stop renewing and delete the key at our revision (a key someone else took since
        stays theirs), so another replica can take over at once."""
        await self._stop_renewing()
        if self.lost.is_set():
            return
        try:
            await self.kv.delete(self.key, last=self.revision)
        except Exception as exc:  # it expires after the TTL instead
            log.warning("channel lease not released (%s)", type(exc).__name__, extra=self._log)

    async def abandon(self) -> None:
        """Stop renewing and leave the key to expire: what a crash does (tests use this)."""
        await self._stop_renewing()


async def bucket_ttl(kv: KeyValue) -> float:
    """The lease TTL: the bucket's own (a crashed holder's lease ends then)."""
    return await bus.bucket_ttl(kv, bus.CHANNEL_LEASE_TTL_S)


async def acquire(kv: KeyValue, key: str, owner: bytes, ttl_s: float) -> ChannelLease | None:
    """The lease on ``key``, or None while another owner holds it."""
    since = time.monotonic()
    try:
        revision = await kv.create(key, owner)
    except (KeyWrongLastSequenceError, KeyNotFoundError):
        # KeyNotFoundError: the holder released it while create() was looking; retry later.
        return None
    return ChannelLease(kv, key, owner, revision, ttl_s, since)


Work = Callable[[ChannelLease], Coroutine[Any, Any, None]]


class LeasedWork:
    """``work(lease)`` running on this replica only while it holds the lease on ``key``.

    ``start()`` begins trying to acquire (every ``retry_s`` while another replica holds it);
    ``stop()`` cancels the work and releases the lease. Work that returns or raises gives the
    lease up (released) and it is tried again after ``retry_s``."""

    def __init__(
        self,
        kv: KeyValue,
        key: str,
        owner: str,
        work: Work,
        *,
        channel: str,
        account: str,
        ttl_s: float,
        retry_s: float,
    ) -> None:
        self.kv = kv
        self.key = key
        self.owner = owner.encode()
        self.work = work
        self.ttl_s = ttl_s
        self.retry_s = retry_s
        self._held_gauge = CHANNEL_LEASE_HELD.labels(channel, account)
        self.lease: ChannelLease | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._release_on_stop = True

    @property
    def held(self) -> bool:
        return self.lease is not None and self.lease.held

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"leased-{self.key}")

    async def stop(self, *, release: bool = True) -> None:
        """Cancel the work; ``release=False`` leaves the key to expire instead of deleting
        it (a crash, for tests)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping, self._release_on_stop = True, release
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while not self._stopping:
            try:
                lease = await acquire(self.kv, self.key, self.owner, self.ttl_s)
            except Exception as exc:  # NATS briefly away
                log.warning("channel lease: acquire failed (%s)", type(exc).__name__)
                lease = None
            if lease is not None:
                await self._hold(lease)
            await asyncio.sleep(self.retry_s)

    async def _hold(self, lease: ChannelLease) -> None:
        self.lease = lease
        self._held_gauge.inc()
        log.info("channel lease taken", extra={"lease": self.key})
        work = asyncio.create_task(self.work(lease), name=f"work-{self.key}")
        lost = asyncio.create_task(lease.lost.wait())
        try:
            await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
            if work.done() and not work.cancelled() and (exc := work.exception()) is not None:
                log.error("channel work failed (%s)", type(exc).__name__, extra={"lease": self.key})
        finally:
            # Losing the lease stops the work at once; so does stop().
            await _finish(work)
            await _finish(lost)
            self._held_gauge.dec()
            self.lease = None
            if self._release_on_stop:
                await lease.release()
            else:
                await lease.abandon()


async def _finish(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended, whatever it ended with (logged already)."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
