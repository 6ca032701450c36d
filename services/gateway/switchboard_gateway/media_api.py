"""``GET /api/media/{sha256}``: a stored file (an image the agent sent to a WebChat, an
attachment) streamed from the media service (``Media.Get``), behind the gateway token like
every ``/api`` route. Only what the media service accepted is served (images and audio, typed
from their bytes), with ``nosniff`` and a policy that runs nothing."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from switchboard.media import MediaClient, MediaNotFound, MediaServiceError

from .errors import ApiError

log = logging.getLogger(__name__)
router = APIRouter()
PREFIX = "/api/media/"
_SHA256 = re.compile(r"[0-9a-f]{64}")
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "private, max-age=3600",
}


def media_url(sha256: str) -> str:
    return PREFIX + sha256


@router.get("/api/media/{sha256}", include_in_schema=True)
async def get_media(sha256: str, request: Request) -> StreamingResponse:
    if not _SHA256.fullmatch(sha256):
        raise ApiError(400, "A media id is 64 lower-case hex digits (its sha256).", param="sha256")
    media: MediaClient = request.app.state.media
    chunks = media.chunks(sha256)
    try:
        ref, first = await anext(chunks)
    except StopAsyncIteration:
        raise ApiError(404, "No such file.", code="not_found") from None
    except MediaNotFound:
        raise ApiError(404, "No such file (or it has expired).", code="not_found") from None
    except MediaServiceError as exc:
        log.warning("media unavailable for GET /api/media: %s", type(exc).__name__)
        raise ApiError(503, "The media service is unavailable; try again shortly.") from exc
    mime = ref.mime if ref is not None and ref.mime else "application/octet-stream"

    async def body() -> AsyncIterator[bytes]:
        yield first
        async for _, data in chunks:
            yield data

    headers = dict(HEADERS)
    if ref is not None and ref.size:
        headers["Content-Length"] = str(ref.size)
    return StreamingResponse(body(), media_type=mime, headers=headers)
