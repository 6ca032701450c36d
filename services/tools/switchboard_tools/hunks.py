"""Applying the hunks of a :class:`~switchboard_tools.patch.FilePatch` to a file's lines, in
memory. Hunks are matched exactly (no fuzz); a hunk whose lines moved is searched for in the
whole file after the previous hunk, nearest to its stated position first, like GNU patch's
offset search."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard_tools.patch import FilePatch, Hunk, PatchError


@dataclass
class Applied:
    """The new content of one file as lines, and where each hunk matched."""

    lines: list[str]
    eol_at_end: bool
    offsets: list[int]


def _find(lines: list[str], block: list[str], expected: int, lo: int) -> int | None:
    """Nearest position >= ``lo`` to ``expected`` where ``block`` matches exactly."""
    hi = len(lines) - len(block)
    if hi < lo:
        return None
    expected = min(max(expected, lo), hi)
    first = block[0]
    for distance in range(max(expected - lo, hi - expected) + 1):
        for at in (expected - distance, expected + distance) if distance else (expected,):
            if lo <= at <= hi and lines[at] == first and lines[at : at + len(block)] == block:
                return at
    return None


def _mismatch(lines: list[str], block: list[str], expected: int, hunk: Hunk, path: str) -> str:
    reason = "its context and removed lines were not found in the file"
    start = min(max(expected, 0), len(lines))
    for k, want in enumerate(block):
        have = lines[start + k] if start + k < len(lines) else None
        if have != want:
            found = "end of file" if have is None else repr(have[:80])
            reason += (
                f" (at the stated position, line {start + k + 1} is {found}; the hunk "
                f"expects {want[:80]!r})"
            )
            break
    return f"Hunk {hunk.number} of {path} ({hunk.header}) does not apply: {reason}"


def apply_hunks(
    lines: list[str], eol_at_end: bool, patch: FilePatch, *, crlf: bool = False
) -> Applied:
    """Apply every hunk of ``patch`` to ``lines`` (a file without line terminators; ``crlf``:
    the file uses CRLF, so a trailing ``\\r`` on patch lines is ignored). Raises
    :class:`PatchError` naming the first hunk that does not apply."""

    def norm(items: list[str]) -> list[str]:
        return [s.removesuffix("\r") for s in items] if crlf else items

    result: list[str] = []
    pos = delta = 0
    offsets: list[int] = []
    for hunk in patch.hunks:
        old, new = norm(hunk.old_lines()), norm(hunk.new_lines())
        # "-l,0" inserts after line l; otherwise the hunk starts at line l.
        expected = hunk.old_start + delta - (1 if old else 0)
        if old:
            at = _find(lines, old, expected, pos)
            if at is None:
                raise PatchError(_mismatch(lines, old, expected, hunk, patch.path))
        elif pos <= expected <= len(lines):
            at = expected
        else:
            raise PatchError(
                f"Hunk {hunk.number} of {patch.path} ({hunk.header}) does not apply: it inserts "
                f"after line {expected}, but the file has {len(lines)} lines"
                + (" and the previous hunk ends later" if expected < pos else "")
            )
        # Positions are in the original file's lines, like the header's; an offset found for
        # one hunk carries over to the next (as in GNU patch).
        delta += at - expected
        offsets.append(delta)
        result += lines[pos:at]
        result += new
        pos = at + len(old)
        if pos == len(lines) and hunk.old_no_eol != hunk.new_no_eol:
            eol_at_end = not hunk.new_no_eol
    result += lines[pos:]
    return Applied(result, eol_at_end, offsets)
