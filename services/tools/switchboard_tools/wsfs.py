"""The file tools' only way to the filesystem: a workspace directory descriptor, and every path
opened beneath it (:func:`switchboard_tools.beneath.open_beneath`).

A path from the model is checked lexically once (:meth:`WorkspaceFS.rel`: relative, or absolute
under the workspace's own path), then never resolved by name again: opens, ``mkdir``,
``unlink``, ``rename`` and listings all take a directory descriptor obtained beneath the
workspace descriptor. A process racing the tools (swapping a directory for a symlink) can at
most redirect a call to another place inside the workspace.

Errors shown to the model name workspace-relative paths only (:func:`os_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import posixpath
import stat
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar

from switchboard.beneath import O_CLOEXEC, O_PATH, open_beneath
from switchboard_tools.errors import ToolError
from switchboard_tools.registry import ToolContext

T = TypeVar("T")
_DIR_FLAGS = O_PATH | os.O_DIRECTORY


def outside(user_path: str) -> ToolError:
    return ToolError(
        f"Path {user_path!r} is outside the workspace (through '..', an absolute path or a "
        "symlink leading out; symlinks must be relative and stay inside)"
    )


def os_error(exc: OSError, shown: str, action: str = "access") -> ToolError:
    """A message for the model about ``exc`` on ``shown`` (a workspace-relative path): never the
    exception's own text, which carries absolute paths."""
    code = exc.errno
    if code == errno.EXDEV:
        return outside(shown)
    if code == errno.ENOENT:
        return ToolError(f"File not found: {shown}")
    if code == errno.EISDIR:
        return ToolError(f"{shown} is a directory")
    if code == errno.ENOTDIR:
        return ToolError(f"Cannot {action} {shown}: a parent is not a directory")
    if code in (errno.EACCES, errno.EPERM):
        return ToolError(f"Permission denied: {shown}")
    if code == errno.ELOOP:
        return ToolError(f"Cannot {action} {shown}: too many levels of symbolic links")
    reason = os.strerror(code) if code else "I/O error"
    return ToolError(f"Cannot {action} {shown}: {reason}")


