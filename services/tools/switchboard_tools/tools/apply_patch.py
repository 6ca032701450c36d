"""apply_patch: apply a unified diff to workspace files, all or nothing.

Every path is checked first (relative, no ``..``, inside the workspace even through symlinks:
each is resolved once, beneath the workspace descriptor, to its parent directory's descriptor)
and every hunk of every file is verified in memory; only then are the new contents written,
each to a temporary file beside its target that is renamed over it (``renameat`` on the same
directory descriptor), and deleted files removed (``unlinkat``). A patch that does not apply
changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import stat
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, ClassVar

from switchboard.beneath import O_CLOEXEC
from switchboard_tools.errors import ToolError
from switchboard_tools.hunks import apply_hunks
from switchboard_tools.patch import FilePatch, PatchError, parse_patch
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.tools.edit import read_fd_for_edit
from switchboard_tools.tools.write import MAX_WRITE_BYTES
from switchboard_tools.wsfs import WorkspaceFS, in_workspace, os_error

MAX_PATCH_CHARS = 4 * 1024 * 1024
MAX_FILES = 200
_LETTER = {"create": "A", "modify": "M", "delete": "D"}
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | O_CLOEXEC
_TEMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | O_CLOEXEC


@dataclass
class _Change:
    patch: FilePatch
    rel: str
    shown: str
    data: bytes | None  # None: delete the file
    original: os.stat_result | None
    offsets: list[int]
    dirfd: int | None  # the parent directory (None: to be created at commit)
    name: str


def _check_path(raw: str) -> str:
    if raw.strip() == "" or "\x00" in raw:
        raise PatchError(f"Refused: invalid path {raw!r} in the patch")
    if PurePosixPath(raw).is_absolute() or raw.startswith("~"):
        raise PatchError(f"Refused: {raw!r} is absolute; patch paths are workspace-relative")
    if ".." in PurePosixPath(raw).parts:
        raise PatchError(f"Refused: {raw!r} contains '..'; patch paths must stay in the workspace")
    rel = posixpath.normpath(raw)
    if rel == ".":
        raise PatchError(f"Refused: {raw!r} is the workspace itself, not a file")
    return rel


def _split(text: str) -> tuple[list[str], bool, bool]:
    """Lines without terminators, whether the file ends with one, whether it uses CRLF."""
    first = text.find("\n")
    crlf = first > 0 and text[first - 1] == "\r"
    lines = text.split("\r\n" if crlf else "\n")
    eol_at_end = lines[-1] == ""
    if eol_at_end:
        lines.pop()
    return lines, eol_at_end, crlf


def _locate(fs: WorkspaceFS, rel: str, shown: str, create: bool) -> tuple[int | None, str]:
    """The parent directory descriptor and name of ``rel`` (a final symlink followed beneath
    the workspace); ``None`` for a file to create whose parent does not exist yet."""
    try:
        return fs.entry(rel)
    except FileNotFoundError as exc:
        if create:
            return None, posixpath.basename(rel)
        raise ToolError(f"File not found: {shown}") from exc
    except OSError as exc:
        raise os_error(exc, shown, "create" if create else "read") from exc


def _read(dirfd: int, name: str, shown: str) -> tuple[str, os.stat_result]:
    try:
        fd = os.open(name, _READ, dir_fd=dirfd)
    except OSError as exc:
        raise os_error(exc, shown, "read") from exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolError(f"{shown} is not a regular file")
    return read_fd_for_edit(fd, shown), st


def plan(fs: WorkspaceFS, files: list[FilePatch], fds: contextlib.ExitStack) -> list[_Change]:
    """Check every path and apply every hunk in memory; raises before anything is written.
    The parent directories' descriptors are kept (closed by ``fds``) for :func:`commit`."""
    if len(files) > MAX_FILES:
        raise PatchError(f"The patch touches {len(files)} files; at most {MAX_FILES} per call")
    changes: list[_Change] = []
    seen: set[object] = set()
    for patch in files:
        if patch.action == "modify" and patch.old_path != patch.new_path:
            raise PatchError(
                f"Renames are not supported ({patch.old_path} -> {patch.new_path}): delete the "
                "old file and create the new one"
            )
        rel = _check_path(patch.path)
        shown = fs.shown(rel)
        dirfd, name = _locate(fs, rel, shown, patch.action == "create")
        if dirfd is not None:
            fds.callback(os.close, dirfd)
            st_dir = os.fstat(dirfd)
            key: object = (st_dir.st_dev, st_dir.st_ino, name)
        else:
            key = rel
        if key in seen:
            raise PatchError(f"{shown} appears more than once in the patch; merge its hunks")
        seen.add(key)
        original: os.stat_result | None = None
        lines: list[str]
        if patch.action == "create":
            if dirfd is not None and _exists(dirfd, name):
                raise PatchError(f"Cannot create {shown}: it already exists")
            lines, eol_at_end, crlf = [], True, False
        else:
            assert dirfd is not None
            text, original = _read(dirfd, name, shown)
            lines, eol_at_end, crlf = _split(text)
        applied = apply_hunks(lines, eol_at_end, patch, crlf=crlf)
        data: bytes | None = None
        if patch.action == "delete":
            if applied.lines:
                raise PatchError(
                    f"Cannot delete {shown}: the patch removes {patch.removed} of its "
                    f"{len(lines)} lines; a deletion must remove the whole file"
                )
        else:
            eol = "\r\n" if crlf else "\n"
            end = eol if applied.eol_at_end and applied.lines else ""
            data = (eol.join(applied.lines) + end).encode("utf-8")
            if len(data) > MAX_WRITE_BYTES:
                raise PatchError(f"The patched {shown} would be too large ({len(data)} bytes)")
        changes.append(_Change(patch, rel, shown, data, original, applied.offsets, dirfd, name))
    return changes


