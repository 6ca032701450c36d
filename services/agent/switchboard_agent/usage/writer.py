"""Usage rows written in the background, in order, as many in one batch as are waiting.

One INSERT per model call cost a round trip, a transaction and a commit each (two per turn of
a tool-using answer). Here one task writes: whatever calls queued while the last batch was
written go together in the next one (one round trip and transaction), so under load many
calls share a commit, and a lone call is written at once (no timer). A batch that fails is
logged and counted, its rows are dropped (usage is reporting, never worth failing a run for)
and the writer goes on.

A run can have its rows held for its commit instead (:meth:`UsageWriter.hold`, when no budget
reads usage mid-run: runs/commit.py): the commit statement writes them with the transcript, so
a turn's model calls cost no round trip of their own (two per tool-using turn). A held row is
written by the writer after ``hold_s`` anyway (a long tool call, an approval wait, a crash
before the commit lose at most that much), and at :meth:`UsageWriter.close`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ..metrics import USAGE_WRITE_ERRORS
from .store import CallUsage, UsageStore

log = logging.getLogger(__name__)


HOLD_S = 2.0


@dataclass
class Held:
    """A run's rows kept for its commit; ``done`` resolves once they are written."""

    rows: list[CallUsage] = field(default_factory=list)
    done: asyncio.Future[None] | None = None
    timer: asyncio.TimerHandle | None = None


class UsageWriter:
    def __init__(self, store: UsageStore, hold_s: float = HOLD_S) -> None:
        self.store = store
        self.hold_s = hold_s
        self._held: dict[str, Held] = {}  # run id -> its rows waiting for its commit
        self._rows: list[CallUsage] = []
        self._batch: asyncio.Future[None] | None = None  # done when the queued rows are written
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def add(self, row: CallUsage) -> asyncio.Future[None]:
        """Queue a row; the future is done once the batch holding it has been written (it never
        raises: a failed write is logged and counted here; a batch cut short by the writer's
        cancellation at shutdown is done too, so no one waits on it forever). A held run's row
        waits for its commit (or ``hold_s``)."""
        held = self._held.get(row.run_id)
        if held is not None:
            held.rows.append(row)
            if held.done is None:
                held.done = asyncio.get_running_loop().create_future()
            return held.done
        if self._batch is None:
            self._batch = asyncio.get_running_loop().create_future()
        self._rows.append(row)
        if self._task is None or self._task.done():  # first row, or a late one after close()
            self._task = asyncio.create_task(self._run(), name="usage-writer")
        self._wake.set()
        return self._batch

    def hold(self, run_id: str) -> None:
        """Keep the rows of ``run_id`` for its commit (:meth:`take`), up to ``hold_s`` (the
        timer also ends the hold of a run that failed before its commit)."""
        if run_id not in self._held:
            timer = asyncio.get_running_loop().call_later(self.hold_s, self._expire, run_id)
            self._held[run_id] = Held(timer=timer)

    def take(self, run_id: str) -> Held:
        """The run's held rows, for its commit statement; later rows are written as usual. The
        caller reports the statement's outcome: :meth:`written` or :meth:`requeue`."""
        held = self._held.pop(run_id, None) or Held()
        if held.timer is not None:
            held.timer.cancel()
        return held

    def written(self, held: Held) -> None:
        """The commit statement wrote ``held``'s rows."""
        if held.done is not None and not held.done.done():
            held.done.set_result(None)

    def requeue(self, held: Held) -> None:
        """The commit did not write ``held``'s rows: the writer does (in their order)."""
        if not held.rows:
            self.written(held)
            return
        batch: asyncio.Future[None] | None = None
        for row in held.rows:
            batch = self.add(row)
        done = held.done
        if batch is not None and done is not None:

            def settle(_: asyncio.Future[None]) -> None:
                if not done.done():
                    done.set_result(None)

            batch.add_done_callback(settle)

    def _expire(self, run_id: str) -> None:
        """The run held its rows for ``hold_s``: write them now, and its later ones at once."""
        self.requeue(self.take(run_id))

    async def close(self) -> None:
        """Write what is queued and held, then stop (a row added later is still written,
        alone)."""
        for run_id in list(self._held):
            self._expire(run_id)
        self._closed = True
        if self._task is None:
            return
        self._wake.set()
        await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            rows, batch = self._rows, self._batch
            self._rows, self._batch = [], None
            if rows and batch is not None:
                try:
                    await self._write(rows)
                finally:
                    batch.set_result(None)
            if self._closed and not self._rows:
                return

    async def _write(self, rows: list[CallUsage]) -> None:
        try:
            await self.store.add_many(rows)
        except Exception as exc:
            USAGE_WRITE_ERRORS.inc(len(rows))
            sessions = sorted({r.session_key for r in rows})
            log.error(
                "could not record model usage (%d calls)",
                len(rows),
                exc_info=exc,
                extra={"session": sessions[0] if len(sessions) == 1 else ""},
            )
