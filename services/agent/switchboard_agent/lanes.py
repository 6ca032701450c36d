"""The lane protocol (DESIGN.md section 4) on the agent side.

Every replica pulls from the shared ``dispatch`` consumer. A replica that receives an item tries
to take the session's lease; the owner reads the session's pending items from the stream in
order, starting after the cursor stored in PostgreSQL, runs them according to the queue mode,
and repeats until nothing is pending. A replica without the lease acks the item if the cursor
already covers it, else NAKs it with a delay so it comes back until the owner has taken it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2

from .lease import Lease, Leases
from .metrics import ACTIVE_LANES, ACTIVE_RUNS, INTERRUPTS, LANE_WAIT_SECONDS, REDELIVERIES
from .queueing import Batch, PendingItem, RunControl, effective_mode, plan
from .runner import Runner
from .store import CursorMoved, LaneState, SessionStore

log = logging.getLogger(__name__)
MAX_BATCH = 100


class LaneReader:
    """Reads a lane's items straight from the LANES stream, by subject, in sequence order."""

    def __init__(self, js: JetStreamContext, stream: str) -> None:
        self.js = js
        self.stream = stream

    async def pending(self, subject: str, after: int, limit: int = MAX_BATCH) -> list[PendingItem]:
        items: list[PendingItem] = []
        seq = after + 1
        while len(items) < limit:
            try:
                raw = await self.js.get_msg(self.stream, seq=seq, subject=subject, next=True)
            except NotFoundError:
                break
            assert raw.seq is not None
            item = messages_pb2.LaneItem()
            item.ParseFromString(raw.data or b"")
            stored = raw.time.timestamp() if raw.time else time.time()
            items.append(PendingItem(raw.seq, item, dict(raw.headers or {}), stored))
            seq = raw.seq + 1
        return items


class LaneManager:
    def __init__(
        self,
        nc: NATS,
        reader: LaneReader,
        leases: Leases,
        store: SessionStore,
        runner: Runner,
        *,
        default_mode: str,
        collect_debounce_s: float,
        nak_delay_s: float = 0.5,
        nak_delay_max_s: float = 5.0,
        keepalive_s: float = 5.0,
    ) -> None:
        self.nc = nc
        self.reader = reader
        self.leases = leases
        self.store = store
        self.runner = runner
        self.default_mode = default_mode
        self.collect_debounce_s = collect_debounce_s
        self.nak_delay_s = nak_delay_s
        self.nak_delay_max_s = nak_delay_max_s
        self.owned: set[str] = set()
        self.keepalive_s = keepalive_s

    async def handle(self, msg: Msg) -> None:
        """Handle one dispatch delivery (the PullWorker NAKs it if this raises)."""
        item = messages_pb2.LaneItem()
        try:
            item.ParseFromString(msg.data)
        except Exception:
            log.warning("dropping undecodable lane item on %s", msg.subject)
            await msg.term()
            return
        meta = msg.metadata
        if meta.num_delivered > 1:
            REDELIVERIES.inc()
        key = item.session_key
        if key in self.owned:  # this replica is working through that lane right now
            await msg.nak(delay=self._nak_delay(meta.num_delivered))
            return
        token = session_token(key)
        state = await self.store.lane_state(key)
        if meta.sequence.stream <= state.cursor:
            # Its run is committed; the owner may have died before publishing the reply.
            mode = effective_mode(state.queue_mode, item.queue_mode, self.default_mode)
            await self.runner.republish(item, mode)
            await msg.ack()
            return
        while True:
            lease = await self.leases.acquire(token)
            if lease is None:
                await msg.nak(delay=self._nak_delay(meta.num_delivered))
                return
            keepalive = asyncio.create_task(self._keepalive(msg))
            self.owned.add(key)
            ACTIVE_LANES.inc()
            try:
                await self._own(key, msg.subject, lease)
            finally:
                self.owned.discard(key)
                keepalive.cancel()
                ACTIVE_LANES.dec()
                await lease.release()
            # Once more after the release: an item may have arrived after the last read.
            cursor = (await self.store.lane_state(key)).cursor
            if not await self.reader.pending(msg.subject, cursor, limit=1):
                await msg.ack()
                return

    def _nak_delay(self, deliveries: int) -> float:
        """The owner reads the stream itself; a NAKed delivery only has to come back to be
        acknowledged, or to take over if the owner died, so later retries wait longer."""
        return min(self.nak_delay_s * deliveries, self.nak_delay_max_s)

    async def _keepalive(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(self.keepalive_s)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _own(self, key: str, subject: str, lease: Lease) -> None:
        arrived = asyncio.Event()

        async def on_arrival(_: Msg) -> None:
            arrived.set()

        sub = await self.nc.subscribe(subject, cb=on_arrival)
        try:
            while not lease.lost.is_set():
                state = await self.store.lane_state(key)
                head = await self.reader.pending(subject, state.cursor, limit=1)
                if not head:
                    return
                mode = effective_mode(state.queue_mode, head[0].item.queue_mode, self.default_mode)
                pending = head
                if mode in ("collect", "steer", "interrupt"):
                    pending = await self.reader.pending(subject, state.cursor)
                if mode == "collect":
                    pending = await self._debounce(subject, state.cursor, pending)
                batch = plan(mode, pending)[0]
                arrived.clear()
                try:
                    await self._run(batch, state, mode, subject, arrived)
                except CursorMoved:
                    log.warning("lane cursor moved under this owner", extra={"session": key})
                    return
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _debounce(
        self, subject: str, cursor: int, pending: list[PendingItem]
    ) -> list[PendingItem]:
        """collect: wait until no new item arrived for the debounce window, then take all."""
        while True:
            remaining = self.collect_debounce_s - (time.time() - pending[-1].arrived_at)
            if remaining <= 0:
                return pending
            await asyncio.sleep(remaining)
            pending = await self.reader.pending(subject, cursor)

    async def _run(
        self, batch: Batch, state: LaneState, mode: str, subject: str, arrived: asyncio.Event
    ) -> None:
        first = batch.items[0].item
        if first.enqueued_at_ms:
            LANE_WAIT_SECONDS.observe(max(0.0, time.time() - first.enqueued_at_ms / 1000))
        control = RunControl(self.reader, subject, batch, steer=mode == "steer")
        ACTIVE_RUNS.inc()
        try:
            task = asyncio.create_task(
                self.runner.run(batch, state.cursor, control, state.tool_policy, mode)
            )
            if mode != "interrupt":
                await task
                return
            waiter = asyncio.create_task(arrived.wait())
            try:
                done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if task not in done:
                INTERRUPTS.inc()
                control.interrupted = True
                task.cancel()
            await task
        finally:
            ACTIVE_RUNS.dec()
