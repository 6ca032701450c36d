"""Workspaces: where a call's tools work, per agent or per session (``SB_WORKSPACE_SCOPE``).

``<root>/<agent>`` in scope ``agent`` (every session of the agent shares it);
``<root>/<agent>/sessions/<session dir>`` in scope ``session`` (:func:`session_dir_name`).
:func:`open_workspace` creates and opens it component by component without following symlinks;
the file tools then resolve every path beneath that descriptor (:mod:`switchboard_tools.wsfs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Literal

from switchboard.beneath import O_CLOEXEC, O_PATH
from switchboard.sessions import is_agent_id
from switchboard_tools.errors import ToolError

WorkspaceScope = Literal["agent", "session"]
SESSIONS_DIR = "sessions"
_SLUG_MAX = 40
_UNSAFE = re.compile(r"[^a-z0-9_-]+")
_NOFOLLOW_DIR = O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC


def session_dir_name(session_key: str) -> str:
    """A directory name for ``session_key``: a readable slug and a hash of the whole key (two
    keys with the same slug still differ). Never empty, ``.``-led or longer than 61 bytes."""
    slug = _UNSAFE.sub("-", session_key.lower()).strip("-")[:_SLUG_MAX].strip("-")
    digest = hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"{slug}-{digest}" if slug else digest


def open_workspace(root: Path, agent: str, session_key: str | None = None) -> tuple[Path, int]:
    """Create (if needed) and open the workspace of ``agent`` or, with ``session_key``, of
    that session: its path and an ``O_PATH`` descriptor the caller closes.

    Below ``root`` (the operator's, trusted) every directory is created with ``mkdirat`` and
    opened with ``O_NOFOLLOW`` relative to the one before: a symlink planted in place of one
    is refused. In session scope the directories above the session's are made searchable by
    others (``o+x``, not listable) so that the sandbox's dedicated uid can reach it."""
    if not isinstance(agent, str) or not is_agent_id(agent):
        raise ToolError(f"Invalid agent id {agent!r}: expected 1-64 characters of a-z 0-9 _ -")
    names = [agent]
    if session_key is not None:
        if not session_key:
            raise ToolError("This call has no session key; session workspaces need one")
        names += [SESSIONS_DIR, session_dir_name(session_key)]
    real_root = Path(os.path.realpath(root))
    real_root.mkdir(parents=True, exist_ok=True)  # like mkdir -p: the operator sets its mode
    fd = os.open(real_root, O_PATH | os.O_DIRECTORY | O_CLOEXEC)
    try:
        for depth, name in enumerate(names):
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
            try:
                child = os.open(
                    name, O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC, dir_fd=fd
                )
            except OSError as exc:
                raise ToolError(
                    f"Workspace for agent {agent!r} is not a directory inside the root"
                ) from exc
            os.close(fd)
            fd = child
            if depth < len(names) - 1:
                _searchable(fd)
    except BaseException:
        os.close(fd)
        raise
    return real_root.joinpath(*names), fd


def ensure_workspace(root: Path, agent: str, session_key: str | None = None) -> Path:
    """Create (if needed) and return the resolved workspace (see :func:`open_workspace`)."""
    path, fd = open_workspace(root, agent, session_key)
    os.close(fd)
    return path


def _searchable(fd: int) -> None:
    st = os.fstat(fd)
    if not st.st_mode & stat.S_IXOTH:
        # fchmod does not take an O_PATH descriptor; its /proc link is the same inode.
        with contextlib.suppress(FileNotFoundError):  # no /proc: exec says what is missing
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def resolve_in_workspace(workspace: Path, user_path: str) -> Path:
    """A name-based check that ``user_path`` resolves inside ``workspace`` (symlinks resolved,
    final components may be missing): the resolved path, or :class:`ToolError`.

    Advisory only (exec's argument check; the sandbox is what confines a command): the answer
    can be stale by the time anything opens the path. Never open the returned path; the file
    tools use :class:`switchboard_tools.wsfs.WorkspaceFS`."""
    if not isinstance(user_path, str):
        raise ToolError("Path must be a string")
    if "\x00" in user_path:
        raise ToolError("Path must not contain NUL bytes")
    if user_path.strip() == "":
        raise ToolError("Path must not be empty (use '.' for the workspace root)")
    root = Path(os.path.realpath(workspace))
    candidate = Path(user_path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = Path(os.path.realpath(candidate))
    except (OSError, ValueError) as exc:
        raise ToolError(f"Invalid path {user_path!r}") from exc
    if resolved != root and not resolved.is_relative_to(root):
        raise ToolError(f"Path {user_path!r} is outside the workspace")
    return resolved


def display_path(workspace: Path, resolved: Path) -> str:
    """The workspace-relative form of a resolved path, for messages shown to the model."""
    root = Path(os.path.realpath(workspace))
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        return str(resolved)
    text = rel.as_posix()
    return "." if text in ("", ".") else text
