"""What the agent sends to memory on its own: every finished turn (after its run commits, in the
background: never delaying the reply or the lane) and the agent's memory files (``MEMORY.md``,
``memory/*.md`` in its workspace), re-indexed when they change.

Turns wait in a bounded queue drained by one task, which yields to live turns: it sends once no
turn has finished for ``quiet_s`` (or ``MAX_HOLD_S`` after the first waiting one), every waiting
turn of a session in one ``SyncSession``. Embedding is the heaviest thing the system does per
turn; done at once it took CPU (and, in one process, the interpreter) from the next turns (the
sequential turn p50 of ``make bench`` went from 15 to 38 ms). When the queue is full or the
memory service fails, turns are dropped with a log line and
``sb_agent_memory_sync_total{outcome}``: memory is a convenience, the transcript in PostgreSQL
stays the record."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter

from switchboard.v1 import memory_pb2

from .memory_client import MemoryClient, MemoryRefused, MemoryUnavailable
from .memory_scope import ScopeMode, memory_user

log = logging.getLogger(__name__)
SYNCED = Counter(
    "sb_agent_memory_sync_total",
    "Turns and memory files sent to the memory service, by outcome",
    ["kind", "outcome"],
)
MAX_FILE_BYTES = 2 * 1024 * 1024
FILES_EVERY_S = 2.0
MAX_HOLD_S = 10.0  # the longest a finished turn waits for a quiet moment
MAX_TURNS_PER_CALL = 32


@dataclass(frozen=True)
class FinishedTurn:
    agent: str
    session_key: str
    run_id: str
    user_text: str
    assistant_text: str
    at_ms: int


class TurnSync:
    def __init__(
        self, client: MemoryClient, mode: ScopeMode, capacity: int = 256, quiet_s: float = 1.0
    ) -> None:
        self.client = client
        self.mode = mode
        self.quiet_s = quiet_s
        self.queue: asyncio.Queue[FinishedTurn] = asyncio.Queue(capacity)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._drain())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def submit(self, turn: FinishedTurn) -> None:
        if not (turn.user_text.strip() or turn.assistant_text.strip()):
            return
        try:
            self.queue.put_nowait(turn)
        except asyncio.QueueFull:
            SYNCED.labels("turn", "dropped").inc()
            log.warning("memory sync queue full; turn not indexed", extra={"run_id": turn.run_id})

    async def _drain(self) -> None:
        while True:
            batch = [await self.queue.get()]
            batch += await self._gather()
            for (agent, key), turns in _by_session(batch).items():
                for start in range(0, len(turns), MAX_TURNS_PER_CALL):
                    await self._send(agent, key, turns[start : start + MAX_TURNS_PER_CALL])

    async def _gather(self) -> list[FinishedTurn]:
        """The turns that finish until none has for ``quiet_s`` (at most ``MAX_HOLD_S``)."""
        more: list[FinishedTurn] = []
        deadline = time.monotonic() + MAX_HOLD_S
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(self.quiet_s, left))
            if self.queue.empty():
                break
            while not self.queue.empty():
                more.append(self.queue.get_nowait())
        return more

    async def _send(self, agent: str, session_key: str, turns: list[FinishedTurn]) -> None:
        try:
            await self.client.sync_turns(
                agent,
                memory_user(session_key, self.mode),
                session_key,
                [
                    memory_pb2.SessionTurn(
                        turn_id=t.run_id,
                        user_text=t.user_text,
                        assistant_text=t.assistant_text,
                        at_ms=t.at_ms,
                    )
                    for t in turns
                ],
            )
            SYNCED.labels("turn", "ok").inc(len(turns))
        except (MemoryUnavailable, MemoryRefused) as exc:
            SYNCED.labels("turn", "failed").inc(len(turns))
            log.warning("%d turns not indexed: %s", len(turns), exc, extra={"session": session_key})


def _by_session(turns: list[FinishedTurn]) -> dict[tuple[str, str], list[FinishedTurn]]:
    """``turns`` grouped by (agent, session key), each group in the order they finished."""
    groups: dict[tuple[str, str], list[FinishedTurn]] = {}
    for turn in turns:
        groups.setdefault((turn.agent, turn.session_key), []).append(turn)
    return groups


class MemoryFiles:
    """Re-index ``<workspace>/<agent>/MEMORY.md`` and ``memory/*.md`` when they changed (size
    and modification time), at most every :data:`FILES_EVERY_S` per agent; the memory service
    skips content it has already indexed."""

    def __init__(self, client: MemoryClient, workspace_root: Path) -> None:
        self.client = client
        self.root = workspace_root
        self._seen: dict[tuple[str, str], tuple[int, int]] = {}
        self._checked: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _files(self, agent: str) -> dict[str, Path]:
        base = self.root / agent
        found = {"MEMORY.md": base / "MEMORY.md"} if (base / "MEMORY.md").is_file() else {}
        folder = base / "memory"
        if folder.is_dir():
            for path in sorted(folder.glob("*.md")):
                if path.is_file() and not path.is_symlink():
                    found[f"memory/{path.name}"] = path
        return found

    async def refresh(self, agent: str) -> None:
        now = time.monotonic()
        if now - self._checked.get(agent, -FILES_EVERY_S) < FILES_EVERY_S:
            return
        lock = self._locks.setdefault(agent, asyncio.Lock())
        if lock.locked():
            return
        async with lock:
            self._checked[agent] = now
            try:
                await self._refresh(agent)
            except (MemoryUnavailable, MemoryRefused) as exc:
                SYNCED.labels("file", "failed").inc()
                log.warning("memory files not indexed: %s", exc, extra={"agent": agent})
                self._checked.pop(agent, None)  # try again on the next run

    async def _refresh(self, agent: str) -> None:
        files = await asyncio.to_thread(self._files, agent)
        for name, path in files.items():
            try:
                info = path.stat()
            except OSError:
                continue
            stamp = (info.st_size, info.st_mtime_ns)
            if self._seen.get((agent, name)) == stamp:
                continue
            if info.st_size > MAX_FILE_BYTES:
                log.warning("memory file too large to index: %s", name, extra={"agent": agent})
            else:
                body = await asyncio.to_thread(path.read_bytes)
                if body.strip():
                    await self.client.ingest_file(agent, name, body)
                else:
                    await self.client.forget_file(agent, name)
            self._seen[(agent, name)] = stamp
            SYNCED.labels("file", "ok").inc()
        for key in [k for k in self._seen if k[0] == agent and k[1] not in files]:
            await self.client.forget_file(agent, key[1])
            del self._seen[key]
            SYNCED.labels("file", "removed").inc()
