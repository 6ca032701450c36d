"""Where an image's format says the file ends, and what may follow: nothing. A file that goes
on after its image (a ZIP, a script, a PDF appended to a JPEG: a polyglot) or that holds
markup another program would run is refused, as is one that ends before its structure does
(truncated). Pillow decodes the pixels afterwards (:mod:`.images`); this checks the container.

JPEG: the marker segments are walked from SOI to EOI (entropy-coded data skipped to the next
marker); a second JPEG after the first (the multi-picture format of some cameras) is allowed.
PNG: the chunks up to IEND. GIF: the blocks up to the trailer. WebP: the RIFF length."""

from __future__ import annotations

import re

from .errors import InvalidMedia

# Bytes a file may be padded with after its end.
_PADDING = b"\x00\t\n\r "
# Markup or documents a browser, a PDF reader or an interpreter would find in a polyglot.
# (Lower-case; searched for in the lower-cased file, one literal at a time: a few ms for 5 MB.)
_ACTIVE = (b"<script", b"<html", b"<?php", b"<svg", b"%pdf-", b"<!doctype")
# A JPEG marker after entropy-coded data: 0xFF then neither a stuffed zero, a restart marker
# nor another 0xFF (a fill byte: the marker follows the last one).
_JPEG_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
_MAX_PICTURES = 8


def _jpeg_end(data: bytes, start: int) -> int | None:
    """The offset after the EOI of the JPEG that starts at ``start``; None if truncated."""
    i, n = start + 2, len(data)
    while i < n:
        if data[i] != 0xFF:
            return None
        while i < n and data[i] == 0xFF:
            i += 1
        if i >= n:
            return None
        marker = data[i]
        i += 1
        if marker == 0xD9:
            return i
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            continue  # a marker without a segment
        if i + 2 > n:
            return None
        length = int.from_bytes(data[i : i + 2], "big")
        if length < 2:
            return None
        i += length
        if marker == 0xDA:  # start of scan: skip the entropy-coded data
            found = _JPEG_MARKER.search(data, i)
            if found is None:
                return None
            i = found.start()  # at the 0xFF before the marker
    return None


def _png_end(data: bytes) -> int | None:
    i, n = 8, len(data)
    while i + 12 <= n:
        length = int.from_bytes(data[i : i + 4], "big")
        kind = data[i + 4 : i + 8]
        i += 12 + length
        if kind == b"IEND":
            return i if i <= n else None
    return None


def _gif_sub_blocks(data: bytes, i: int) -> int | None:
    n = len(data)
    while i < n:
        size = data[i]
        i += 1 + size
        if size == 0:
            return i
    return None


def _gif_end(data: bytes) -> int | None:
    n = len(data)
    if n < 13:
        return None
    flags = data[10]
    i = 13 + (3 * (2 << (flags & 7)) if flags & 0x80 else 0)
    while i < n:
        block = data[i]
        if block == 0x3B:
            return i + 1
        if block == 0x21:  # extension: label, then sub-blocks
            end = _gif_sub_blocks(data, i + 2)
        elif block == 0x2C:  # image: descriptor, local colour table, LZW size, sub-blocks
            if i + 10 > n:
                return None
            local = data[i + 9]
            j = i + 10 + (3 * (2 << (local & 7)) if local & 0x80 else 0)
            end = _gif_sub_blocks(data, j + 1)
        else:
            return None
        if end is None:
            return None
        i = end
    return None


def _webp_end(data: bytes) -> int | None:
    size = int.from_bytes(data[4:8], "little")
    end = 8 + size + (size & 1)
    return end if end <= len(data) else None


def check_structure(data: bytes, mime: str) -> None:
    """:class:`InvalidMedia` unless ``data`` is one whole image of type ``mime`` and nothing
    else (padding aside)."""
    lowered = data.lower()
    if any(marker in lowered for marker in _ACTIVE):
        raise InvalidMedia(
            "the file holds markup or a document besides the image (a polyglot): refused"
        )
    if mime == "image/jpeg":
        end = _jpeg_end(data, 0)
        pictures = 1
        while end is not None and data[end:].startswith(b"\xff\xd8\xff"):
            pictures += 1
            if pictures > _MAX_PICTURES:
                break
            end = _jpeg_end(data, end)
    elif mime == "image/png":
        end = _png_end(data)
    elif mime == "image/gif":
        end = _gif_end(data)
    else:
        end = _webp_end(data)
    if end is None:
        raise InvalidMedia(f"the {mime.removeprefix('image/')} image is truncated or damaged")
    rest = data[end:]
    if rest.strip(_PADDING):
        raise InvalidMedia(
            f"the file goes on for {len(rest)} bytes after the end of its image "
            "(a polyglot or a damaged file): refused"
        )
