"""Per-session lane leases in the NATS KV bucket ``sb_lane_leases`` (DESIGN.md section 4).

A lease is a key created only if absent; its owner renews it (compare-and-set on the revision)
well within the bucket's TTL. A dead owner stops renewing and the key expires."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from .metrics import LEASES

log = logging.getLogger(__name__)


class Lease:
    def __init__(self, kv: KeyValue, key: str, owner: bytes, revision: int, ttl_s: float):
        self.kv = kv
        self.key = key
        self.owner = owner
        self.revision = revision
        self.ttl_s = ttl_s
        self.lost = asyncio.Event()
        self._stopped = False
        self._task = asyncio.create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        # The flag, not only cancel(): on Python 3.11 a cancel that lands while a NATS request
        # completes can be swallowed (asyncio.wait_for), and the loop must still end.
        while not self._stopped:
            await asyncio.sleep(self.ttl_s / 3)
            if self._stopped:
                return
            try:
                self.revision = await self.kv.update(self.key, self.owner, last=self.revision)
            except KeyWrongLastSequenceError:
                log.warning("lane lease lost", extra={"lease": self.key})
                LEASES.labels("lost").inc()
                self.lost.set()
                return
            except Exception as exc:  # NATS briefly away: retry on the next tick
                log.warning("lane lease renewal failed (%s)", type(exc).__name__)

    async def release(self) -> None:
        self._stopped = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task  # renewal has really stopped: self.revision is final
        if self.lost.is_set():
            return
        with contextlib.suppress(Exception):
            await self.kv.delete(self.key, last=self.revision)
        LEASES.labels("released").inc()


class Leases:
    def __init__(self, kv: KeyValue, owner: str, ttl_s: float) -> None:
        self.kv = kv
        self.owner = owner.encode()
        self.ttl_s = ttl_s

    async def acquire(self, key: str) -> Lease | None:
        """The lease on ``key``, or None while another owner holds it."""
        try:
            revision = await self.kv.create(key, self.owner)
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            # KeyNotFoundError: the holder released it while create() was looking; retry later.
            LEASES.labels("busy").inc()
            return None
        LEASES.labels("taken").inc()
        return Lease(self.kv, key, self.owner, revision, self.ttl_s)
