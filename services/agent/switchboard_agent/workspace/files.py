"""The agent workspace's bootstrap files (docs/workspace.md): which ones a session gets,
read cheaply on every run, truncated for the prompt, and seeded from templates once.

Which files a run gets, by session kind and standing (:func:`files_for`, docs/trust.md):

- runs of the owner's standing in direct conversations (and the owner's own
  ``hook:``/``cron:``/API sessions): ``AGENTS.md``, ``SOUL.md``, ``TOOLS.md``, ``IDENTITY.md``,
  ``USER.md``, ``MEMORY.md``;
- group chats, and every run not of the owner's standing (a person who is not the owner):
  ``AGENTS.md``, ``SOUL.md``, ``TOOLS.md``, ``IDENTITY.md``: never ``USER.md`` (about the owner)
  or ``MEMORY.md`` (the owner's memory), which are private;
- sub-agents (``:sub:``): ``AGENTS.md`` and ``TOOLS.md`` only (no persona, nothing private);
- a heartbeat run also gets ``HEARTBEAT.md``.

Reading: the workspace directory (``<root>/<agent>``) is opened without following a symlink
and each file in it with :func:`switchboard.beneath.open_no_symlinks`: a symlink the agent's
own tools planted is never followed, not even one that stays inside (``AGENTS.md``, which
groups read, led to ``MEMORY.md``, which is the owner's alone: docs/trust.md).
Only regular files are read (a FIFO would block the run). Text is cached by (device, inode,
size, mtime): a run costs one ``stat`` per file while nothing changed. A file over
``max_chars`` keeps its first 70% and last 20% with a marker between (:func:`truncate`); a
huge file is read only where those parts come from.

Seeding: when a workspace holds none of the template files (a new agent), each is created with
``O_CREAT | O_EXCL`` (never over a file, nor through a symlink): see :mod:`.templates`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from switchboard import scheduling
from switchboard.beneath import O_CLOEXEC, open_no_symlinks
from switchboard.sessions import parse_session_key

from .templates import TEMPLATES

log = logging.getLogger(__name__)

MAX_FILE_CHARS = 20_000
SHARED = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md")
PRIVATE = ("USER.md", "MEMORY.md")  # the owner's: direct sessions only
SUBAGENT = ("AGENTS.md", "TOOLS.md")
WINDOW_BYTES_PER_CHAR = 4  # UTF-8: a character is at most 4 bytes
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC


def session_kind(session_key: str, chat_type: str = "") -> str:
    """``direct``, ``group``, ``sub``, ``hook``, ``cron`` or ``custom``; a message from a group
    chat counts as ``group`` whatever its key says."""
    kind = parse_session_key(session_key).kind
    return "group" if chat_type == "group" and kind != "sub" else kind


def files_for(kind: str, heartbeat: bool = False, private: bool = True) -> tuple[str, ...]:
    """The files of a run in a session of ``kind``; ``private``: may it read the owner's
    private files (:func:`switchboard.trust.private_files` of its standing)?"""
    if kind == "sub":
        return SUBAGENT
    names = SHARED if kind == "group" or not private else SHARED + PRIVATE
    return (*names, scheduling.HEARTBEAT_FILE) if heartbeat else names


def truncate(text: str, limit: int = MAX_FILE_CHARS, omitted: int | None = None) -> str:
    """``text`` if it fits ``limit``, else its first 70% and last 20% of ``limit`` characters
    with a marker saying how much is left out between them."""
    if len(text) <= limit and omitted is None:
        return text
    head, tail = int(limit * 0.7), int(limit * 0.2)
    left_out = len(text) - head - tail if omitted is None else omitted
    return (
        f"{text[:head]}\n\n[... {left_out} characters omitted: the file is longer than "
        f"{limit} characters; read it with the file tools ...]\n\n{text[-tail:] if tail else ''}"
    )


@dataclass(frozen=True)
class _Cached:
    key: tuple[int, int, int, int]  # device, inode, size, mtime_ns
    text: str | None  # None: refused (outside the workspace, not a regular file)


class WorkspaceFiles:
    def __init__(self, root: Path, max_chars: int = MAX_FILE_CHARS, seed: bool = True) -> None:
        self.root = root
        self.max_chars = max_chars
        self.seed = seed
        self._cache: dict[Path, _Cached] = {}
        self._seeded: set[str] = set()

    def load(self, agent: str, names: tuple[str, ...]) -> list[tuple[str, str]]:
        """``(name, text)`` of each of ``names`` the agent's workspace has, truncated."""
        if self.seed and agent not in self._seeded:
            self._seed(agent)
        try:
            dirfd = os.open(self.root / agent, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                log.warning("the workspace of %s cannot be opened (%s)", agent, exc.strerror)
            return []
        try:
            found = []
            for name in names:
                text = self._read(dirfd, self.root / agent / name, name)
                if text is not None:
                    found.append((name, text))
            return found
        finally:
            os.close(dirfd)

    def _read(self, dirfd: int, path: Path, name: str) -> str | None:
        try:
            st = os.stat(name, dir_fd=dirfd)
        except OSError:
            self._cache.pop(path, None)
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached.key == key:
            return cached.text
        text = self._open_and_read(dirfd, name)
        self._cache[path] = _Cached(key, text)  # a refusal too: logged once, not every run
        return text

    def _open_and_read(self, dirfd: int, name: str) -> str | None:
        try:
            fd = open_no_symlinks(dirfd, name, os.O_RDONLY | os.O_NONBLOCK | O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                log.warning("%s is a symbolic link: not loaded", name)
            elif exc.errno == errno.EXDEV:
                log.warning("%s leads outside the workspace: not loaded", name)
            elif exc.errno != errno.ENOENT:
                log.warning("%s cannot be read (%s): not loaded", name, exc.strerror)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                log.warning("%s is not a regular file: not loaded", name)
                return None
            return truncate_file(fd, st.st_size, self.max_chars)
        finally:
            os.close(fd)

    def _seed(self, agent: str) -> None:
        """Write the templates into a workspace that has none of them (a new agent)."""
        self._seeded.add(agent)
        workspace = self.root / agent
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(workspace, 0o700)
            dirfd = os.open(workspace, _DIR_FLAGS)
        except OSError as exc:
            log.warning("the workspace of %s cannot be created (%s)", agent, exc.strerror)
            return
        try:
            present = set(os.listdir(dirfd))
            if present & TEMPLATES.keys():
                return
            for name, text in TEMPLATES.items():
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | O_CLOEXEC
                try:
                    fd = os.open(name, flags, 0o644, dir_fd=dirfd)
                except FileExistsError:
                    continue  # someone wrote it meanwhile: theirs wins
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
            log.info("seeded the workspace of %s with its bootstrap files", agent)
        except OSError as exc:
            log.warning("the workspace of %s cannot be seeded (%s)", agent, exc.strerror)
        finally:
            os.close(dirfd)


def truncate_file(fd: int, size: int, limit: int) -> str:
    """The text of the open file ``fd`` of ``size`` bytes, truncated to ``limit`` characters.
    A file whose bytes cannot all fit is read only in its head and tail windows."""
    window = limit * WINDOW_BYTES_PER_CHAR
    if size <= 2 * window:
        return truncate(_read_all(fd, size).decode("utf-8", errors="replace"), limit)
    head = os.pread(fd, window, 0).decode("utf-8", errors="replace")
    tail = os.pread(fd, window, size - window).decode("utf-8", errors="replace")
    keep_head, keep_tail = head[: int(limit * 0.7)], tail[len(tail) - int(limit * 0.2) :]
    omitted = size - len(keep_head.encode()) - len(keep_tail.encode())  # about: bytes
    return truncate(keep_head + keep_tail, limit, omitted=omitted)


def _read_all(fd: int, size: int) -> bytes:
    chunks, total = [], 0
    while total < size:
        chunk = os.read(fd, size - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)
