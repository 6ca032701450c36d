"""list_dir: the entries of a workspace directory, with their type and size."""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.workspace import display_path, resolve_in_workspace

MAX_ENTRIES = 500


def _entry_type(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def list_entries(path: str, shown: str, max_entries: int) -> tuple[list[dict[str, Any]], int]:
    """The first ``max_entries`` entries by name, and the total number of entries."""
    try:
        names = os.listdir(path)
    except FileNotFoundError as exc:
        raise ToolError(f"Directory not found: {shown}") from exc
    except NotADirectoryError as exc:
        raise ToolError(f"{shown} is not a directory; use read") from exc
    except PermissionError as exc:
        raise ToolError(f"Permission denied: {shown}") from exc
    except OSError as exc:
        raise ToolError(f"Cannot list {shown}: {exc.strerror or 'I/O error'}") from exc
    entries: list[dict[str, Any]] = []
    for name in sorted(names)[:max_entries]:
        try:
            st = os.lstat(os.path.join(path, name))  # never follow links out of the workspace
        except OSError:
            continue  # vanished meanwhile
        kind = _entry_type(st.st_mode)
        entries.append({"name": name, "type": kind, "size": st.st_size if kind == "file" else None})
    return entries, len(names)


def _format(entry: dict[str, Any]) -> str:
    if entry["type"] == "dir":
        return f"{entry['name']}/"
    if entry["type"] == "file":
        return f"{entry['name']}  ({entry['size']} bytes)"
    return f"{entry['name']}  ({entry['type']})"


class ListDirTool(Tool):
    name: ClassVar[str] = "list_dir"
    description: ClassVar[str] = (
        "List a directory of the workspace: entries sorted by name, with their type (file, "
        f"dir, symlink, other) and size in bytes for files. At most {MAX_ENTRIES} entries."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Directory path, relative to the workspace. Default '.'.",
            }
        },
        "additionalProperties": False,
    }
    group: ClassVar[str] = "fs"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, args.get("path", "."))
        shown = display_path(ctx.workspace, path)
        shown_entries, total = await asyncio.to_thread(list_entries, str(path), shown, MAX_ENTRIES)
        lines = [_format(e) for e in shown_entries]
        if not lines:
            lines.append("(empty directory)")
        if total > MAX_ENTRIES:
            lines.append(f"[{total - MAX_ENTRIES} more entries not shown; {total} in total]")
        return ToolOutput(
            content=f"{shown}:\n" + "\n".join(lines),
            details={
                "path": shown,
                "entries": shown_entries,
                "total": total,
                "truncated": total > MAX_ENTRIES,
            },
        )
