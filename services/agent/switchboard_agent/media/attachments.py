"""Attachments of a lane item as content blocks of the user turn: an image (a ``media:``
reference) is resized by the media service to the model's limits (long edge
``SB_IMAGE_MAX_EDGE``, JPEG) and sent as an image block; a voice note or other audio is
transcribed and sent as ``[voice note] <text>``. Whatever cannot be had (the media service
down, a reference expired, transcription not configured, a reference of another kind) becomes
a short note in the turn, never a failed run."""

from __future__ import annotations

import base64
import logging
from typing import Any

from switchboard.media import (
    MediaClient,
    MediaNotConfigured,
    MediaNotFound,
    MediaReference,
    MediaServiceError,
    media_ref,
    parse_media_ref,
)

log = logging.getLogger(__name__)
Block = dict[str, Any]
JPEG_QUALITY = 85


def note(text: str) -> Block:
    return {"type": "text", "text": text}


class AgentMedia:
    def __init__(self, client: MediaClient, max_edge: int) -> None:
        self.client = client
        self.max_edge = max_edge

    async def image_block(self, sha256: str) -> Block:
        """The stored image, fitted to the model's limits, as an image block (raises
        :class:`MediaServiceError`)."""
        fitted = await self.client.transform(
            sha256, "resize", self.max_edge, self.max_edge, "jpeg", JPEG_QUALITY
        )
        ref, data = await self.client.get(fitted.sha256)
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": ref.mime or "image/jpeg",
                "data": base64.b64encode(data).decode("ascii"),
            },
        }

    async def blocks(self, refs: list[str]) -> list[Block]:
        """A block per attachment reference, in order."""
        return [block for ref in refs for block in await self._blocks(ref)]

    async def _blocks(self, ref: str) -> list[Block]:
        media = parse_media_ref(ref)
        if media is None:
            kind = ref.split(":", 2)[1] if ref.count(":") >= 2 else "file"
            return [note(f"[a {kind} was attached but could not be loaded]")]
        try:
            if media.is_image:
                # Its reference too: the image and message tools take it.
                image = await self.image_block(media.sha256)
                return [image, note(f"[image {media_ref(media.sha256, media.mime, media.name)}]")]
            if media.is_audio:
                text = await self.client.transcribe(media.sha256)
                return [note(f"[voice note] {text.strip() or '(no speech)'}")]
            return [note(f"[a {media.mime or 'file'} was attached; it cannot be shown]")]
        except MediaServiceError as exc:
            return [note(_failure(media, exc))]


def _failure(media: MediaReference, exc: MediaServiceError) -> str:
    what = "an image" if media.is_image else "a voice note" if media.is_audio else "a file"
    if isinstance(exc, MediaNotFound):
        return f"[{what} was attached but has expired]"
    if isinstance(exc, MediaNotConfigured):
        log.warning("media: %s", exc)
        return f"[{what} was attached but cannot be read here: {exc}]"
    log.warning("media unavailable for an attachment: %s", exc)
    return f"[{what} was attached but could not be loaded: {exc}]"
