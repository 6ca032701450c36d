"""apply_patch: apply a unified diff to workspace files, all or nothing.

Every path is checked first (relative, no ``..``, resolving inside the workspace even through
symlinks) and every hunk of every file is verified in memory; only then are the new contents
written, each to a temporary file beside its target that is renamed over it (``os.replace``),
and deleted files removed. A patch that does not apply changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.hunks import apply_hunks
from switchboard_tools.patch import FilePatch, PatchError, parse_patch
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.tools.edit import read_for_edit
from switchboard_tools.tools.write import MAX_WRITE_BYTES
from switchboard_tools.workspace import display_path, inherit_owner, resolve_in_workspace

MAX_PATCH_CHARS = 4 * 1024 * 1024
MAX_FILES = 200
_LETTER = {"create": "A", "modify": "M", "delete": "D"}


@dataclass
class _Change:
    patch: FilePatch
    path: Path
    shown: str
    data: bytes | None  # None: delete the file
    original: os.stat_result | None
    offsets: list[int]


def _check_path(workspace: Path, raw: str) -> Path:
    if raw.strip() == "" or "\x00" in raw:
        raise PatchError(f"Refused: invalid path {raw!r} in the patch")
    if PurePosixPath(raw).is_absolute() or raw.startswith("~"):
        raise PatchError(f"Refused: {raw!r} is absolute; patch paths are workspace-relative")
    if ".." in PurePosixPath(raw).parts:
        raise PatchError(f"Refused: {raw!r} contains '..'; patch paths must stay in the workspace")
    path = resolve_in_workspace(workspace, raw)
    if path == resolve_in_workspace(workspace, "."):
        raise PatchError(f"Refused: {raw!r} is the workspace itself, not a file")
    return path


def _split(text: str) -> tuple[list[str], bool, bool]:
    """Lines without terminators, whether the file ends with one, whether it uses CRLF."""
    first = text.find("\n")
    crlf = first > 0 and text[first - 1] == "\r"
    lines = text.split("\r\n" if crlf else "\n")
    eol_at_end = lines[-1] == ""
    if eol_at_end:
        lines.pop()
    return lines, eol_at_end, crlf


def plan(workspace: Path, files: list[FilePatch]) -> list[_Change]:
    """Check every path and apply every hunk in memory; raises before anything is written."""
    if len(files) > MAX_FILES:
        raise PatchError(f"The patch touches {len(files)} files; at most {MAX_FILES} per call")
    changes: list[_Change] = []
    seen: set[Path] = set()
    for patch in files:
        if patch.action == "modify" and patch.old_path != patch.new_path:
            raise PatchError(
                f"Renames are not supported ({patch.old_path} -> {patch.new_path}): delete the "
                "old file and create the new one"
            )
        path = _check_path(workspace, patch.path)
        shown = display_path(workspace, path)
        if path in seen:
            raise PatchError(f"{shown} appears more than once in the patch; merge its hunks")
        seen.add(path)
        original: os.stat_result | None = None
        lines: list[str]
        if patch.action == "create":
            if os.path.lexists(path):
                raise PatchError(f"Cannot create {shown}: it already exists")
            lines, eol_at_end, crlf = [], True, False
        else:
            lines, eol_at_end, crlf = _split(read_for_edit(path, shown))
            original = os.stat(path)
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
        changes.append(_Change(patch, path, shown, data, original, applied.offsets))
    return changes


def _make_parents(workspace: Path, change: _Change) -> list[Path]:
    parent = change.path.parent
    missing = [p for p in [parent, *parent.parents] if p.is_relative_to(workspace)]
    missing = [p for p in reversed(missing) if not p.exists()]
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolError(f"Cannot create {change.shown}: a parent is not a directory") from exc
    for directory in missing:
        inherit_owner(workspace, directory)
    # mkdir followed whatever existed at check time; re-check before writing.
    resolve_in_workspace(workspace, str(change.path))
    return missing


def _write_temp(workspace: Path, change: _Change, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(dir=change.path.parent, prefix=f".{change.path.name}.", suffix="~")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        st = change.original
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st else 0o644)
        if st is None:
            inherit_owner(workspace, Path(tmp))
        elif os.geteuid() == 0:
            os.chown(tmp, st.st_uid, st.st_gid)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def commit(workspace: Path, changes: list[_Change]) -> None:
    """Write every new content to a temporary file, then rename them all over their targets
    and remove deleted files. A failure while preparing leaves nothing behind."""
    temps: list[tuple[str, _Change]] = []
    created: list[Path] = []
    try:
        for change in changes:
            if change.data is not None:
                created += _make_parents(workspace, change)
                temps.append((_write_temp(workspace, change, change.data), change))
    except BaseException as exc:
        for tmp, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                directory.rmdir()
        if isinstance(exc, OSError):
            raise ToolError(f"Nothing was changed: {exc.strerror or 'I/O error'}") from exc
        raise
    done: list[str] = []
    try:
        for tmp, change in temps:
            os.replace(tmp, change.path)
            done.append(change.shown)
        for change in changes:
            if change.data is None:
                os.unlink(change.path)
                done.append(change.shown)
    except OSError as exc:
        for tmp, _ in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
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


def apply_patch(workspace: Path, text: str) -> tuple[str, dict[str, Any]]:
    try:
        changes = plan(workspace, parse_patch(text))
    except ToolError as exc:
        raise type(exc)(f"{exc.message.rstrip('.')}. Nothing was changed.") from exc
    commit(workspace, changes)
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
    group: ClassVar[str] = "fs"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        content, details = await asyncio.to_thread(apply_patch, ctx.workspace, args["patch"])
        return ToolOutput(content=content, details=details)
