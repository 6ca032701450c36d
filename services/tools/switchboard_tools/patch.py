r"""Unified diffs: parsing git-style or plain ``diff -u`` patches (several files, several hunks,
creation from and deletion to ``/dev/null``, ``\ No newline at end of file``) into
:class:`FilePatch` objects. Applying them is :mod:`switchboard_tools.hunks` (in memory) and
:mod:`switchboard_tools.tools.apply_patch` (paths and files). Every failure is a
:class:`PatchError` whose message says where and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from switchboard_tools.errors import ToolError

_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_HEADER = "diff --git "
_UNSUPPORTED = {
    "rename from ": "renames are not supported (delete the old file and create the new one)",
    "copy from ": "copies are not supported (create the new file instead)",
    "GIT binary patch": "binary patches are not supported",
    "Binary files ": "binary patches are not supported",
}


class PatchError(ToolError):
    """The patch is malformed or does not apply; the message says where and why."""


@dataclass
class Hunk:
    """One ``@@`` hunk. ``lines`` are ``(tag, text)`` with tag ``' '``, ``'-'`` or ``'+'``;
    ``*_no_eol``: a ``\\ No newline at end of file`` marker follows that side's last line."""

    number: int
    header: str
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[tuple[str, str]] = field(default_factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False

    def old_lines(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "+"]

    def new_lines(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "-"]


@dataclass
class FilePatch:
    """The changes to one file. ``old_path``/``new_path`` are ``None`` for ``/dev/null``
    (creation, deletion)."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        path = self.new_path if self.new_path is not None else self.old_path
        assert path is not None
        return path

    @property
    def action(self) -> str:
        if self.old_path is None:
            return "create"
        return "delete" if self.new_path is None else "modify"

    @property
    def added(self) -> int:
        return sum(tag == "+" for h in self.hunks for tag, _ in h.lines)

    @property
    def removed(self) -> int:
        return sum(tag == "-" for h in self.hunks for tag, _ in h.lines)


def _unquote(raw: str) -> str:
    """A git C-style quoted path (``"a/sp\\303\\251cial"``)."""
    body = raw[1:-1] if len(raw) >= 2 and raw.endswith('"') else raw[1:]
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out += ch.encode("utf-8")
        i += 1
    return out.decode("utf-8", errors="replace")


def _path(raw: str, prefix: str) -> str | None:
    raw = raw.split("\t", 1)[0].rstrip()
    if raw.startswith('"'):
        raw = _unquote(raw)
    if raw == "/dev/null":
        return None
    return raw[len(prefix) :] if raw.startswith(prefix) else raw


def _git_paths(rest: str) -> tuple[str, str] | None:
    """The two paths of ``diff --git a/P b/P`` (only needed for patches without hunks)."""
    half = (len(rest) - 5) // 2
    if rest.startswith("a/") and rest == f"a/{rest[2 : 2 + half]} b/{rest[2 : 2 + half]}":
        return rest[2 : 2 + half], rest[2 : 2 + half]
    if rest.startswith("a/") and " b/" in rest:
        old, new = rest[2:].rsplit(" b/", 1)
        return old, new
    return None


class _Parser:
    def __init__(self, text: str) -> None:
        if "\r\n" in text and text.count("\r\n") == text.count("\n"):
            text = text.replace("\r\n", "\n")  # the patch itself was saved with CRLF
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.i = 0

    def parse(self) -> list[FilePatch]:
        files: list[FilePatch] = []
        git_file: FilePatch | None = None  # a git header announcing an empty new/deleted file
        lines = self.lines
        while self.i < len(lines):
            line = lines[self.i]
            if line.startswith(_GIT_HEADER):
                if git_file is not None:
                    files.append(git_file)
                git_file = self._git_header(line)
            elif line.startswith("--- ") and self._peek(1).startswith("+++ "):
                git_file = None
                files.append(self._file(line, lines[self.i + 1]))
                continue
            elif line.startswith("@@"):
                raise PatchError(
                    f"Malformed patch: line {self.i + 1} starts a hunk outside a file (each "
                    "file needs '--- a/<path>' and '+++ b/<path>' lines before its hunks)"
                )
            else:
                self._check_supported(line)
                if git_file is not None and line.startswith(("new file mode", "deleted file")):
                    new = line.startswith("new file mode")
                    git_file = FilePatch(
                        None if new else git_file.old_path, git_file.new_path if new else None
                    )
            self.i += 1
        if git_file is not None and git_file.action != "modify":
            files.append(git_file)
        files = [f for f in files if f.hunks or f.action != "modify"]
        if not files:
            raise PatchError(
                "Malformed patch: no file changes found. Expected a unified diff: "
                "'--- a/<path>', '+++ b/<path>', then hunks starting with '@@ -l,n +l,n @@'."
            )
        return files

    def _peek(self, ahead: int) -> str:
        index = self.i + ahead
        return self.lines[index] if index < len(self.lines) else ""

    def _check_supported(self, line: str) -> None:
        for prefix, reason in _UNSUPPORTED.items():
            if line.startswith(prefix):
                raise PatchError(f"Unsupported patch (line {self.i + 1}): {reason}")

    def _git_header(self, line: str) -> FilePatch | None:
        paths = _git_paths(line[len(_GIT_HEADER) :].strip())
        return FilePatch(paths[0], paths[1]) if paths else None

    def _file(self, old_line: str, new_line: str) -> FilePatch:
        patch = FilePatch(_path(old_line[4:], "a/"), _path(new_line[4:], "b/"))
        if patch.old_path is None and patch.new_path is None:
            raise PatchError(f"Malformed patch: line {self.i + 1}: both paths are /dev/null")
        self.i += 2
        while self.i < len(self.lines) and self.lines[self.i].startswith("@@"):
            patch.hunks.append(self._hunk(patch, len(patch.hunks) + 1))
        if not patch.hunks:
            raise PatchError(
                f"Malformed patch: {patch.path} has no hunks (expected '@@ -l,n +l,n @@' "
                f"after line {self.i})"
            )
        return patch

    def _hunk(self, patch: FilePatch, number: int) -> Hunk:
        header = self.lines[self.i]
        label = f"hunk {number} of {patch.path}"
        m = _HUNK_HEADER.match(header)
        if m is None:
            raise PatchError(
                f"Malformed patch: line {self.i + 1}: bad header for {label}: {header[:80]!r} "
                "(expected '@@ -start,count +start,count @@')"
            )
        old_count = int(m[2]) if m[2] is not None else 1
        new_count = int(m[4]) if m[4] is not None else 1
        hunk = Hunk(number, m[0], int(m[1]), old_count, int(m[3]), new_count)
        self.i += 1
        old_seen = new_seen = 0
        while old_seen < old_count or new_seen < new_count or self._peek(0).startswith("\\"):
            if self.i >= len(self.lines):
                raise PatchError(
                    f"Malformed patch: the patch ends inside {label}: its header {m[0]} "
                    f"announces {old_count} old and {new_count} new lines, found {old_seen} "
                    f"and {new_seen}"
                )
            line = self.lines[self.i]
            tag, text = (" ", "") if line == "" else (line[0], line[1:])
            if tag == "\\":
                self._no_eol(hunk)
            elif tag not in " -+":
                raise PatchError(
                    f"Malformed patch: line {self.i + 1} ({line[:60]!r}) inside {label}: hunk "
                    "lines start with ' ', '-' or '+'; or the header's line counts "
                    f"({m[0]}) are wrong: {old_seen} old and {new_seen} new lines came first"
                )
            else:
                old_seen += tag != "+"
                new_seen += tag != "-"
                if old_seen > old_count or new_seen > new_count:
                    raise PatchError(
                        f"Malformed patch: line {self.i + 1}: {label} has more lines than its "
                        f"header {m[0]} announces ({old_count} old, {new_count} new)"
                    )
                hunk.lines.append((tag, text))
            self.i += 1
        return hunk

    def _no_eol(self, hunk: Hunk) -> None:
        if not hunk.lines:
            raise PatchError(f"Malformed patch: line {self.i + 1}: marker without a line")
        tag = hunk.lines[-1][0]
        hunk.old_no_eol = hunk.old_no_eol or tag != "+"
        hunk.new_no_eol = hunk.new_no_eol or tag != "-"


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a unified diff into file patches (raises :class:`PatchError`)."""
    return _Parser(text).parse()
