"""The lane consumer: items of one session run one at a time, in lane (stream) order; an item
the session's cursor already covers is acknowledged and dropped (DESIGN.md section 4)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from nats.aio.msg import Msg
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from .metrics import ACTIVE_RUNS, LANE_WAIT_SECONDS, REDELIVERIES
from .runner import Runner
from .store import SessionStore

log = logging.getLogger(__name__)


class LaneConsumer:
    def __init__(self, runner: Runner, store: SessionStore, ack_wait_s: float) -> None:
        self.runner = runner
        self.store = store
        self.keepalive_s = ack_wait_s / 3
        self.locks: dict[str, asyncio.Lock] = {}
        self.waiting: dict[str, int] = {}

    async def handle(self, msg: Msg) -> None:
        item = messages_pb2.LaneItem()
        try:
            item.ParseFromString(msg.data)
        except Exception:
            log.warning("dropping undecodable lane item on %s", msg.subject)
            await msg.term()
            return
        meta = msg.metadata
        seq = meta.sequence.stream
        if meta.num_delivered > 1:
            REDELIVERIES.inc()
        key = item.session_key
        self.waiting[key] = self.waiting.get(key, 0) + 1
        lock = self.locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                if seq <= await self.store.cursor(key):
                    await msg.ack()
                    return
                if item.enqueued_at_ms:
                    LANE_WAIT_SECONDS.observe(max(0.0, time.time() - item.enqueued_at_ms / 1000))
                keepalive = asyncio.create_task(self._keepalive(msg))
                ACTIVE_RUNS.inc()
                try:
                    await self.runner.run(item, seq, extract_context(msg.headers))
                finally:
                    ACTIVE_RUNS.dec()
                    keepalive.cancel()
                await msg.ack()
        finally:
            self.waiting[key] -= 1
            if not self.waiting[key]:
                del self.waiting[key]
                self.locks.pop(key, None)

    async def _keepalive(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(self.keepalive_s)
            with contextlib.suppress(Exception):
                await msg.in_progress()
