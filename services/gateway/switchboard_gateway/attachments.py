"""Images of the OpenAI API's ``image_url`` content parts, ingested by the media service: a
data URL (``data:image/png;base64,...``) is decoded and sent as bytes, an http(s) URL is
fetched by the media service (through its SSRF guard). What the request carries on is a
``media:<sha256>?mime=...`` reference per image (:mod:`switchboard.media`).

Only the last user message's images are sent to the agent; earlier messages travel as text."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Sequence
from typing import Any

from switchboard.media import (
    MediaClient,
    MediaNotFound,
    MediaRefused,
    MediaServiceError,
    media_ref,
)

from .errors import ApiError

log = logging.getLogger(__name__)
MAX_IMAGES = 8
PARAM = "messages"


def image_urls(parts: Sequence[Any]) -> list[str]:
    """The URLs of the ``image_url`` parts (``{"url": ...}`` or a bare string)."""
    urls: list[str] = []
    for part in parts:
        if getattr(part, "type", None) != "image_url":
            continue
        value = (part.model_extra or {}).get("image_url")
        url = value.get("url") if isinstance(value, dict) else value
        if not isinstance(url, str) or not url:
            raise ApiError(400, "An image_url part needs image_url.url.", param=PARAM)
        urls.append(url)
    if len(urls) > MAX_IMAGES:
        raise ApiError(
            400, f"Too many images: {len(urls)}, at most {MAX_IMAGES} per message.", param=PARAM
        )
    return urls


def _data_url(url: str) -> bytes:
    head, sep, payload = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise ApiError(
            400, "A data URL image must be base64 (data:image/png;base64,...).", param=PARAM
        )
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ApiError(400, "The data URL's base64 is invalid.", param=PARAM) from exc


async def ingest_images(media: MediaClient, urls: Sequence[str]) -> list[str]:
    """A ``media:`` reference per image; 400 for an image the media service refuses, 503
    when it is unavailable."""
    refs: list[str] = []
    for n, url in enumerate(urls):
        try:
            if url.startswith("data:"):
                ref = await media.ingest_bytes(_data_url(url))
            elif url.startswith(("http://", "https://")):
                ref = await media.ingest_url(url)
            else:
                raise ApiError(400, "An image URL must be a data: or http(s) URL.", param=PARAM)
        except (MediaRefused, MediaNotFound) as exc:
            raise ApiError(400, f"Image {n + 1}: {exc}", code="invalid_image", param=PARAM) from exc
        except MediaServiceError as exc:
            log.warning("media ingest failed: %s", type(exc).__name__)
            raise ApiError(503, "The media service is unavailable; try again shortly.") from exc
        if not ref.mime.startswith("image/"):
            raise ApiError(
                400,
                f"Image {n + 1}: the file is {ref.mime}, not an image.",
                code="invalid_image",
                param=PARAM,
            )
        refs.append(media_ref(ref.sha256, ref.mime))
    return refs