def _exists(dirfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _make_parent(fs: WorkspaceFS, change: _Change, fds: contextlib.ExitStack) -> list[str]:
    """Create the missing parents of a new file; the directories created."""
    try:
        dirfd, created = fs.make_dirs(posixpath.dirname(change.rel) or ".")
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolError(f"Cannot create {change.shown}: a parent is not a directory") from exc
    fds.callback(os.close, dirfd)
    change.dirfd = dirfd
    return created


def _write_temp(fs: WorkspaceFS, change: _Change, dirfd: int, data: bytes) -> str:
    tmp = f".{change.name}.{secrets.token_hex(4)}~"
    fd = os.open(tmp, _TEMP, 0o600, dir_fd=dirfd)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
        st = change.original
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st else 0o644)
        if st is None:
            fs.give(dirfd, fd=fd)
        elif os.geteuid() == 0:
            os.fchown(fd, st.st_uid, st.st_gid)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dirfd)
        raise
    finally:
        os.close(fd)
    return tmp


def commit(fs: WorkspaceFS, changes: list[_Change], fds: contextlib.ExitStack) -> None:
    """Write every new content to a temporary file, then rename them all over their targets
    and remove deleted files. A failure while preparing leaves nothing behind."""
    temps: list[tuple[str, int, _Change]] = []
    created: list[str] = []
    try:
        for change in changes:
            if change.data is not None:
                if change.dirfd is None:
                    created += _make_parent(fs, change, fds)
                assert change.dirfd is not None
                tmp = _write_temp(fs, change, change.dirfd, change.data)
                temps.append((tmp, change.dirfd, change))
    except BaseException as exc:
        for tmp, dirfd, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dirfd)
        fs.remove_dirs(created)
        if isinstance(exc, OSError):
            raise ToolError(f"Nothing was changed: {exc.strerror or 'I/O error'}") from exc
        raise
    done: list[str] = []
    try:
        for tmp, dirfd, change in temps:
            os.replace(tmp, change.name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            done.append(change.shown)
        for change in changes:
            if change.data is None and change.dirfd is not None:
                os.unlink(change.name, dir_fd=change.dirfd)
                done.append(change.shown)
    except OSError as exc:
        for tmp, dirfd, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dirfd)
        applied = ", ".join(done) or "none"
        raise ToolError(
            f"Writing failed part-way ({exc.strerror or 'I/O error'}); files already "
            f"changed: {applied}"
        ) from exc


def summarise(changes: list[_Change]) -> tuple[str, dict[str, Any]]:
    added = sum(c.patch.added for c in changes)
    removed = sum(c.patch.removed for c in changes)
    noun = "file" if len(changes) == 1 else "files"
    lines = [f"Applied patch: {len(changes)} {noun} changed, +{added} -{removed}"]
    files: list[dict[str, Any]] = []
    for c in changes:
        moved = [f"hunk {i + 1} at offset {o:+d}" for i, o in enumerate(c.offsets) if o]
        note = f" ({', '.join(moved)})" if moved else ""
        lines.append(
            f"{_LETTER[c.patch.action]} {c.shown} +{c.patch.added} -{c.patch.removed}{note}"
        )
        files.append(
            {
                "path": c.shown,
                "action": c.patch.action,
                "added": c.patch.added,
                "removed": c.patch.removed,
                "hunks": len(c.patch.hunks),
                "offsets": c.offsets,
            }
        )
    return "\n".join(lines), {"files": files, "added": added, "removed": removed}


def apply_patch(fs: WorkspaceFS, text: str) -> tuple[str, dict[str, Any]]:
    with contextlib.ExitStack() as fds:
        try:
            changes = plan(fs, parse_patch(text), fds)
        except ToolError as exc:
            raise type(exc)(f"{exc.message.rstrip('.')}. Nothing was changed.") from exc
        commit(fs, changes, fds)
    return summarise(changes)


class ApplyPatchTool(Tool):
    name: ClassVar[str] = "apply_patch"
    description: ClassVar[str] = (
        "Apply a unified diff (git diff format: '--- a/<path>', '+++ b/<path>', '@@ -l,n +l,n "
        "@@' hunks) to workspace files. Several files and hunks per patch; create a file with "
        "'--- /dev/null', delete one with '+++ /dev/null'. Context and removed lines must "
        "match exactly, but hunks may have moved. All hunks of all files are checked first: "
        "if any does not apply, nothing is changed and the error names the file and hunk."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "patch": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATCH_CHARS,
                "description": "The unified diff; paths relative to the workspace.",
            },
        },
        "required": ["patch"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("fs", "fs_write")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        content, details = await in_workspace(ctx, lambda fs: apply_patch(fs, args["patch"]))
        return ToolOutput(content=content, details=details)
