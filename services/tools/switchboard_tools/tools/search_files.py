"""search_files: find files by glob and, optionally, lines by substring or regex (RE2)."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import time
from typing import Any, ClassVar

from switchboard.beneath import O_CLOEXEC
from switchboard_tools.errors import ArgumentError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.textsearch import MAX_PATTERN_CHARS, Matcher, grep_fd
from switchboard_tools.wsfs import WorkspaceFS, in_workspace, os_error

MAX_RESULTS = 200
MAX_FILES_SCANNED = 20_000
MAX_DEPTH = 64
TIME_BUDGET_S = 10.0
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | O_CLOEXEC


class _Search:
    """A walk over directory descriptors: each subdirectory and file is opened relative to its
    parent's descriptor with ``O_NOFOLLOW``, so symlinks are never followed (nor can a swap
    lead the walk out)."""

    def __init__(self, base_shown: str, glob: str, matcher: Matcher | None) -> None:
        self.base_shown = base_shown
        self.glob = glob
        self.matcher = matcher
        self.results: list[str] = []
        self.scanned = 0
        self.capped = False
        self.deadline = time.monotonic() + TIME_BUDGET_S

    def walk(self, fd: int, rel: str, depth: int) -> None:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if not entry.name.startswith(".git"):
                    subdirs.append(entry.name)
                continue
            self.file(fd, entry.name, posixpath.join(rel, entry.name) if rel else entry.name)
            if self.capped:
                return
        for name in subdirs:
            if depth >= MAX_DEPTH:
                return
            try:
                sub = os.open(name, _DIR, dir_fd=fd)
            except OSError:
                continue  # vanished, or swapped for a symlink meanwhile
            try:
                self.walk(sub, posixpath.join(rel, name) if rel else name, depth + 1)
            finally:
                os.close(sub)
            if self.capped:
                return

    def file(self, dirfd: int, name: str, rel: str) -> None:
        if not fnmatch.fnmatch(rel if "/" in self.glob else name, self.glob):
            return
        self.scanned += 1
        shown = rel if self.base_shown == "." else posixpath.join(self.base_shown, rel)
        if self.matcher is None:
            self.results.append(shown)
        else:
            try:
                fd = os.open(name, _FILE, dir_fd=dirfd)
            except OSError:
                fd = -1  # a symlink (never followed), or gone
            if fd >= 0:
                room = MAX_RESULTS - len(self.results)
                for number, line in grep_fd(fd, self.matcher, room, self.deadline):
                    self.results.append(f"{shown}:{number}: {line}")
        if (
            len(self.results) >= MAX_RESULTS
            or self.scanned >= MAX_FILES_SCANNED
            or time.monotonic() > self.deadline
        ):
            self.capped = True


def search(
    fs: WorkspaceFS, path: str, glob: str, matcher: Matcher | None
) -> tuple[list[str], dict[str, Any]]:
    """Walk directory ``path`` of the workspace, match names against ``glob`` (on the path
    relative to ``path``, or on the file name when the glob has no ``/``)."""
    rel = fs.rel(path)
    shown = fs.shown(rel)
    try:
        fd = fs.open_dir(rel, readable=True)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise ArgumentError(f"{path!r} is not a directory") from exc
    except OSError as exc:
        raise os_error(exc, shown, "search") from exc
    walker = _Search(shown, glob, matcher)
    try:
        walker.walk(fd, "", 0)
    except OSError as exc:
        raise os_error(exc, shown, "search") from exc
    finally:
        os.close(fd)
    details = {
        "results": len(walker.results),
        "files_scanned": walker.scanned,
        "capped": walker.capped,
    }
    return walker.results, details


class SearchFilesTool(Tool):
    name: ClassVar[str] = "search_files"
    description: ClassVar[str] = (
        "Find files in the workspace by glob (e.g. '*.py' or 'src/**/*.md') and, with "
        "`query`, the lines containing it (substring, or an RE2 regex with regex=true: no "
        "backreferences or lookaround). "
        f"At most {MAX_RESULTS} results; binary and large files are skipped."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "glob": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Default '*'.",
            },
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Text to look for.",
            },
            "regex": {"type": "boolean", "description": "query is a regex. Default false."},
            "case_sensitive": {"type": "boolean", "description": "Default true."},
            "path": {"type": "string", "minLength": 1, "description": "Directory. Default '.'."},
        },
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("fs", "fs_read")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        query = args.get("query")
        matcher = None
        if query is not None:
            case_sensitive = args.get("case_sensitive", True)
            matcher = Matcher(query, bool(args.get("regex")), case_sensitive)
        glob = args.get("glob", "*")

        def run(fs: WorkspaceFS) -> tuple[list[str], dict[str, Any]]:
            return search(fs, args.get("path", "."), glob, matcher)

        results, details = await in_workspace(ctx, run)
        text = "\n".join(results) if results else "(no matches)"
        if details["capped"]:
            text += "\n[results capped; narrow the glob or query]"
        return ToolOutput(content=text, details=details)
