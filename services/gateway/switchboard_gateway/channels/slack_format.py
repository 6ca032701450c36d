"""Slack text both ways: the agent's Markdown-ish replies as Slack ``mrkdwn`` (split at Slack's
text limit with code fences balanced), and Slack's inbound markup as plain text for the agent.

Slack's markup: ``*bold*``, ``_italic_``, ``~strike~``, `` `code` ``, fenced blocks, ``<url|text>``
links and ``<@U123>`` mentions; ``&``, ``<`` and ``>`` in text must be sent as ``&amp;``,
``&lt;`` and ``&gt;`` (also inside code, where Slack shows them as the characters).
"""

from __future__ import annotations

import re
from collections.abc import Collection

TEXT_LIMIT = 40_000  # chat.postMessage truncates ``text`` longer than this
FENCE = "```"

_OPEN_FENCE = re.compile(r"^\s*```[^`]*$")  # an info string may not hold backticks
_CLOSE_FENCE = re.compile(r"^\s*```\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]\n]+)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s<>|]+)>")
_MENTION = re.compile(r"<@[UW][A-Z0-9]{2,}>")  # a user mention the agent may write back
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HOLE = re.compile("\x00(\\d+)\x00")
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """Slack's three control characters as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str, label: str) -> str:
    # ``|`` and ``>`` end the URL part of <url|text>; percent-encode what would break it.
    safe = escape(url.replace("|", "%7C").replace(" ", "%20"))
    text = escape(label.replace("**", "").replace("\n", " "))
    return f"<{safe}|{text}>" if text and text != safe else f"<{safe}>"


def _inline(text: str) -> str:
    """One line (outside code fences) as mrkdwn: links, mentions and code spans are cut out
    first so that escaping and emphasis never touch them."""
    text = text.replace("\x00", "\ufffd").replace(_BOLD_MARK, "\ufffd")
    holes: list[str] = []

    def hole(value: str) -> str:
        holes.append(value)
        return f"\x00{len(holes) - 1}\x00"

    text = _INLINE_CODE.sub(lambda m: hole(m.group(1) + escape(m.group(2)) + m.group(1)), text)
    text = _LINK.sub(lambda m: hole(_link(m.group(2), m.group(1))), text)
    text = _AUTOLINK.sub(lambda m: hole(_link(m.group(1), "")), text)
    text = _MENTION.sub(lambda m: hole(m.group(0)), text)
    text = escape(text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(1)}{_BOLD_MARK}", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return _HOLE.sub(lambda m: holes[int(m.group(1))], text)


def to_mrkdwn(markdown: str) -> str:
    """The agent's Markdown as Slack mrkdwn: ``**b**`` -> ``*b*``, ``*i*`` -> ``_i_``,
    ``~~s~~`` -> ``~s~``, ``[t](u)`` -> ``<u|t>``, ``# Heading`` -> a bold line, ``- item`` ->
    ``• item``; code fences kept (a language tag is dropped: Slack would show it as code)."""
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if in_code:
            in_code = not _CLOSE_FENCE.match(line)
            out.append(escape(line))
        elif _OPEN_FENCE.match(line):
            out.append(line[: line.index(FENCE) + len(FENCE)])  # Slack has no language tag
            in_code = True
        elif heading := _HEADING.match(line):
            title = heading.group(1).replace("**", "")
            out.append(f"*{_inline(title)}*" if title else "")
        else:
            bullet = _BULLET.match(line)
            if bullet:
                line = f"{bullet.group(1)}• {line[bullet.end() :]}"
            out.append(_inline(line))
    return "\n".join(out)


def _fences_open(body: str, in_code: bool) -> bool:
    """Is a code block open at the end of ``body`` (that started with one open or not)?"""
    for line in body.split("\n"):
        in_code = not _CLOSE_FENCE.match(line) if in_code else bool(_OPEN_FENCE.match(line))
    return in_code


def _safe_cut(text: str, start: int, end: int) -> int:
    """Where to end a piece ``text[start:cut]`` with ``start < cut <= end``: after the last
    newline, else after the last space, else at ``end`` but not inside an entity or a
    ``<...>`` link."""
    for sep in ("\n", " "):
        at = text.rfind(sep, start, end)
        if at > start:
            return at + 1
    cut = end
    amp = text.rfind("&", max(start + 1, cut - 4), cut)
    if amp > start and text.startswith(("&amp;", "&lt;", "&gt;"), amp):
        cut = amp
    opened = text.rfind("<", start + 1, cut)
    if opened > start and text.rfind(">", start, cut) < opened:
        cut = opened
    return cut


def split_mrkdwn(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line ends where possible. A
    piece that ends inside a code block gets a closing fence and the next one reopens it;
    apart from those fences the pieces joined are ``text``, every character kept."""
    close = "\n" + FENCE
    if limit <= 4 * len(close):
        raise ValueError(f"limit must be more than {4 * len(close)}")
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    start, in_code = 0, False
    while start < len(text):
        prefix = FENCE + "\n" if in_code else ""
        room = limit - len(prefix)
        if len(text) - start <= room:
            pieces.append(prefix + text[start:])
            break
        cut = _safe_cut(text, start, start + room)
        if _fences_open(text[start:cut], in_code):  # leave room for the closing fence
            cut = _safe_cut(text, start, start + room - len(close))
        body = text[start:cut]
        in_code = _fences_open(body, in_code)
        if in_code:
            body += FENCE if body.endswith("\n") else close
        pieces.append(prefix + body)
        start = cut
    return pieces


# --- inbound: Slack's markup as the agent reads it ------------------------------------------

_ANGLE = re.compile(r"<([^<>\n]+)>")


def from_mrkdwn(text: str, bot_user_ids: Collection[str] = ()) -> str:
    """An inbound message's text for the agent: the bot's own mention dropped, other mentions
    kept as ``<@U123>``, links as ``[label](url)`` (or the bare URL), ``<#C1|general>`` as
    ``#general``, ``<!here>`` as ``@here`` and the entities unescaped."""

    def token(m: re.Match[str]) -> str:
        inner = m.group(1)
        ref, _, label = inner.partition("|")
        if ref.startswith("@"):
            return "" if ref[1:] in bot_user_ids else f"<{ref}>"
        if ref.startswith("#"):
            return f"#{label or ref[1:]}"
        if ref.startswith("!"):
            special = ref[1:].split("^")[0]
            if special in ("here", "channel", "everyone"):
                return f"@{special}"
            return label or special  # a user group (@team), a date's fallback text
        return f"[{label}]({ref})" if label and label != ref else ref

    plain = _ANGLE.sub(token, text)
    return plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
