"""write: create, overwrite or append to a text file in the workspace."""

from __future__ import annotations

import os
import posixpath
import stat
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.wsfs import WorkspaceFS, in_workspace, os_error

MAX_WRITE_BYTES = 16 * 1024 * 1024


def _os_error(exc: OSError, shown: str) -> ToolError:
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{shown} is a directory")
    if isinstance(exc, NotADirectoryError):
        return ToolError(f"Cannot write {shown}: a parent is not a directory")
    return os_error(exc, shown, "write")


def _open_for_write(fs: WorkspaceFS, rel: str, append: bool) -> tuple[int, bool]:
    """A descriptor to write ``rel`` (created if missing) and whether it was created."""
    flags = os.O_WRONLY | os.O_NONBLOCK | (os.O_APPEND if append else 0)
    try:
        return fs.open(rel, flags), False
    except FileNotFoundError:
        pass
    return fs.open(rel, flags | os.O_CREAT, 0o644), True


def write_file(fs: WorkspaceFS, rel: str, shown: str, data: bytes, append: bool) -> dict[str, Any]:
    """Write ``data`` to ``rel``, creating missing parent directories; every step beneath the
    workspace descriptor."""
    if posixpath.normpath(rel) == ".":
        raise ToolError("Cannot write the workspace root; give a file path")
    parent = posixpath.dirname(rel.rstrip("/")) or "."
    try:
        os.close(fs.make_dirs(parent)[0])
        fd, created = _open_for_write(fs, rel, append)
    except OSError as exc:
        raise _os_error(exc, shown) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{shown} is not a regular file")
        if created:
            fs.give(fs.fd, fd=fd)
        f = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        if not append:
            f.truncate(0)
        f.write(data)
    return {"path": shown, "bytes_written": len(data), "append": append, "created": created}


class WriteTool(Tool):
    name: ClassVar[str] = "write"
    description: ClassVar[str] = (
        "Write a UTF-8 text file in the workspace: creates it (and missing parent directories) "
        "or replaces its content; with append=true, adds to the end instead."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File path, relative to the workspace.",
            },
            "content": {"type": "string", "description": "Text to write."},
            "append": {
                "type": "boolean",
                "description": "Append instead of replacing. Default false.",
            },
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("fs", "fs_write")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        data = args["content"].encode("utf-8", errors="replace")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(
                f"Content is too large ({len(data)} bytes; at most {MAX_WRITE_BYTES} per write)"
            )
        append = bool(args.get("append", False))

        def run(fs: WorkspaceFS) -> dict[str, Any]:
            rel = fs.rel(args["path"])
            return write_file(fs, rel, fs.shown(rel), data, append)

        details = await in_workspace(ctx, run)
        verb = "Appended" if append else "Wrote"
        return ToolOutput(content=f"{verb} {len(data)} bytes to {details['path']}", details=details)
