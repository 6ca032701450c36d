"""Line search for search_files with RE2: time linear in the text whatever the pattern, and the
GIL released while it matches, so that a hostile pattern such as ``(a+)+$`` cannot freeze the
executor. RE2 has no backreferences or lookaround; such patterns are refused with a message
that says so."""

from __future__ import annotations

import os
import stat
import time
from typing import Any

import re2  # type: ignore[import-untyped]

from switchboard_tools.errors import ArgumentError
from switchboard_tools.tools.read import looks_binary

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_LINE_CHARS = 300
MAX_PATTERN_CHARS = 2000
# Memory RE2 may use for one compiled pattern (its DFA falls back to a slower, still linear,
# simulation past it); a pattern too large for it is refused.
_MAX_MEM = 32 * 1024 * 1024
_CHECK_EVERY = 512  # lines between looks at the deadline
_UNSUPPORTED_HINT = (
    " (search_files uses RE2, a linear-time engine: backreferences such as \\1 and lookaround "
    "such as (?=...), (?!...), (?<=...) are not supported)"
)


class Matcher:
    """A compiled query: a literal substring or an RE2 regular expression."""

    def __init__(self, query: str, regex: bool, case_sensitive: bool) -> None:
        if len(query) > MAX_PATTERN_CHARS:
            raise ArgumentError(
                f"query is too long ({len(query)} characters; at most {MAX_PATTERN_CHARS})"
            )
        options = re2.Options()
        options.log_errors = False
        options.never_capture = True
        options.case_sensitive = case_sensitive
        options.literal = not regex
        options.max_mem = _MAX_MEM
        try:
            self._regexp: Any = re2.compile(query, options)
        except re2.error as exc:
            reason = _reason(exc)
            hint = _UNSUPPORTED_HINT if _unsupported(reason) else ""
            raise ArgumentError(f"invalid regular expression: {reason}{hint}") from exc

    def search(self, line: bytes) -> bool:
        return self._regexp.search(line) is not None


def _reason(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else "invalid pattern"
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _unsupported(reason: str) -> bool:
    return "invalid escape sequence" in reason or "invalid perl operator" in reason


def grep_fd(fd: int, matcher: Matcher, room: int, deadline: float) -> list[tuple[int, str]]:
    """Matching lines of the open file ``fd`` (closed here): ``(line number, text)``, at most
    ``room``; none for non-regular, binary or over-large files. Stops at ``deadline``."""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return []
        raw = f.read(MAX_FILE_BYTES)
    if looks_binary(raw[:8192]):
        return []
    text = raw.decode("utf-8", errors="replace")
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if matcher.search(line.encode("utf-8", "surrogatepass")):
            hits.append((number, line[:MAX_LINE_CHARS]))
            if len(hits) >= room:
                break
        if number % _CHECK_EVERY == 0 and time.monotonic() > deadline:
            break
    return hits
