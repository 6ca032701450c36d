"""The block chunker (docs/architecture.md): a reply becomes chat-sized parts.

Parts end at the best break in ``[min_chars, max_chars]``: paragraph > newline > sentence >
word, preferring breaks outside code fences. A part that has to end inside a fence gets the fence
closed at its end and reopened (same marker and info string) at the start of the next one.

Content guarantee: with the inserted fence lines removed (a reopening ``marker+info+"\\n"`` at a
part's start, a closing ``"\\n"+marker`` at its end), the parts appear in the text in order,
separated only by whitespace. At a break the parts lose the break's whitespace: trailing
whitespace of a part and blank lines before the next, but not the indentation (up to
``max_chars // 4``) of the line the next part starts on. No part is longer than ``max_chars``; a
part is cut in the middle of a word only when one whitespace-free run does not fit (a hard
split). Every part has balanced fences, even when the reply left its last fence open."""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_NEWLINE = re.compile(r"\n")
_SENTENCE = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*(?=\s)")
_WORD = re.compile(r"\s")


@dataclass(frozen=True)
class _Fence:
    start: int  # index of the opening line
    body: int  # index just after the opening line's text
    close: int  # index of the closing line
    end: int  # index just after the closing line's text (len(text) + 1 when never closed)
    marker: str
    info: str

    def holds(self, cut: int) -> bool:
        """Does a part ending at ``cut`` (exclusive) end inside this fence?"""
        return self.start < cut < self.end

    def on_delimiter(self, cut: int) -> bool:
        """Is ``cut`` within, or right after, the opening line, or within the closing one?"""
        return self.start < cut <= self.body or self.close < cut < self.end


def _fences(text: str) -> list[_Fence]:
    fences: list[_Fence] = []
    at = 0
    while (m := _OPEN.search(text, at)) is not None:
        marker, info = m.group(1), m.group(2).strip()
        if marker[0] == "`" and "`" in info:  # not a fence: inline code at a line start
            at = m.end() + 1
            continue
        close = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$", re.M)
        c = close.search(text, m.end() + 1) if m.end() < len(text) else None
        close_at, end = (c.start(), c.end()) if c else (len(text) + 1, len(text) + 1)
        fences.append(_Fence(m.start(), m.end(), close_at, end, marker, info))
        at = end + 1
    return fences


def _breaks(
    text: str,
    fences: list[_Fence],
    pattern: re.Pattern[str],
    lo: int,
    hi: int,
    use_end: bool = False,
) -> list[int]:
    """Break positions ``c`` (a part ends at ``text[:c]``) of one kind with ``lo <= c <= hi``,
    in order, leaving out those within a fence's opening or closing line."""
    found: list[int] = []
    for m in pattern.finditer(text, max(0, lo - 8), min(len(text), hi + 8)):
        c = m.end() if use_end else m.start()
        if lo <= c <= hi and not any(f.on_delimiter(c) for f in fences):
            found.append(c)
    return found


def _next_start(text: str, cut: int, max_indent: int) -> int:
    """Where the next part starts: after the break's whitespace, keeping the indentation of
    the line it lands on (unless that is absurdly long)."""
    j = cut
    while j < len(text) and text[j].isspace():
        j += 1
    newline = text.rfind("\n", cut, j)
    if newline < 0 or j == len(text) or j - newline - 1 > max_indent:
        return j
    return newline + 1


def chunk_text(text: str, min_chars: int = 300, max_chars: int = 1000) -> list[str]:
    """Split ``text`` into parts of at most ``max_chars`` (see the module doc)."""
    if max_chars < 40 or not 0 <= min_chars <= max_chars:
        raise ValueError("need 0 <= min_chars <= max_chars and max_chars >= 40")
    fences = _fences(text)
    reserve = max((len(f.marker) + 1 for f in fences), default=0)
    parts: list[str] = []
    indent = max_chars // 4
    pos = _next_start(text, 0, indent) if text[:1].isspace() else 0
    reopen: _Fence | None = None
    while pos < len(text):
        prefix = _reopening(reopen, max_chars) if reopen else ""
        rest = text[pos:].rstrip()
        if not rest.strip():
            break
        tail = _open_at(fences, len(text))
        closing = "\n" + tail.marker if tail else ""
        if len(prefix) + len(rest) + len(closing) <= max_chars:
            parts.append(prefix + rest + closing)
            break
        hi = pos + max_chars - len(prefix) - reserve
        lo = min(pos + max(min_chars - len(prefix), 1), hi)
        cut = _choose(text, fences, pos, lo, hi)
        reopen = _open_at(fences, cut)
        closing = "\n" + reopen.marker if reopen else ""
        parts.append(prefix + text[pos:cut].rstrip() + closing)
        pos = _next_start(text, cut, indent)
    return parts


def _open_at(fences: list[_Fence], cut: int) -> _Fence | None:
    return next((f for f in fences if f.holds(cut)), None)


def _reopening(fence: _Fence, max_chars: int) -> str:
    """The line that reopens ``fence``; a very long info string is cut to keep room for text."""
    room = max(0, max_chars // 4 - len(fence.marker) * 2 - 2)
    return fence.marker + fence.info[:room] + "\n"


def _choose(text: str, fences: list[_Fence], pos: int, lo: int, hi: int) -> int:
    """The cut for the part starting at ``pos``: the last break of the best kind in
    ``[lo, hi]`` outside fences, else inside one, else any whitespace before ``lo``, else a
    hard split at ``hi``."""
    first = pos
    while first < len(text) and text[first].isspace():
        first += 1
    lo = max(lo, first + 1)
    fences = [f for f in fences if f.start <= hi + 8 and f.end >= pos]  # the ones that matter
    kinds = [(_PARAGRAPH, False), (_NEWLINE, False), (_SENTENCE, True), (_WORD, False)]
    if lo <= hi:
        for inside_ok in (False, True):
            for pattern, use_end in kinds:
                found = [
                    c
                    for c in _breaks(text, fences, pattern, lo, hi, use_end)
                    if inside_ok or _open_at(fences, c) is None
                ]
                if found:
                    return found[-1]
    early = _breaks(text, fences, _WORD, first + 1, min(lo - 1, hi))
    return early[-1] if early else max(hi, first + 1)
