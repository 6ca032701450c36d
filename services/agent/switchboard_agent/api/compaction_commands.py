"""``/compact`` in a chat: the session is compacted in the background (a flush and a summary
are two model calls, longer than the router waits for an answer), all but its last user turn;
the answer says it started. The outcome is the ``lifecycle``/``compaction`` event and a log
line."""

from __future__ import annotations

import asyncio
import logging

from nats.aio.client import Client as NATS

from switchboard import bus

from ..compaction.compactor import Compactor
from ..sessions.models import SessionModels

log = logging.getLogger(__name__)
KEEP_TURNS = 1
STARTED = (
    "Compacting this conversation: messages before the last one are being summarised (facts"
    " worth keeping go to memory first)."
)
BUSY = "This conversation is being compacted already."


class CompactCommand:
    def __init__(
        self, compactor: Compactor, models: SessionModels, nc: NATS, subjects: bus.Subjects
    ) -> None:
        self.compactor = compactor
        self.models = models
        self.nc = nc
        self.subjects = subjects
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, session_key: str) -> str:
        """Start compacting ``session_key``; the text for the chat."""
        if session_key in self._tasks:
            return BUSY
        task = asyncio.create_task(self._run(session_key))
        self._tasks[session_key] = task
        task.add_done_callback(lambda _: self._tasks.pop(session_key, None))
        return STARTED

    async def _run(self, session_key: str) -> None:
        try:
            done = await self.compactor.compact_now(
                session_key, KEEP_TURNS, self.models, self.nc, self.subjects
            )
        except Exception:
            log.exception("/compact failed", extra={"session": session_key})
            return
        if done is not None and not done.compacted:
            log.info("/compact: nothing compacted (%s)", done.note, extra={"session": session_key})

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
