"""search_files: find files by glob and, optionally, lines by substring or regex."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, ClassVar

from switchboard_tools.errors import ArgumentError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.tools.read import looks_binary
from switchboard_tools.workspace import display_path, resolve_in_workspace

MAX_RESULTS = 200
MAX_FILES_SCANNED = 20_000
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_LINE_CHARS = 300
TIME_BUDGET_S = 10.0


def _matcher(query: str, regex: bool, case_sensitive: bool) -> re.Pattern[str]:
    flags = 0 if case_sensitive else re.IGNORECASE
    try:
        return re.compile(query if regex else re.escape(query), flags)
    except re.error as exc:
        raise ArgumentError(f"invalid regular expression: {exc}") from exc


def _grep(path: str, pattern: re.Pattern[str], room: int) -> list[tuple[int, str]]:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return []
        raw = f.read(MAX_FILE_BYTES)
    if looks_binary(raw[:8192]):
        return []
    hits = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if pattern.search(line):
            hits.append((number, line[:MAX_LINE_CHARS]))
            if len(hits) >= room:
                break
    return hits


def search(
    workspace: Path, base: Path, glob: str, pattern: re.Pattern[str] | None
) -> tuple[list[str], dict[str, Any]]:
    """Walk ``base`` (symlinks are not followed), match names against ``glob`` (on the path
    relative to ``base``, or on the file name when the glob has no ``/``)."""
    results: list[str] = []
    scanned = 0
    capped = False
    deadline = time.monotonic() + TIME_BUDGET_S
    for top, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".git"))
        for name in sorted(files):
            full = os.path.join(top, name)
            rel = os.path.relpath(full, base)
            if not fnmatch.fnmatch(rel if "/" in glob else name, glob):
                continue
            scanned += 1
            shown = display_path(workspace, Path(full))
            if pattern is None:
                results.append(shown)
            else:
                for number, line in _grep(full, pattern, MAX_RESULTS - len(results)):
                    results.append(f"{shown}:{number}: {line}")
            if len(results) >= MAX_RESULTS or scanned >= MAX_FILES_SCANNED:
                capped = True
            if time.monotonic() > deadline:
                capped = True
            if capped:
                break
        if capped:
            break
    return results, {"results": len(results), "files_scanned": scanned, "capped": capped}


class SearchFilesTool(Tool):
    name: ClassVar[str] = "search_files"
    description: ClassVar[str] = (
        "Find files in the workspace by glob (e.g. '*.py' or 'src/**/*.md') and, with "
        "`query`, the lines containing it (substring, or a Python regex with regex=true). "
        f"At most {MAX_RESULTS} results; binary and large files are skipped."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "glob": {"type": "string", "minLength": 1, "description": "Default '*'."},
            "query": {"type": "string", "minLength": 1, "description": "Text to look for."},
            "regex": {"type": "boolean", "description": "query is a regex. Default false."},
            "case_sensitive": {"type": "boolean", "description": "Default true."},
            "path": {"type": "string", "minLength": 1, "description": "Directory. Default '.'."},
        },
        "additionalProperties": False,
    }
    group: ClassVar[str] = "fs"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        base = resolve_in_workspace(ctx.workspace, args.get("path", "."))
        if not base.is_dir():
            raise ArgumentError(f"{args.get('path')!r} is not a directory")
        query = args.get("query")
        pattern = None
        if query is not None:
            pattern = _matcher(query, bool(args.get("regex")), args.get("case_sensitive", True))
        glob = args.get("glob", "*")
        results, details = await asyncio.to_thread(search, ctx.workspace, base, glob, pattern)
        text = "\n".join(results) if results else "(no matches)"
        if details["capped"]:
            text += "\n[results capped; narrow the glob or query]"
        return ToolOutput(content=text, details=details)
