"""Discord replies: message content from the agent's Markdown.

Discord renders the Markdown the agent writes (bold, italics, strikethrough, inline code, fenced
code blocks with a language, block quotes, lists, headers ``#`` to ``###``, masked links), so
the text is sent as it is: nothing is escaped. What Discord shows differently is left alone too
(``__x__`` underlines, tables and ``####`` headers show as typed). Mentions in the text
(``@everyone``, ``<@id>``, ``<@&role>``) never ping anyone: every message carries
``allowed_mentions: {"parse": []}``.

A message holds at most 2000 characters (Discord counts code points, as ``len`` does): longer
text is split at a paragraph, line or word break, and a split inside a fenced code block
closes the block at the end of one message and opens it again (with its language) at the
start of the next. Every character of the text is sent, in order: a part is the text's next
slice with at most a fence line added before and after it.
"""

from __future__ import annotations

import re
from typing import Any

TEXT_LIMIT = 2000
# An opening line longer than this (a long info string) is reopened as a bare fence instead.
MAX_REOPEN = 100
# A fence line: up to three spaces, then ``` or ~~~ (or longer), then the info string.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")

NO_MENTIONS: dict[str, Any] = {"parse": []}


def message_body(content: str) -> dict[str, Any]:
    """The JSON of a message (create, edit or follow-up) whose mentions ping nobody."""
    return {"content": content, "allowed_mentions": dict(NO_MENTIONS)}


def split_content(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """``text`` as messages of at most ``limit`` characters with balanced code fences. Parts
    that are only whitespace (a cut in a run of blank space longer than a message) are left
    out: Discord refuses an empty message and trims the blanks of any other."""
    parts: list[str] = []
    fence: str | None = None  # the opening line of the code block the rest starts inside
    rest = text
    while rest:
        reopen = _reopen(fence)
        if len(reopen) + len(rest) <= limit:
            parts.append(reopen + rest)
            break
        budget = limit - len(reopen)  # less a closing fence's room if the cut is in a block
        while True:
            cut = _cut(rest, max(budget, 1))
            core = rest[:cut]
            after = fence_after(core, fence)
            part = reopen + core + (_close(core, after) if after is not None else "")
            if len(part) <= limit or budget <= 1:
                break
            budget -= len(part) - limit  # a longer closing fence than reserved: cut earlier
        parts.append(part)
        rest, fence = rest[cut:], after
    return [part for part in parts if part.strip()]


def fence_after(text: str, fence: str | None) -> str | None:
    """The opening line of the code block ``text`` ends inside (starting inside ``fence``'s
    block, or outside any when ``None``), or ``None`` when it ends outside any block."""
    for line in text.splitlines():
        match = _FENCE.fullmatch(line.rstrip())
        if match is None:
            continue
        if fence is None:
            fence = line.strip()
            continue
        opening = _run(fence)
        run, info = match.group(1), match.group(2)
        if run[0] == opening[0] and len(run) >= len(opening) and not info.strip():
            fence = None
    return fence


def _run(fence: str) -> str:
    """The backticks or tildes that open ``fence`` (and so must close it)."""
    match = _FENCE.fullmatch(fence)
    return match.group(1) if match else "```"


def _reopen(fence: str | None) -> str:
    if fence is None:
        return ""
    line = fence if len(fence) <= MAX_REOPEN else _run(fence)[:MAX_REOPEN]
    return line + "\n"


def _close(core: str, fence: str) -> str:
    run = _run(fence)
    return run if core.endswith("\n") else "\n" + run


def _cut(text: str, budget: int) -> int:
    """Where to end a part of ``text`` of at most ``budget`` characters: after a blank line,
    a line, a space, or (a word longer than a message) anywhere."""
    window = text[:budget]
    paragraph = window.rfind("\n\n")
    if paragraph >= budget // 2:
        return paragraph + 2
    line = window.rfind("\n")
    if line >= budget // 4:
        return line + 1
    space = window.rfind(" ")
    if space > 0:
        return space + 1
    return len(window)
