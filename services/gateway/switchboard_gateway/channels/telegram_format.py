"""The agent's Markdown-ish text -> Telegram HTML (``parse_mode=HTML``), in messages of at most
4096 characters of visible text (Telegram's limit, counted after the markup is parsed).

Understood: fenced code blocks (``<pre><code class="language-x">``), inline code, ``**bold**``
and ``__bold__``, ``*italic*`` and ``_italic_`` (not inside words: ``snake_case`` stays),
``~~strike~~``, ``[label](url)`` for http(s), tg and mailto links, ``# headings`` (bold) and
backslash escapes. Anything else is text, with ``&``, ``<`` and ``>`` escaped; an unmatched
marker stays as it was typed. The HTML is built from a tree, so tags always nest; a long text
is split between characters (at a line break or a space when one is near), never inside a tag
or an entity, closing the open tags at the end of a message and opening them again at the
start of the next.

Each :class:`Piece` carries its plain text too (what the user would see, with each link's URL
after its label): should the HTML still be refused, the same message goes as plain text, so
formatting never loses a word.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

TEXT_LIMIT = 4096  # characters of a message's text after its entities are parsed
LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_ESCAPABLE = frozenset("\\`*_~[]()#>!-.+|{}")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+#.-]{0,32})[^`]*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(\s*<?([^\s()<>]+(?:\([^\s()<>]*\)[^\s()<>]*)*)>?\s*\)")
_TAG = re.compile(r"<(/?)([a-z]+)((?: [a-z]+=\"[^\"<>]*\")?)>")
_ENTITY = re.compile(r"&(?:amp|lt|gt|quot);")
_ALLOWED_TAGS = frozenset({"b", "i", "s", "code", "pre", "a"})
_EMPHASIS = {"**": "b", "__": "b", "~~": "s", "*": "i", "_": "i"}


@dataclass(frozen=True)
class Span:
    """Text under a stack of open tags (outermost first), each as written between ``<`` and
    ``>``: ``b``, ``a href="..."``, ``code class="language-py"``..."""

    text: str
    tags: tuple[str, ...] = ()
    plain_only: bool = False  # shown only in the plain text (a link's URL)


@dataclass(frozen=True)
class Piece:
    """One message: its HTML (``None``: send ``plain`` without a parse mode) and its plain
    text."""

    html: str | None
    plain: str


def escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(value: str) -> str:
    return escape_text(value).replace('"', "&quot;")


def units(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts (an emoji may count two)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


# --- Markdown-ish -> spans -----------------------------------------------------------------


def parse_markdown(text: str) -> list[Span]:
    spans: list[Span] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if i:
            spans.append(Span("\n"))
        fence = _FENCE.match(lines[i])
        if fence is not None:
            marker, language = fence.group(1), fence.group(2)
            end = i + 1
            while end < len(lines) and not _closes(lines[end], marker):
                end += 1
            code = "\n".join(lines[i + 1 : end])
            inner = f'code class="language-{language}"' if language else "code"
            if code:
                spans.append(Span(code, ("pre", inner)))
            i = end + 1  # past the closing fence (or the end: an unclosed block runs to it)
            continue
        heading = _HEADING.match(lines[i])
        if heading is not None and heading.group(1):
            spans.extend(_inline(heading.group(1), ("b",)))
        else:
            spans.extend(_inline(lines[i], ()))
        i += 1
    return [s for s in spans if s.text]


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(marker) and stripped == marker[0] * len(stripped)


def _inline(s: str, tags: tuple[str, ...]) -> list[Span]:
    out: list[Span] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            out.append(Span("".join(buf), tags))
            buf.clear()

    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in _ESCAPABLE:
            buf.append(s[i + 1])
            i += 2
            continue
        if c == "`":
            run = n - i - len(s[i:].lstrip("`"))
            close = s.find("`" * run, i + run)
            if close > i + run:  # code can't hold other markup: its tags are its own
                flush()
                out.append(Span(s[i + run : close], ("code",)))
                i = close + run
                continue
            buf.append("`" * run)
            i += run
            continue
        if c == "[":
            link = _LINK.match(s, i)
            if link is not None and link.group(2).lower().startswith(LINK_SCHEMES):
                flush()
                anchor = f'a href="{escape_attr(link.group(2))}"'
                out.extend(_inline(link.group(1), (*tags, anchor)))
                if link.group(1) != link.group(2):
                    out.append(Span(f" ({link.group(2)})", tags, plain_only=True))
                i = link.end()
                continue
        if c in "*_~":
            marker = c * 2 if s.startswith(c * 2, i) else c
            after = i + len(marker)
            opens = after < n and not s[after].isspace()
            if marker != "~" and opens and not (c == "_" and i > 0 and s[i - 1].isalnum()):
                end = _closer(s, after, marker)
                if end is not None:
                    flush()
                    out.extend(_inline(s[after:end], (*tags, _EMPHASIS[marker])))
                    i = end + len(marker)
                    continue
            buf.append(marker)
            i = after
            continue
        buf.append(c)
        i += 1
    flush()
    return out


def _closer(s: str, start: int, marker: str) -> int | None:
    """Where the emphasis opened before ``start`` closes: the marker after a non-space, not
    inside a longer run of its character, not followed by a letter for ``_``."""
    c, n, k = marker[0], len(s), start
    while (j := s.find(marker, k)) >= 0:
        end = j + len(marker)
        ok = j > start and not s[j - 1].isspace()
        if ok and end < n and s[end] == c:
            ok = False  # the run goes on: close at its end
        if ok and len(marker) == 1 and s[j - 1] == c:
            ok = False
        if ok and c == "_" and end < n and s[end].isalnum():
            ok = False
        if ok:
            return j
        k = j + 1
    return None


# --- spans -> HTML messages ----------------------------------------------------------------


class _Writer:
    """HTML messages built span by span, each under ``limit`` characters of visible text."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pieces: list[Piece] = []
        self._html: list[str] = []
        self._plain: list[str] = []
        self._open: tuple[str, ...] = ()
        self.used = 0

    def write(self, text: str, tags: tuple[str, ...], plain_only: bool = False) -> None:
        self._plain.append(text)
        self.used += units(text)
        if plain_only:
            return
        common = 0
        while common < min(len(tags), len(self._open)) and tags[common] == self._open[common]:
            common += 1
        self._html.extend(f"</{_name(t)}>" for t in reversed(self._open[common:]))
        self._html.extend(f"<{t}>" for t in tags[common:])
        self._open = tags
        self._html.append(escape_text(text))

    def finish(self) -> None:
        self._html.extend(f"</{_name(t)}>" for t in reversed(self._open))
        plain = "".join(self._plain)
        if plain.strip():  # Telegram refuses a message of only spaces (and trims its ends)
            self.pieces.append(Piece("".join(self._html), plain))
        self._html, self._plain, self._open, self.used = [], [], (), 0


