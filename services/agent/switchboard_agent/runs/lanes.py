"""The lane protocol (docs/architecture.md) on the agent side.

Every replica pulls from the shared ``dispatch`` consumer. A replica that receives an item tries
to take the session's lease; the owner reads the session's pending items from the stream in
order, starting after the cursor stored in PostgreSQL, runs them according to the queue mode,
and repeats until nothing is pending. A replica without the lease acks the item if the cursor
already covers it, else NAKs it with a delay so it comes back until the owner has taken it.

Costs and fairness: the cursor is read once per ownership (the owner is its only writer while it
holds the lease); a delivery of a lane this replica already works on is handed to that owner
instead of being NAKed; and while every slot of the replica is taken, an owner stops after the
items it was handed, so later items wait for their own delivery, in arrival order, instead of
one busy session keeping a slot while other sessions' deliveries queue behind it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from switchboard import bus
from switchboard.queue_modes import QueueMode
from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2

from ..metrics import ACTIVE_LANES, ACTIVE_RUNS, INTERRUPTS, LANE_WAIT_SECONDS, REDELIVERIES
from ..plugins.hooks import HookName
from ..sessions.store import CursorMoved, LaneState, SessionStore
from .aborts import RunningRuns
from .lease import Lease, Leases
from .queueing import Batch, PendingItem, RunControl, effective_mode, plan
from .runner import Runner

log = logging.getLogger(__name__)
LEASE_RETRY_S = (0.005, 0.01, 0.02)
MAX_BATCH = 100


class LaneReader:
    """Reads a lane's items straight from the LANES stream, by subject, in sequence order
    (direct gets: answered by the stream itself, without a JetStream API request)."""

    def __init__(self, js: JetStreamContext, stream: str) -> None:
        self.js = js
        self.stream = stream

    async def pending(self, subject: str, after: int, limit: int = MAX_BATCH) -> list[PendingItem]:
        items: list[PendingItem] = []
        seq = after + 1
        while len(items) < limit:
            try:
                raw = await self.js.get_msg(
                    self.stream, seq=seq, subject=subject, next=True, direct=True
                )
            except NotFoundError:
                break
            assert raw.seq is not None
            item = bus.decode(messages_pb2.LaneItem, raw.data)
            stored = raw.time.timestamp() if raw.time else time.time()
            items.append(PendingItem(raw.seq, item, dict(raw.headers or {}), stored))
            seq = raw.seq + 1
        return items


@dataclass
class _Lane:
    """One session this replica works on, and the deliveries of it this replica answers."""

    key: str
    subject: str
    bound: int  # run items up to this sequence even while every slot is taken
    msgs: list[Msg] = field(default_factory=list)
    cursor: int = 0  # last processed sequence, in memory while the lease is held
    ran: set[int] = field(default_factory=set)  # sequences this owner's runs answered
    queue_mode: str = ""


def _never() -> bool:
    return False


class LaneManager:
    def __init__(
        self,
        nc: NATS,
        reader: LaneReader,
        leases: Leases,
        store: SessionStore,
        runner: Runner,
        *,
        default_mode: QueueMode,
        collect_debounce_s: float,
        nak_delay_s: float = 0.05,
        nak_delay_max_s: float = 2.0,
        keepalive_s: float = 5.0,
        saturated: Callable[[], bool] = _never,
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
        self.owned: dict[str, _Lane] = {}
        self.keepalive_s = keepalive_s
        self.saturated = saturated  # every slot of this replica is taken
        self.running = RunningRuns()  # for aborts on request

    async def handle(self, msg: Msg, item: messages_pb2.LaneItem) -> None:
        """Handle one dispatch delivery (the PullWorker NAKs it if this raises)."""
        meta = msg.metadata
        if meta.num_delivered > 1:
            REDELIVERIES.inc()
        key = item.session_key
        current = self.owned.get(key)
        if current is not None:  # this replica works through that lane: its owner answers it
            current.bound = max(current.bound, meta.sequence.stream)
            current.msgs.append(msg)
            return
        lane = _Lane(key, msg.subject, meta.sequence.stream, [msg])
        self.owned[key] = lane
        keepalive = asyncio.create_task(self._keepalive(lane))
        try:
            await self._serve(lane)
        except BaseException:
            await self._nak(lane.msgs[1:])  # the PullWorker NAKs the first one
            raise
        finally:
            del self.owned[key]
            keepalive.cancel()
        await self._settle(lane)

    async def _serve(self, lane: _Lane) -> None:
        token = session_token(lane.key)
        while True:
            lease = await self._acquire(token)
            if lease is None:
                state = await self.store.lane_state(lane.key)
                lane.cursor, lane.queue_mode = state.cursor, state.queue_mode
                return
            # From here on the lease is released whatever fails: it renews itself until then,
            # and a leaked one locks the session out of every replica for the process's life.
            owning = False
            try:
                state = await self.store.lane_state(lane.key)
                lane.cursor, lane.queue_mode = state.cursor, state.queue_mode
                ACTIVE_LANES.inc()
                owning = True
                await self.runner.hooks.session(HookName.SESSION_START, lane.key)
                await self._own(lane, lease, state)
            finally:
                if owning:
                    ACTIVE_LANES.dec()
                await lease.release()
                if owning:
                    await self.runner.hooks.session(HookName.SESSION_END, lane.key)
            # Once more after the release: an item may have arrived after the last read.
            if not await self._next(lane):
                return

    async def _acquire(self, token: str) -> Lease | None:
        """The lease, retried briefly: a session's next message often reaches this replica
        while the other one is releasing the lease after the previous run (a NAK would cost
        its delay, and CPU on both replicas, for a wait of a few milliseconds)."""
        lease = await self.leases.acquire(token)
        for pause in LEASE_RETRY_S:
            if lease is not None:
                break
            await asyncio.sleep(pause)
            lease = await self.leases.acquire(token)
        return lease

    async def _settle(self, lane: _Lane) -> None:
        """Ack the deliveries the cursor covers (republishing the replies of runs another owner
        committed: it may have died before publishing them); NAK the rest."""
        for msg in lane.msgs:
            seq = msg.metadata.sequence.stream
            if seq > lane.cursor:
                await self._nak([msg])
                continue
            if seq not in lane.ran:
                item = bus.decode(messages_pb2.LaneItem, msg.data)
                mode = effective_mode(lane.queue_mode, item.queue_mode, self.default_mode)
                await self.runner.republish(item, mode)
            await msg.ack()

    async def _nak(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            try:
                await msg.nak(delay=self._nak_delay(msg.metadata.num_delivered))
            except Exception as exc:  # NATS away: the ack wait redelivers it anyway
                log.warning("lane NAK failed (%s)", type(exc).__name__)

    def _nak_delay(self, deliveries: int) -> float:
        """The owner reads the stream itself; a NAKed delivery only has to come back to be
        acknowledged, or to take over if the owner died or stopped at its bound; short, so a
        lane another replica let go of does not sit idle, and longer for later retries."""
        return min(self.nak_delay_s * deliveries, self.nak_delay_max_s)

    async def _keepalive(self, lane: _Lane) -> None:
        while True:
            await asyncio.sleep(self.keepalive_s)
            for msg in list(lane.msgs):
                try:
                    await msg.in_progress()
                except Exception as exc:  # NATS away: the next tick tries again
                    log.warning("lane in-progress ack failed (%s)", type(exc).__name__)

    async def _next(self, lane: _Lane) -> PendingItem | None:
        """The lane's next pending item, if this owner should run it: it was handed to this
        replica, or a slot is free (nobody waits behind this lane)."""
        head = await self.reader.pending(lane.subject, lane.cursor, limit=1)
        if not head or (head[0].seq > lane.bound and self.saturated()):
            return None
        return head[0]

    async def _own(self, lane: _Lane, lease: Lease, state: LaneState) -> None:
        subject = lane.subject
        first = True
        while not lease.lost.is_set():
            head = await self._next(lane)
            if head is None:
                return
            if not first:  # settings (queue mode, tool policy) as of this run
                state = await self.store.lane_state(lane.key)
                if state.cursor != lane.cursor:
                    log.warning("lane cursor moved under this owner", extra={"session": lane.key})
                    return
            first = False
            mode = effective_mode(state.queue_mode, head.item.queue_mode, self.default_mode)
            pending = [head]
            if mode.one_run_for_all_pending:
                pending = await self.reader.pending(subject, lane.cursor)
            if mode.debounces:
                pending = await self._debounce(subject, lane.cursor, pending)
            batch = plan(mode, pending)[0]
            try:
                await self._run(batch, lane.cursor, state, mode, subject)
            except CursorMoved:
                log.warning("lane cursor moved under this owner", extra={"session": lane.key})
                return
            lane.cursor = batch.cover_seq
            lane.ran.update(p.seq for p in batch.items)

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
        self,
        batch: Batch,
        cursor: int,
        state: LaneState,
        mode: QueueMode,
        subject: str,
    ) -> None:
        first = batch.items[0].item
        if first.enqueued_at_ms:
            LANE_WAIT_SECONDS.observe(max(0.0, time.time() - first.enqueued_at_ms / 1000))
        control = RunControl(self.reader, subject, batch, steer=mode.steers)
        ACTIVE_RUNS.inc()
        try:
            task = asyncio.create_task(
                self.runner.run(
                    batch, cursor, control, state.tool_policy, mode, state.model, state.standing
                )
            )
            with self.running.tracking(first.session_key, task, control):
                if not mode.interrupts:
                    await _aborted_or_done(task, control)
                    return
                await self._interruptible(task, control, subject, batch.cover_seq)
        finally:
            ACTIVE_RUNS.dec()

    async def _interruptible(
        self, task: asyncio.Task[None], control: RunControl, subject: str, covered: int
    ) -> None:
        """interrupt: a newer item on the lane aborts the run (only these runs watch the lane
        subject, so other modes pay no subscription)."""
        arrived = asyncio.Event()

        async def on_arrival(_: Msg) -> None:
            arrived.set()

        sub = await self.nc.subscribe(subject, cb=on_arrival)
        try:
            # An item that came between reading the lane and subscribing counts too.
            if await self.reader.pending(subject, covered, limit=1):
                arrived.set()
            waiter = asyncio.create_task(arrived.wait())
            try:
                done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            if task not in done:
                INTERRUPTS.inc()
                control.interrupted = True
                task.cancel()
            # Not ``await task``: a run cancelled before it reached the part that handles an
            # interrupt (a newer item seen as the owner began watching) would cancel the
            # lane's handler with it; it ends here, and the owner goes on with the newest.
            await _aborted_or_done(task, control)
        finally:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # connection closed: the subscription is gone anyway
                log.debug("lane unsubscribe failed (%s)", type(exc).__name__)


async def _aborted_or_done(task: asyncio.Task[None], control: RunControl) -> None:
    """Wait for the run; an abort that cancelled it outside the part that handles it ends it
    here instead of cancelling the lane's handler."""
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not control.interrupted or (current is not None and current.cancelling()):
            raise
