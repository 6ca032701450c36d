"""list_dir: the entries of a workspace directory, with their type and size."""

from __future__ import annotations

import os
import stat
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.wsfs import WorkspaceFS, in_workspace, os_error

MAX_ENTRIES = 500


def _entry_type(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def list_entries(
    fs: WorkspaceFS, rel: str, shown: str, max_entries: int
) -> tuple[list[dict[str, Any]], int]:
    """The first ``max_entries`` entries by name, and the total number of entries."""
    try:
        fd = fs.open_dir(rel, readable=True)
    except FileNotFoundError as exc:
        raise ToolError(f"Directory not found: {shown}") from exc
    except NotADirectoryError as exc:
        raise ToolError(f"{shown} is not a directory; use read") from exc
    except OSError as exc:
        raise os_error(exc, shown, "list") from exc
    try:
        with os.scandir(fd) as it:
            found = {entry.name: entry for entry in it}
        entries: list[dict[str, Any]] = []
        for name in sorted(found)[:max_entries]:
            try:
                # Relative to the directory's descriptor, never following a link.
                st = found[name].stat(follow_symlinks=False)
            except OSError:
                continue  # vanished meanwhile
            kind = _entry_type(st.st_mode)
            size = st.st_size if kind == "file" else None
            entries.append({"name": name, "type": kind, "size": size})
    except OSError as exc:
        raise os_error(exc, shown, "list") from exc
    finally:
        os.close(fd)
    return entries, len(found)


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
    groups: ClassVar[tuple[str, ...]] = ("fs", "fs_read")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        def run(fs: WorkspaceFS) -> tuple[str, list[dict[str, Any]], int]:
            rel = fs.rel(args.get("path", "."))
            shown = fs.shown(rel)
            return (shown, *list_entries(fs, rel, shown, MAX_ENTRIES))

        shown, shown_entries, total = await in_workspace(ctx, run)
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