def _name(tag: str) -> str:
    return tag.partition(" ")[0]


def render(spans: list[Span], limit: int = TEXT_LIMIT) -> list[Piece]:
    writer = _Writer(limit)
    for span in spans:
        text = span.text
        while text:
            room = writer.limit - writer.used
            if units(text) <= room:
                writer.write(text, span.tags, span.plain_only)
                break
            cut = split_point(text, room, fresh=writer.used == 0)
            if cut:
                writer.write(text[:cut], span.tags, span.plain_only)
                text = text[cut:]
            writer.finish()
    writer.finish()
    return writer.pieces


def split_point(text: str, room: int, *, fresh: bool) -> int:
    """How many characters of ``text`` go in a message with ``room`` UTF-16 units left: up to
    a line break or a space in the second half of the room; else 0 when the message has text
    already (``text`` starts the next one), else any break, else as many as fit."""
    fit = 0
    width = 0
    for ch in text:
        width += 2 if ord(ch) > 0xFFFF else 1
        if width > room:
            break
        fit += 1
    for sep in ("\n", " "):
        at = text.rfind(sep, 0, fit)
        if at >= 0 and at + 1 >= fit // 2:
            return at + 1
    if not fresh:
        return 0
    at = max(text.rfind("\n", 0, fit), text.rfind(" ", 0, fit))
    return at + 1 if at >= 0 else max(fit, 1)


def valid_html(html: str) -> bool:
    """Is ``html`` what Telegram parses: only our tags, nested, and only the four entities?"""
    stack: list[str] = []
    pos = 0
    for tag in _TAG.finditer(html):
        if not _valid_text(html[pos : tag.start()]):
            return False
        pos = tag.end()
        closing, name = tag.group(1), tag.group(2)
        if name not in _ALLOWED_TAGS:
            return False
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name or tag.group(3):
            return False
    return not stack and _valid_text(html[pos:])


def _valid_text(text: str) -> bool:
    return "<" not in text and ">" not in text and "&" not in _ENTITY.sub("", text)


def plain_pieces(text: str, limit: int = TEXT_LIMIT) -> list[Piece]:
    """``text`` as it is (markup and all), split to the limit, without a parse mode: by
    itself, so that a bug in :func:`render` cannot reach it."""
    pieces = []
    while text:
        cut = len(text) if units(text) <= limit else split_point(text, limit, fresh=True)
        if text[:cut].strip():
            pieces.append(Piece(None, text[:cut]))
        text = text[cut:]
    return pieces


def to_pieces(text: str, limit: int = TEXT_LIMIT) -> list[Piece]:
    """The messages for one reply part: HTML, or plain text should the HTML come out wrong."""
    try:
        pieces = render(parse_markdown(text), limit)
    except Exception:  # a formatting bug must not lose the reply
        log.exception("formatting a reply for Telegram failed; sending it as plain text")
        return plain_pieces(text, limit)
    if not all(p.html is not None and valid_html(p.html) for p in pieces):
        log.error("a reply formatted for Telegram is not valid HTML; sending it as plain text")
        return plain_pieces(text, limit)
    return pieces
