"""Stored files of a reply part as Bot API uploads: ``sendPhoto`` for JPEG, PNG and WebP
images, ``sendVoice`` for Ogg voice notes, ``sendAudio`` for MP3 and M4A, ``sendDocument``
for the rest (a GIF, WAV...), each a ``multipart/form-data`` call with the bytes from the media
service (:mod:`.media_out`). The part's text rides as the first file's caption when it fits
Telegram's 1024-character caption (one piece); else the text goes first and the files after.
A photo over Telegram's 10 MB for photos goes as a document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switchboard.media import MediaReference

from .base import PlatformMessage
from .media_out import upload_spec
from .telegram_format import Piece

CAPTION_LIMIT = 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
AUDIO_TYPES = frozenset({"audio/mpeg", "audio/mp4"})
FIELDS = {
    "sendPhoto": "photo",
    "sendVoice": "voice",
    "sendAudio": "audio",
    "sendDocument": "document",
}


def method_for(mime: str) -> str:
    if mime in PHOTO_TYPES:
        return "sendPhoto"
    if mime == "audio/ogg":
        return "sendVoice"
    if mime in AUDIO_TYPES:
        return "sendAudio"
    return "sendDocument"


def caption_of(pieces: Sequence[Piece]) -> Piece | None:
    """The text as a caption, if it is one piece that fits."""
    if len(pieces) == 1 and len(pieces[0].plain.encode("utf-16-le")) // 2 <= CAPTION_LIMIT:
        return pieces[0]
    return None


def file_messages(
    base: dict[str, Any], files: Sequence[MediaReference], caption: Piece | None
) -> list[PlatformMessage]:
    """One upload per file; ``caption`` on the first."""
    messages = []
    for n, ref in enumerate(files):
        method = method_for(ref.mime)
        params = dict(base)
        payload: dict[str, Any] = {"method": method, "params": params, "upload": upload_spec(ref)}
        if n == 0 and caption is not None:
            params["caption"] = caption.html if caption.html is not None else caption.plain
            if caption.html is not None:
                params["parse_mode"] = "HTML"
            payload["plain"] = caption.plain
        messages.append(PlatformMessage(payload))
    return messages


def upload_method(method: str, size: int) -> str:
    """A photo too large for ``sendPhoto`` goes as a document."""
    return "sendDocument" if method == "sendPhoto" and size > MAX_PHOTO_BYTES else method