class WorkspaceFS:
    """An open workspace. Use as a context manager (or :meth:`close`)."""

    def __init__(self, workspace: Path, fd: int | None = None) -> None:
        """``fd``: a descriptor of ``workspace`` to take over; ``None``: open ``workspace``."""
        self.path = workspace
        self.fd = fd if fd is not None else os.open(workspace, _DIR_FLAGS | O_CLOEXEC)
        self._owner: tuple[int, int] | bool | None = False

    @classmethod
    def of(cls, ctx: ToolContext) -> WorkspaceFS:
        """The call's workspace: a duplicate of the descriptor the executor opened for it
        (:func:`switchboard_tools.workspace.open_workspace`), or ``ctx.workspace`` opened."""
        if ctx.workspace_fd is not None:
            return cls(ctx.workspace, os.dup(ctx.workspace_fd))
        return cls(ctx.workspace)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> WorkspaceFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths --------------------------------------------------------------------------------

    def rel(self, user_path: str) -> str:
        """``user_path`` as a normalised path relative to the workspace (``.`` for the root).

        Checked only lexically: ``..`` is applied to the path as written (``a/../b`` is
        ``b``) and may not climb above the workspace; an absolute path must be under the
        workspace's own path. Where the rest leads (symlinks) is for the kernel to say when it
        is opened."""
        if not isinstance(user_path, str):
            raise ToolError("Path must be a string")
        if "\x00" in user_path:
            raise ToolError("Path must not contain NUL bytes")
        if user_path.strip() == "":
            raise ToolError("Path must not be empty (use '.' for the workspace root)")
        path = PurePosixPath(user_path)
        if path.is_absolute():
            for root in (str(self.path), os.path.realpath(self.path)):
                if path == PurePosixPath(root) or path.is_relative_to(root):
                    path = path.relative_to(root)
                    break
            else:
                raise outside(user_path)
        rel = posixpath.normpath(str(path))
        if rel == ".." or rel.startswith("../"):
            raise outside(user_path)
        return rel

    @staticmethod
    def shown(rel: str) -> str:
        """How ``rel`` (from :meth:`rel`) is named to the model: relative, never absolute."""
        return rel

    # -- opening ------------------------------------------------------------------------------

    def open(self, rel: str, flags: int, mode: int = 0o644) -> int:
        """Open ``rel`` beneath the workspace (``OSError`` as the kernel says; ``EXDEV``: it
        leads outside)."""
        return open_beneath(self.fd, rel, flags, mode)

    def open_dir(self, rel: str, readable: bool = False) -> int:
        """A directory descriptor (``O_PATH`` unless ``readable``, which listing needs)."""
        flags = os.O_RDONLY | os.O_DIRECTORY if readable else _DIR_FLAGS
        return self.open(rel, flags)

    def entry(self, rel: str) -> tuple[int, str]:
        """``(parent directory descriptor, name)`` of what ``rel`` names, with a final symlink
        followed (beneath the workspace) to the entry it leads to: the caller renames or unlinks
        ``name`` relative to the descriptor (and closes it). ``ENOENT`` when a parent is
        missing; the entry itself may be missing."""
        for _ in range(40):
            parent, name = posixpath.split(rel.rstrip("/"))
            if name in ("", ".", ".."):
                raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), rel)
            fd = self.open_dir(parent or ".")
            try:
                target = _symlink_target(fd, name)
            except BaseException:
                os.close(fd)
                raise
            if target is None:
                return fd, name
            os.close(fd)
            if target.startswith("/"):
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), rel)
            # Resolved from the root again: ``parent`` is walked by the kernel (a '..' in the
            # target goes up from where the link physically is).
            rel = posixpath.join(parent, target) if parent else target
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)

    def make_dirs(self, rel: str) -> tuple[int, list[str]]:
        """An ``O_PATH`` descriptor of directory ``rel``, creating what is missing (each
        ``mkdir`` relative to its parent's descriptor); the relative paths created, parents
        first."""
        try:
            return self.open_dir(rel), []
        except FileNotFoundError:
            pass
        parent, name = posixpath.split(rel.rstrip("/"))
        if name in ("", ".", ".."):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), rel)
        pfd, created = self.make_dirs(parent or ".")
        try:
            with contextlib.suppress(FileExistsError):  # created concurrently: fine
                os.mkdir(name, 0o755, dir_fd=pfd)
                created.append(rel)
                self.give(pfd, name)
            return self.open_dir(rel), created
        finally:
            os.close(pfd)

    def remove_dirs(self, created: list[str]) -> None:
        """Undo :meth:`make_dirs`: remove the (empty) directories it created, children first."""
        for rel in reversed(created):
            with contextlib.suppress(OSError):
                parent = self.open_dir(posixpath.dirname(rel) or ".")
                try:
                    os.rmdir(posixpath.basename(rel), dir_fd=parent)
                finally:
                    os.close(parent)

    # -- ownership ----------------------------------------------------------------------------

    def give(self, dirfd: int, name: str | None = None, fd: int | None = None) -> None:
        """Give a new entry (``name`` in ``dirfd``, or the open ``fd``) the workspace's owner.

        When the executor runs as root, sandboxed commands run as a dedicated uid that owns the
        workspace; what the executor's tools create is handed to it. A no-op when not root or
        when the workspace is root's."""
        if self._owner is False:
            st = os.fstat(self.fd)
            self._owner = (st.st_uid, st.st_gid) if os.geteuid() == 0 and st.st_uid else None
        if not isinstance(self._owner, tuple):
            return
        uid, gid = self._owner
        if fd is not None:
            os.fchown(fd, uid, gid)
        elif name is not None:
            os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)


def _symlink_target(dirfd: int, name: str) -> str | None:
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISLNK(st.st_mode):
        return None
    return os.readlink(name, dir_fd=dirfd)


async def in_workspace(ctx: ToolContext, fn: Callable[[WorkspaceFS], T]) -> T:
    """Run ``fn(fs)`` in a worker thread with the call's workspace open, closed when ``fn``
    returns (also when the call's deadline abandoned the thread meanwhile: the descriptor is
    the thread's own)."""
    fs = WorkspaceFS.of(ctx)
    lock = threading.Lock()
    owner: list[str] = []

    def claim(who: str) -> bool:
        with lock:
            if owner:
                return False
            owner.append(who)
            return True

    def job() -> T:
        if not claim("thread"):
            raise asyncio.CancelledError  # the call was cancelled before this thread started
        with fs:
            return fn(fs)

    try:
        return await asyncio.to_thread(job)
    finally:
        if claim("caller"):  # the job never started
            fs.close()
