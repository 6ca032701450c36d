"""read: a text file from the workspace, optionally a window of lines."""

from __future__ import annotations

import codecs
import os
import stat
from typing import IO, Any, ClassVar

from switchboard_tools.errors import ArgumentError, ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.wsfs import WorkspaceFS, in_workspace, os_error

MAX_READ_BYTES = 256 * 1024
_SNIFF_BYTES = 8192
_MAX_LINES = 1_000_000
_TEXT_CONTROLS = "\t\n\r\f\b\x1b\v"


def _read_line(f: IO[bytes], keep: int) -> tuple[bytes, bool] | None:
    """The next line (at most ``keep`` bytes of it kept) and whether all of it was kept;
    ``None`` at end of file. The rest of an over-long line is consumed and dropped."""
    raw = f.readline(keep + 1)
    if not raw:
        return None
    if len(raw) <= keep:
        return raw, True
    kept = raw[:keep]
    tail = raw[keep:]
    while not tail.endswith(b"\n"):
        tail = f.readline(64 * 1024)
        if not tail:
            break
    return kept, False


def _decode(raw: bytes, final: bool) -> str:
    # Not final for a line cut at the byte cap: an incomplete trailing character is dropped.
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(raw, final=final)


def looks_binary(sample: bytes) -> bool:
    """NUL bytes, or mostly undecodable bytes / control characters."""
    if b"\x00" in sample:
        return True
    if not sample:
        return False
    text = _decode(sample, final=False)
    bad = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch not in _TEXT_CONTROLS))
    return bad > max(1, len(text) // 10)


def open_regular(fs: WorkspaceFS, rel: str, shown: str) -> int:
    """A descriptor of the regular file ``rel`` (beneath the workspace, never blocking on a
    FIFO), or :class:`ToolError`."""
    try:
        fd = fs.open(rel, os.O_RDONLY | os.O_NONBLOCK)
    except IsADirectoryError as exc:
        raise ToolError(f"{shown} is a directory; use list_dir") from exc
    except OSError as exc:
        raise os_error(exc, shown, "read") from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{shown} is a directory; use list_dir")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{shown} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text(
    fs: WorkspaceFS, rel: str, shown: str, offset: int, limit: int | None
) -> tuple[str, dict[str, Any]]:
    fd = open_regular(fs, rel, shown)
    st = os.fstat(fd)
    with os.fdopen(fd, "rb") as f:
        if looks_binary(f.read(_SNIFF_BYTES)):
            raise ToolError(f"{shown} is a binary file; read only works on text files")
        f.seek(0)

        parts: list[str] = []
        used = 0
        line_no = 0
        last_shown = offset - 1
        cut_reason: str | None = None
        while True:
            item = _read_line(f, MAX_READ_BYTES)
            if item is None:
                break
            raw, complete = item
            line_no += 1
            if line_no < offset:
                continue
            if limit is not None and line_no >= offset + limit:
                cut_reason = "limit"
                break
            if used + len(raw) > MAX_READ_BYTES:
                cut_reason = "size"
                break
            # A single over-long line comes back cut at the cap (complete=False).
            parts.append(_decode(raw, final=complete))
            used += len(raw)
            last_shown = line_no
            if not complete:
                cut_reason = "size"
                break

    if line_no < offset and offset > 1:
        raise ArgumentError(f"offset {offset} is past the end of {shown} ({line_no} lines)")
    text = "".join(parts)
    if st.st_size == 0:
        text = "(empty file)"
    details: dict[str, Any] = {
        "path": shown,
        "size": st.st_size,
        "start_line": offset,
        "end_line": last_shown,
        "truncated": cut_reason is not None,
    }
    if cut_reason is not None:
        if text and not text.endswith("\n"):
            text += "\n"
        next_line = last_shown + 1
        if cut_reason == "size":
            note = (
                f"[truncated at {MAX_READ_BYTES // 1024} KiB; showing lines {offset}-{last_shown}"
            )
        else:
            note = f"[more lines follow; showing lines {offset}-{last_shown}"
        text += f"{note}; continue with offset={next_line}]"
        details["next_offset"] = next_line
    return text, details


class ReadTool(Tool):
    name: ClassVar[str] = "read"
    description: ClassVar[str] = (
        "Read a UTF-8 text file from the workspace. Optionally start at line `offset` "
        f"(1-based) and return at most `limit` lines. Output is capped at "
        f"{MAX_READ_BYTES // 1024} KiB; a note tells where to continue."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File path, relative to the workspace.",
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to return (1-based). Default 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": _MAX_LINES,
                "description": "Maximum number of lines to return.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("fs", "fs_read")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        offset = int(args.get("offset", 1))
        limit = int(args["limit"]) if args.get("limit") is not None else None

        def run(fs: WorkspaceFS) -> tuple[str, dict[str, Any]]:
            rel = fs.rel(args["path"])
            return read_text(fs, rel, fs.shown(rel), offset, limit)

        text, details = await in_workspace(ctx, run)
        return ToolOutput(content=text, details=details)
