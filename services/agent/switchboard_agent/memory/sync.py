"""What the agent sends to memory on its own: every finished turn (after its run commits, in the
background: never delaying the reply or the lane) and the agent's memory files (``MEMORY.md``,
``memory/*.md`` in its workspace), re-indexed when they change and read beneath the workspace
(no symlink followed, regular files only, size-capped: :func:`scan_memory_files`).

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
import errno
import logging
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter

from switchboard.beneath import O_CLOEXEC, NotRegular, TooLarge, open_no_symlinks, read_regular
from switchboard.trust import Standing
from switchboard.v1 import memory_pb2

from .client import MemoryClient, MemoryRefused, MemoryUnavailable
from .scope import ScopeMode, memory_user

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
    standing: Standing  # the run's: whose memory the turn goes to (memory/scope.py)


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
            for (agent, key, user), turns in self._by_scope(batch).items():
                for start in range(0, len(turns), MAX_TURNS_PER_CALL):
                    await self._send(agent, user, key, turns[start : start + MAX_TURNS_PER_CALL])

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

    def _by_scope(
        self, turns: list[FinishedTurn]
    ) -> dict[tuple[str, str, str], list[FinishedTurn]]:
        """``turns`` grouped by (agent, session key, memory scope), each group in the order
        they finished (a session's turns of different standings go to different scopes)."""
        groups: dict[tuple[str, str, str], list[FinishedTurn]] = {}
        for t in turns:
            user = memory_user(t.session_key, self.mode, t.standing)
            groups.setdefault((t.agent, t.session_key, user), []).append(t)
        return groups

    async def _send(
        self, agent: str, user: str, session_key: str, turns: list[FinishedTurn]
    ) -> None:
        try:
            await self.client.sync_turns(
                agent,
                user,
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


class MemoryFiles:
    """Re-index ``<workspace>/<agent>/MEMORY.md`` and ``memory/*.md`` when they changed
    (device, inode, size, modification time), at most every :data:`FILES_EVERY_S` per agent;
    the memory service skips content it has already indexed.

    The agent's own tools (a sandboxed command too) can write the workspace, so the files are
    read beneath it (:func:`scan_memory_files`): a symlink, a FIFO or a file over
    :data:`MAX_FILE_BYTES` is refused, logged once, never indexed, and forgotten if it was."""

    def __init__(self, client: MemoryClient, workspace_root: Path) -> None:
        self.client = client
        self.root = workspace_root
        self._seen: dict[tuple[str, str], Stamp] = {}
        self._refused: dict[tuple[str, str], str] = {}
        self._checked: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}

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
        seen = {name: stamp for (a, name), stamp in self._seen.items() if a == agent}
        found = await asyncio.to_thread(scan_memory_files, self.root / agent, seen)
        for name, f in found.items():
            key = (agent, name)
            if f.refused:
                await self._refuse(agent, name, f.refused)
                continue
            self._refused.pop(key, None)
            if f.body is None:
                continue  # unchanged since it was indexed
            if f.body.strip():
                await self.client.ingest_file(agent, name, f.body)
            else:
                await self.client.forget_file(agent, name)
            assert f.stamp is not None
            self._seen[key] = f.stamp
            SYNCED.labels("file", "ok").inc()
        for key in [k for k in self._seen if k[0] == agent and k[1] not in found]:
            await self.client.forget_file(agent, key[1])
            del self._seen[key]
            SYNCED.labels("file", "removed").inc()
        for key in [k for k in self._refused if k[0] == agent and k[1] not in found]:
            del self._refused[key]

    async def _refuse(self, agent: str, name: str, why: str) -> None:
        """Not indexed: logged the first time, and forgotten (it may have been indexed, by
        this process or an earlier one) when it is a file's name."""
        key = (agent, name)
        if self._refused.get(key) == why:
            return
        if name.endswith(".md"):
            await self.client.forget_file(agent, name)
        self._seen.pop(key, None)
        self._refused[key] = why
        SYNCED.labels("file", "refused").inc()
        log.warning("memory file not indexed: %s is %s", name, why, extra={"agent": agent})


Stamp = tuple[int, int, int, int]  # device, inode, size, mtime_ns
MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
WORKSPACE = "."  # the name a refusal of the workspace directory itself is logged under
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC


@dataclass(frozen=True)
class Found:
    """One memory file as a scan found it: its stamp; its bytes when they changed (None:
    unchanged since it was indexed, or refused); why it is refused ("" : it is not)."""

    stamp: Stamp | None = None
    body: bytes | None = None
    refused: str = ""


def scan_memory_files(workspace: Path, seen: Mapping[str, Stamp]) -> dict[str, Found]:
    """``MEMORY.md`` and ``memory/*.md`` of ``workspace``, read beneath it (blocking: run it in
    a thread). The workspace directory is opened with ``O_NOFOLLOW``, ``memory/`` through it
    with :func:`open_no_symlinks` and listed on its descriptor, each file read with
    :func:`read_regular`: no symlink is followed anywhere, only regular files of at most
    :data:`MAX_FILE_BYTES` are read. A file whose stamp ``seen`` holds is not read again."""
    try:
        dirfd = os.open(workspace, _DIR_FLAGS)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return {WORKSPACE: Found(refused=_why(exc, _is_link(str(workspace))))}
    found: dict[str, Found] = {}
    try:
        _scan_one(dirfd, MEMORY_FILE, MEMORY_FILE, seen, found)
        try:
            folder = open_no_symlinks(dirfd, MEMORY_DIR, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return found
        except OSError as exc:
            found[f"{MEMORY_DIR}/"] = Found(refused=_why(exc, _is_link(MEMORY_DIR, dirfd)))
            return found
        try:
            for name in sorted(os.listdir(folder)):
                if name.endswith(".md"):
                    _scan_one(folder, name, f"{MEMORY_DIR}/{name}", seen, found)
        finally:
            os.close(folder)
    finally:
        os.close(dirfd)
    return found


def _scan_one(
    dirfd: int, name: str, shown: str, seen: Mapping[str, Stamp], found: dict[str, Found]
) -> None:
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", name)
        if st.st_size > MAX_FILE_BYTES:
            raise TooLarge(errno.EFBIG, "too large", name)
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if seen.get(shown) == stamp:
            found[shown] = Found(stamp)
            return
        found[shown] = Found(stamp, read_regular(dirfd, name, MAX_FILE_BYTES))
    except FileNotFoundError:
        return  # removed meanwhile
    except OSError as exc:
        found[shown] = Found(refused=_why(exc))


def _is_link(path: str, dirfd: int | None = None) -> bool:
    """Is ``path`` a symlink? (A directory opened with ``O_NOFOLLOW | O_DIRECTORY`` through
    one fails with ``ENOTDIR`` as often as with ``ELOOP``.)"""
    try:
        return stat.S_ISLNK(os.stat(path, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _why(exc: OSError, link: bool = False) -> str:
    if link:
        return "a symlink"
    if isinstance(exc, TooLarge):
        return f"larger than {MAX_FILE_BYTES} bytes"
    if isinstance(exc, NotRegular):
        return "not a regular file"
    if exc.errno == errno.ELOOP:
        return "a symlink"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    if exc.errno == errno.EXDEV:
        return "leading outside the workspace"
    return f"unreadable ({exc.strerror or type(exc).__name__})"
