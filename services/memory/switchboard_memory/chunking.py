"""Documents into chunks: text out of Markdown, plain text, PDF (pypdf) and HTML (Beautiful
Soup), then recursive splitting (~1000 characters, 200 of overlap) at the largest break that
fits: a heading, a blank line, a line, a sentence, a word. Each chunk knows its lines, so a
search hit can be opened with ``Get`` where it starts."""

from __future__ import annotations

import io
import mimetypes
from dataclasses import dataclass

from .errors import InvalidRequest

_SEPARATORS = ("\n# ", "\n## ", "\n### ", "\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")
TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown", "text/csv", "application/json"}


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int


def mime_of(path: str, given: str) -> str:
    if given:
        return given.split(";", 1)[0].strip().lower()
    if path.lower().endswith((".md", ".markdown")):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "text/plain"


def extract_text(data: bytes, mime: str) -> str:
    """The text of a document; :class:`InvalidRequest` for what cannot be read."""
    if mime == "application/pdf":
        return _pdf_text(data)
    if mime in ("text/html", "application/xhtml+xml"):
        return _html_text(data)
    if mime in TEXT_TYPES or mime.startswith("text/"):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidRequest(f"the document is not UTF-8 text ({mime})") from None
    raise InvalidRequest(
        f"unsupported document type {mime!r}: Markdown, plain text, PDF and HTML are"
    )


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise InvalidRequest(f"the PDF cannot be read ({type(exc).__name__})") from None
    return "\n\n".join(p.strip() for p in pages if p.strip())


def _html_text(data: bytes) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return "\n".join(line for line in lines if line)


def _pieces(text: str, start: int, size: int, separators: tuple[str, ...]) -> list[tuple[int, int]]:
    """``text`` (found at ``start`` in the document) as spans of at most ``size`` characters,
    cut at the first separator that makes them fit (separators stay with the piece before)."""
    if len(text) <= size:
        return [(start, start + len(text))] if text else []
    for i, sep in enumerate(separators):
        if sep not in text:
            continue
        spans: list[tuple[int, int]] = []
        offset = 0
        for part in text.split(sep):
            piece_end = offset + len(part) + len(sep)
            piece = text[offset:piece_end]
            spans.extend(_pieces(piece, start + offset, size, separators[i + 1 :]))
            offset = piece_end
        return spans
    return [(start + o, start + min(o + size, len(text))) for o in range(0, len(text), size)]


def split(text: str, size: int = 1000, overlap: int = 200) -> list[Chunk]:
    """Chunks of at most ``size`` characters; each repeats up to ``overlap`` characters of the
    end of the one before, in whole pieces."""
    spans = _pieces(text, 0, size, _SEPARATORS)
    line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    chunks: list[Chunk] = []
    i = 0
    while i < len(spans):
        first = i
        end = spans[i][1]
        i += 1
        while i < len(spans) and spans[i][1] - spans[first][0] <= size:
            end = spans[i][1]
            i += 1
        begin = spans[first][0]
        body = text[begin:end].strip()
        if body:
            chunks.append(Chunk(body, _line(line_starts, begin), _line(line_starts, end - 1)))
        if i < len(spans):  # back up over the last pieces that fit in the overlap
            back = i
            while back - 1 > first and end - spans[back - 1][0] <= overlap:
                back -= 1
            i = back
    return chunks


def _line(starts: list[int], offset: int) -> int:
    """1-based line of a character offset (binary search over the line starts)."""
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= max(offset, 0):
            lo = mid
        else:
            hi = mid - 1
    return lo + 1
