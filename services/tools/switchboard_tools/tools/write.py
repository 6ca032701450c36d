"""write: create, overwrite or append to a text file in the workspace."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.workspace import display_path, inherit_owner, resolve_in_workspace

MAX_WRITE_BYTES = 16 * 1024 * 1024


def _os_error(exc: OSError, shown: str) -> ToolError:
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{shown} is a directory")
    if isinstance(exc, NotADirectoryError):
        return ToolError(f"Cannot write {shown}: a parent is not a directory")
    if isinstance(exc, PermissionError):
        return ToolError(f"Permission denied: {shown}")
    return ToolError(f"Cannot write {shown}: {exc.strerror or 'I/O error'}")


def write_file(
    workspace: Path, path: Path, shown: str, data: bytes, append: bool
) -> dict[str, Any]:
    parent = path.parent
    created_dirs = [p for p in [parent, *parent.parents] if p.is_relative_to(workspace)]
    created_dirs = [p for p in created_dirs if not p.exists()]
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ToolError(f"Cannot write {shown}: a parent is not a directory") from exc
    except OSError as exc:
        raise _os_error(exc, shown) from exc
    # mkdir followed whatever existed at check time; re-check before writing.
    resolve_in_workspace(workspace, str(path))
    for directory in created_dirs:
        inherit_owner(workspace, directory)

    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if append else 0
    existed = path.exists()
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise _os_error(exc, shown) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{shown} is not a regular file")
        if not existed:
            inherit_owner(workspace, path, fd)
        f = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        if not append:
            f.truncate(0)
        f.write(data)
    return {"path": shown, "bytes_written": len(data), "append": append, "created": not existed}


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
    group: ClassVar[str] = "fs"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, args["path"])
        shown = display_path(ctx.workspace, path)
        if path == resolve_in_workspace(ctx.workspace, "."):
            raise ToolError("Cannot write the workspace root; give a file path")
        data = args["content"].encode("utf-8", errors="replace")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(
                f"Content is too large ({len(data)} bytes; at most {MAX_WRITE_BYTES} per write)"
            )
        append = bool(args.get("append", False))
        details = await asyncio.to_thread(write_file, ctx.workspace, path, shown, data, append)
        verb = "Appended" if append else "Wrote"
        return ToolOutput(content=f"{verb} {len(data)} bytes to {shown}", details=details)
