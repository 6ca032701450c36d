"""Telegram attachments into the media service: a photo, voice note or audio file (and a
document or video whose type is an image or audio) is fetched through the Bot API
(``getFile``, then ``GET /file/bot<token>/<file_path>``; the token never in a URL we log) and
ingested, and its ``telegram:<kind>:<file_id>`` reference in ``InboundMessage.media`` becomes a
``media:<sha256>?mime=...`` one. When anything fails the message keeps the original reference
(and is still published): the agent says an attachment could not be loaded."""

from __future__ import annotations

import logging
import re

import httpx

from switchboard.media import MediaClient, MediaServiceError, media_ref
from switchboard.v1 import messages_pb2

from .telegram_api import BotApi, BotApiError, describe
from .telegram_inbound import parse_media_ref

log = logging.getLogger(__name__)
# What bots may download through the Bot API (getFile's limit).
MAX_FILE_BYTES = 20 * 1024 * 1024
_FILE_PATH = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")
_ALWAYS = ("photo", "voice", "audio")


class FileTooLarge(Exception):
    """The file is over what a bot may download."""


def wanted(kind: str, mime: str) -> bool:
    return kind in _ALWAYS or mime.startswith(("image/", "audio/"))


async def download(api: BotApi, file_id: str) -> bytes:
    """The file's bytes (``getFile`` then the file URL), at most :data:`MAX_FILE_BYTES`."""
    found = await api.call("getFile", {"file_id": file_id})
    path = str(found.get("file_path", "")) if isinstance(found, dict) else ""
    if not _FILE_PATH.fullmatch(path):
        raise BotApiError(400, "getFile gave no usable file_path")
    size = found.get("file_size")
    if isinstance(size, int) and size > MAX_FILE_BYTES:
        raise FileTooLarge(f"{size} bytes")
    return await api.fetch_file(path, MAX_FILE_BYTES)


async def ingest_attachments(
    api: BotApi, media: MediaClient, message: messages_pb2.InboundMessage
) -> None:
    """Replace the message's Telegram references by media ones where possible (in place)."""
    for n, ref in enumerate(message.media):
        found = parse_media_ref(ref)
        if found is None or not wanted(found.kind, found.mime):
            continue
        try:
            data = await download(api, found.file_id)
            stored = await media.ingest_bytes(data, name=found.name, declared_mime=found.mime)
        except (BotApiError, FileTooLarge, httpx.HTTPError, MediaServiceError) as exc:
            log.warning(
                "telegram %s not ingested (%s); passed on as a reference",
                found.kind,
                describe(exc) if not isinstance(exc, MediaServiceError) else str(exc),
            )
            continue
        message.media[n] = media_ref(stored.sha256, stored.mime, found.name)
