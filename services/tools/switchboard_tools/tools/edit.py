"""edit: replace one exact occurrence of a text in a workspace file."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.tools.read import open_regular
from switchboard_tools.tools.write import MAX_WRITE_BYTES, write_file
from switchboard_tools.wsfs import WorkspaceFS, in_workspace


def read_fd_for_edit(fd: int, shown: str) -> str:
    """The whole file open on ``fd`` as UTF-8 (closes ``fd``)."""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > MAX_WRITE_BYTES:
            raise ToolError(f"{shown} is too large to edit ({st.st_size} bytes)")
        raw = f.read(MAX_WRITE_BYTES + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not a UTF-8 text file") from exc


def read_for_edit(fs: WorkspaceFS, rel: str, shown: str) -> str:
    """The whole regular file ``rel`` as UTF-8."""
    return read_fd_for_edit(open_regular(fs, rel, shown), shown)


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def edit_file(fs: WorkspaceFS, rel: str, shown: str, old: str, new: str) -> dict[str, Any]:
    text = read_for_edit(fs, rel, shown)
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {shown}; nothing changed. It must match exactly, "
            "including whitespace and indentation (read the file first)."
        )
    if count > 1:
        lines: list[int] = []
        start = 0
        while (index := text.find(old, start)) != -1 and len(lines) < 10:
            lines.append(_line_of(text, index))
            start = index + 1
        raise ToolError(
            f"old_text occurs {count} times in {shown} (lines {', '.join(map(str, lines))}); "
            "nothing changed. Include more surrounding text so it matches exactly once."
        )
    index = text.index(old)
    updated = text[:index] + new + text[index + len(old) :]
    data = updated.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(f"The edited file would be too large ({len(data)} bytes)")
    write_file(fs, rel, shown, data, append=False)
    return {"path": shown, "line": _line_of(text, index), "bytes": len(data)}


class EditTool(Tool):
    name: ClassVar[str] = "edit"
    description: ClassVar[str] = (
        "Replace one exact occurrence of old_text with new_text in a workspace text file. "
        "old_text must match exactly once (whitespace included); otherwise nothing changes "
        "and the error says how many matches there were."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "File, workspace-relative."},
            "old_text": {"type": "string", "minLength": 1, "description": "Exact text to find."},
            "new_text": {"type": "string", "description": "Replacement text."},
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("fs", "fs_write")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        def run(fs: WorkspaceFS) -> dict[str, Any]:
            rel = fs.rel(args["path"])
            return edit_file(fs, rel, fs.shown(rel), args["old_text"], args["new_text"])

        details = await in_workspace(ctx, run)
        return ToolOutput(
            content=f"Edited {details['path']} at line {details['line']}", details=details
        )
