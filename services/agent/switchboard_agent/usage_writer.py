"""Usage rows written in the background, in order, as many in one batch as are waiting.

One INSERT per model call cost a round trip, a transaction and a commit each (two per turn of
a tool-using answer). Here one task writes: whatever calls queued while the last batch was
written go together in the next one (one round trip and transaction), so under load many
calls share a commit, and a lone call is written at once (no timer). A batch that fails is
logged and counted, its rows are dropped (usage is reporting, never worth failing a run for)
and the writer goes on.
"""

from __future__ import annotations

import asyncio
import logging

from .metrics import USAGE_WRITE_ERRORS
from .usage import CallUsage, UsageStore

log = logging.getLogger(__name__)


class UsageWriter:
    def __init__(self, store: UsageStore) -> None:
        self.store = store
        self._rows: list[CallUsage] = []
        self._batch: asyncio.Future[None] | None = None  # done when the queued rows are written
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def add(self, row: CallUsage) -> asyncio.Future[None]:
        """Queue a row; the future is done once the batch holding it has been written (it never
        raises: a failed write is logged and counted here; a batch cut short by the writer's
        cancellation at shutdown is done too, so no one waits on it forever)."""
        if self._batch is None:
            self._batch = asyncio.get_running_loop().create_future()
        self._rows.append(row)
        if self._task is None or self._task.done():  # first row, or a late one after close()
            self._task = asyncio.create_task(self._run(), name="usage-writer")
        self._wake.set()
        return self._batch

    async def close(self) -> None:
        """Write what is queued, then stop (a row added later is still written, alone)."""
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
