"""Workspace confinement: every path a tool touches must resolve inside the agent's workspace."""

from __future__ import annotations

import os
from pathlib import Path

from switchboard.sessions import is_agent_id
from switchboard_tools.errors import ToolError


def _realpath(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def resolve_in_workspace(workspace: Path, user_path: str) -> Path:
    """Resolve ``user_path`` (relative to ``workspace``, or absolute inside it) to a real path.

    Symlinks are resolved (non-strict: the final components may not exist yet) and the result
    must stay inside the resolved workspace root, otherwise :class:`ToolError` is raised. This
    covers ``..`` traversal, absolute paths elsewhere and symlinks planted inside the workspace
    that point outside. It is a check at resolution time: a stronger sandbox (mount namespace,
    landlock) is what closes the remaining time-of-check/time-of-use window.
    """
    if not isinstance(user_path, str):
        raise ToolError("Path must be a string")
    if "\x00" in user_path:
        raise ToolError("Path must not contain NUL bytes")
    if user_path.strip() == "":
        raise ToolError("Path must not be empty (use '.' for the workspace root)")
    root = _realpath(workspace)
    candidate = Path(user_path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = _realpath(candidate)
    except (OSError, ValueError) as exc:
        raise ToolError(f"Invalid path {user_path!r}") from exc
    if resolved != root and not resolved.is_relative_to(root):
        raise ToolError(f"Path {user_path!r} is outside the workspace")
    return resolved


def display_path(workspace: Path, resolved: Path) -> str:
    """The workspace-relative form of a resolved path, for messages shown to the model."""
    root = _realpath(workspace)
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        return str(resolved)
    text = rel.as_posix()
    return "." if text in ("", ".") else text


def ensure_workspace(root: Path, agent: str) -> Path:
    """Create (if needed) and return the resolved workspace ``root/<agent>``."""
    if not isinstance(agent, str) or not is_agent_id(agent):
        raise ToolError(f"Invalid agent id {agent!r}: expected 1-64 characters of a-z 0-9 _ -")
    real_root = _realpath(root)
    workspace = real_root / agent
    try:
        workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ToolError(f"Workspace for agent {agent!r} exists and is not a directory") from exc
    resolved = _realpath(workspace)
    if resolved != workspace or not resolved.is_dir():
        # ``root/<agent>`` is a symlink (or something else) leading elsewhere.
        raise ToolError(f"Workspace for agent {agent!r} is not a directory inside the root")
    return resolved


def inherit_owner(workspace: Path, path: Path, fd: int | None = None) -> None:
    """Give ``path`` (or the open ``fd``) the owner of the workspace.

    When the executor runs as root, sandboxed commands run as a dedicated uid that owns the
    workspace; files the executor's own tools create are handed to it so those commands can
    modify them. A no-op when not root or when the workspace is root's.
    """
    if os.geteuid() != 0:
        return
    st = os.stat(workspace)
    if st.st_uid == 0:
        return
    if fd is not None:
        os.fchown(fd, st.st_uid, st.st_gid)
    else:
        os.lchown(path, st.st_uid, st.st_gid)
