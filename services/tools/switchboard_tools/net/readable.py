"""Readable text from fetched bodies: HTML becomes plain text (title first, headings, paragraphs,
list items and link text kept; scripts, styles, navigation and other chrome dropped); text and
JSON pass through; binary content is refused."""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from typing import Literal

from switchboard_tools.errors import ToolError
from switchboard_tools.tools.read import looks_binary

Kind = Literal["html", "text", "unknown", "binary"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-ndjson",
        "application/csv",
        "application/sql",
        "application/graphql",
    }
)
# Elements whose content is never readable text.
_SKIP = frozenset(
    {
        "script", "style", "noscript", "template", "nav", "aside", "footer", "svg", "math",
        "canvas", "iframe", "object", "embed", "select", "button",
    }
)  # fmt: skip
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "main", "header", "blockquote", "pre", "table",
        "ul", "ol", "dl", "figure", "figcaption", "address", "details", "summary", "form",
        "fieldset", "hr", "body",
    }
)  # fmt: skip
_TIGHT = frozenset({"li", "tr", "dt", "dd", "br"})  # new line, no blank line before
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SPACE = re.compile(r"\s+")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def content_kind(content_type: str) -> Kind:
    mime = media_type(content_type)
    if mime in _HTML_TYPES:
        return "html"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    if mime in ("", "application/octet-stream", "binary/octet-stream"):
        return "unknown"
    return "binary"


def _charset(content_type: str, body: bytes, kind: Kind) -> str:
    match = re.search(r"charset\s*=\s*\"?([A-Za-z0-9._:-]+)", content_type, re.I)
    found = match.group(1) if match else None
    if found is None and kind == "html":
        meta = _META_CHARSET.search(body[:4096])
        found = meta.group(1).decode("ascii") if meta else None
    try:
        return codecs.lookup(found).name if found else "utf-8"
    except LookupError:
        return "utf-8"


class _Readable(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.blocks: list[tuple[str, bool]] = []  # (text, tight)
        self._line: list[str] = []
        self._prefix = ""
        self._tight = False
        self._gap = True  # a blank line before the next block, even a tight one
        self._in_title = False
        self._pre = 0
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._cells = 0

    def _flush(self, tight: bool = False) -> None:
        raw = "".join(self._line)
        text = raw.strip("\n") if self._pre else _SPACE.sub(" ", raw).strip()
        if text:
            self.blocks.append((self._prefix + text, self._tight and not self._gap))
            self._gap = False
        self._gap = self._gap or not tight
        self._line, self._prefix, self._tight = [], "", tight

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_tag is not None:
            self._skip_depth += tag == self._skip_tag
            return
        if tag == "title":
            self._in_title = True
            return
        hidden = any(
            name == "hidden" or (name, value) == ("aria-hidden", "true") for name, value in attrs
        )
        if (tag in _SKIP or hidden) and tag not in _VOID:
            self._skip_tag, self._skip_depth = tag, 1
            return
        if tag in _HEADINGS:
            self._flush()
            self._prefix = "#" * _HEADINGS[tag] + " "
        elif tag == "li":
            self._flush(tight=True)
            self._prefix = "- "
        elif tag in ("td", "th"):
            self._cells += 1
            if self._cells > 1:
                self._line.append(" | ")
        elif tag in _TIGHT:
            self._flush(tight=True)
            self._cells = 0
        elif tag in _BLOCKS:
            self._flush()
            self._pre += tag == "pre"
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self._line.append(f" {alt} ")

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag == "title":
            self._in_title = False
        elif tag in _HEADINGS or tag in _BLOCKS:
            self._flush()
            if tag == "pre" and self._pre:
                self._pre -= 1
        elif tag in _TIGHT:
            self._flush(tight=True)

    def finish(self) -> None:
        self.close()
        self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip_tag is None:
            self._line.append(data)


def html_to_text(html: str) -> str:
    """Readable text of an HTML document, its title first."""
    parser = _Readable()
    parser.feed(html)
    parser.finish()
    parts: list[str] = []
    title = _SPACE.sub(" ", parser.title).strip()
    if title:
        parts.append(f"Title: {title}")
    for text, tight in parser.blocks:
        if parts:
            parts.append("\n" if tight else "\n\n")
        parts.append(text)
    return "".join(parts)


def readable_text(body: bytes, content_type: str) -> str:
    """``body`` as readable text; :class:`ToolError` for binary content."""
    kind = content_kind(content_type)
    if kind == "binary" or (kind == "unknown" and looks_binary(body[:8192])):
        shown = media_type(content_type) or "unlabelled binary data"
        raise ToolError(
            f"refused: the response is binary content ({shown}); "
            "web_fetch only reads HTML, text and JSON"
        )
    if kind == "unknown" and re.match(rb"\s*(<!doctype html|<html)", body[:1024], re.I):
        kind = "html"
    text = body.decode(_charset(content_type, body, kind), errors="replace")
    return html_to_text(text) if kind == "html" else text


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    return text[
        :max_chars
    ] + f"\n\n[truncated: showing {max_chars} of {len(text)} characters]", True
