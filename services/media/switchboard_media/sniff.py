"""The type of a file from its first bytes, never from a name or a header: a small table of
signatures for what the service accepts (images for the model, audio for transcription).
Anything else is refused (there is no ``application/octet-stream`` in the store)."""

from __future__ import annotations

from .errors import InvalidMedia

IMAGES = ("image/jpeg", "image/png", "image/gif", "image/webp")
AUDIO = ("audio/ogg", "audio/mpeg", "audio/mp4", "audio/wav", "audio/webm", "audio/flac")
# The file extension the transcription provider is told (it infers the codec from it).
EXTENSIONS = {
    "image/jpeg": "jpg",
    "image/png": "png",
    "image/gif": "gif",
    "image/webp": "webp",
    "audio/ogg": "ogg",
    "audio/mpeg": "mp3",
    "audio/mp4": "m4a",
    "audio/wav": "wav",
    "audio/webm": "webm",
    "audio/flac": "flac",
}
_M4A_BRANDS = (b"M4A ", b"M4B ", b"M4P ", b"isom", b"mp42", b"mp41", b"iso2", b"3gp4", b"3gp5")


def _mp3_frame(head: bytes) -> bool:
    """An MPEG audio frame header (sync, a known version and layer III/II)."""
    if len(head) < 2 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version, layer = (head[1] >> 3) & 0x3, (head[1] >> 1) & 0x3
    return version != 1 and layer in (1, 2)


def _webm(head: bytes) -> bool:
    return head.startswith(b"\x1a\x45\xdf\xa3") and b"webm" in head[:64]


def sniff(head: bytes) -> str:
    """The MIME type of a file that starts with ``head`` (at least its first 64 bytes);
    :class:`InvalidMedia` for a type the service does not accept."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head[4:8] == b"ftyp" and head[8:12] in _M4A_BRANDS:
        return "audio/mp4"
    if _webm(head):
        return "audio/webm"
    if head.startswith(b"ID3") or _mp3_frame(head):
        return "audio/mpeg"
    raise InvalidMedia(
        "unsupported file type: the service stores images (JPEG, PNG, GIF, WebP) and audio "
        "(Ogg/Opus, MP3, M4A, WAV, WebM, FLAC), recognised from their bytes"
    )
