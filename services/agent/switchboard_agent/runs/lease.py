"""Per-session lane leases in the NATS KV bucket ``sb_lane_leases`` (docs/architecture.md).

A lease is a key created only if absent; its owner renews it (compare-and-set on the revision)
well within the bucket's TTL. A dead owner stops renewing and the key expires.

Taking a key again that this replica released costs one request instead of three: a create of
a key whose latest entry is a delete marker fails, then reads the marker for its revision, then
writes at it (nats-py's ``KeyValue.create``); the release here keeps its marker's revision, and
the next acquire writes at it directly (compare-and-set: it only succeeds while that marker is
still the key's latest entry, i.e. nobody took the key since), else falls back to create."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict

from nats.js import api
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KV_DEL, KV_OP, KeyValue

from ..metrics import LEASES

log = logging.getLogger(__name__)
FREED_KEPT = 4096  # released keys whose marker revision is remembered (the newest ones)


class Lease:
    def __init__(
        self,
        kv: KeyValue,
        key: str,
        owner: bytes,
        revision: int,
        ttl_s: float,
        freed: OrderedDict[str, int] | None = None,
    ):
        self.kv = kv
        self.freed = freed  # the Leases' released keys -> their delete marker's revision
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
            marker = await _delete(self.kv, self.key, self.revision)
            if self.freed is not None:
                self.freed[self.key] = marker
                self.freed.move_to_end(self.key)
                while len(self.freed) > FREED_KEPT:
                    self.freed.popitem(last=False)
        LEASES.labels("released").inc()


async def _delete(kv: KeyValue, key: str, last: int) -> int:
    """``kv.delete(key, last=last)`` (the same message: a delete marker written only at
    revision ``last``), returning the marker's revision, which ``delete`` does not give."""
    headers = {KV_OP: KV_DEL, api.Header.EXPECTED_LAST_SUBJECT_SEQUENCE: str(last)}
    ack = await kv._js.publish(f"{kv._pre}{key}", headers=headers)
    return ack.seq


class Leases:
    def __init__(self, kv: KeyValue, owner: str, ttl_s: float) -> None:
        self.kv = kv
        self.owner = owner.encode()
        self.ttl_s = ttl_s
        self._freed: OrderedDict[str, int] = OrderedDict()

    async def acquire(self, key: str) -> Lease | None:
        """The lease on ``key``, or None while another owner holds it."""
        try:
            revision = await self._take(key)
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            # KeyNotFoundError: the holder released it while create() was looking; retry later.
            LEASES.labels("busy").inc()
            return None
        LEASES.labels("taken").inc()
        return Lease(self.kv, key, self.owner, revision, self.ttl_s, self._freed)

    async def _take(self, key: str) -> int:
        """Write the key if it is free: at the revision of the delete marker this replica left
        there (one request), else by create (absent key or someone else's marker)."""
        marker = self._freed.pop(key, None)
        if marker is not None:
            with contextlib.suppress(KeyWrongLastSequenceError):  # taken or expired since
                return await self.kv.update(key, self.owner, last=marker)
        return await self.kv.create(key, self.owner)
