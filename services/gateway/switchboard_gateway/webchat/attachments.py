"""Attachments of WebChat's ``send``: each file arrives in base64 inside the frame (so within
``SB_WEBCHAT_MAX_FRAME_BYTES``), is ingested by the media service (which sniffs and checks it:
images and audio only) and travels on as a ``media:<sha256>?mime=...`` reference, which the
agent turns into an image block or a transcript."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Sequence

from switchboard.media import MediaClient, MediaRefused, MediaServiceError, media_ref

from . import protocol

log = logging.getLogger(__name__)


class AttachmentError(Exception):
    """An attachment not taken: the WebChat error code and a message for the page."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def ingest_attachments(
    media: MediaClient | None, attachments: Sequence[protocol.Attachment]
) -> list[str]:
    """A reference per attachment, in order; :class:`AttachmentError` for one that is refused
    (the message is not sent then)."""
    if not attachments:
        return []
    if media is None:
        raise AttachmentError(protocol.UNAVAILABLE, "Attachments are not available here.")
    refs = []
    for n, attachment in enumerate(attachments, 1):
        try:
            data = base64.b64decode(attachment.data, validate=True)
        except (binascii.Error, ValueError):
            raise AttachmentError(
                protocol.BAD_ATTACHMENT, f"Attachment {n}: the data is not base64."
            ) from None
        try:
            stored = await media.ingest_bytes(data, attachment.name, attachment.mime)
        except MediaRefused as exc:
            raise AttachmentError(protocol.BAD_ATTACHMENT, f"Attachment {n}: {exc}") from None
        except MediaServiceError as exc:
            log.warning("webchat attachment not ingested: %s", type(exc).__name__)
            raise AttachmentError(
                protocol.UNAVAILABLE, "The media service is unavailable; try again shortly."
            ) from None
        refs.append(media_ref(stored.sha256, stored.mime, attachment.name))
    return refs
