"""Files a reply part sends (``OutboundMessage.media`` holding ``media:<sha256>?mime=...``
references, checked by the agent's ``message`` tool): what each adapter needs to upload one.

An adapter's ``format`` names the file in its platform message (:func:`upload_spec`); its
``send`` loads the bytes from the media service (``Media.Get``) just before the upload
(:func:`load`), so a retried part reads them again and nothing is kept in the gateway. A file
the service no longer has (expired) is :class:`Undeliverable`; the service out of reach is
:class:`RetryLater`, like a platform's 5xx."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from switchboard.media import (
    MediaClient,
    MediaNotFound,
    MediaReference,
    MediaRefused,
    MediaServiceError,
    parse_media_ref,
)

from .base import RetryLater, Undeliverable

MEDIA_RETRY_S = 2.0
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
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def stored_refs(refs: Iterable[str]) -> list[MediaReference]:
    """The ``media:`` references among a part's media (links and others are not files)."""
    return [found for ref in refs if (found := parse_media_ref(ref)) is not None]


def file_name(ref: MediaReference) -> str:
    """A file name for the upload: the reference's name made safe, else ``<type>.<ext>``,
    with the extension of the stored type."""
    ext = EXTENSIONS.get(ref.mime, "bin")
    stem = _SAFE_NAME.sub("_", ref.name.rsplit(".", 1)[0]).strip("._")[:64]
    if not stem:
        stem = "image" if ref.is_image else "audio" if ref.is_audio else "file"
    return f"{stem}.{ext}"


def upload_spec(ref: MediaReference) -> dict[str, Any]:
    """The part of a platform message's payload that names the file (JSON-safe: payloads
    are plain data)."""
    return {"sha256": ref.sha256, "mime": ref.mime, "name": file_name(ref)}


@dataclass(frozen=True)
class Upload:
    name: str
    mime: str
    data: bytes


async def load(media: MediaClient | None, spec: dict[str, Any]) -> Upload:
    """The file's bytes from the media service, for an upload now."""
    if media is None:
        raise Undeliverable("a file cannot be sent: the gateway has no media service")
    try:
        stored, data = await media.get(str(spec["sha256"]))
    except (MediaNotFound, MediaRefused) as exc:
        raise Undeliverable(f"a file cannot be sent: {exc}") from None
    except MediaServiceError as exc:
        raise RetryLater(f"media: {exc}", MEDIA_RETRY_S) from None
    return Upload(str(spec["name"]), stored.mime or str(spec["mime"]), data)
