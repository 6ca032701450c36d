"""WhatsApp files into the media service: a message's image, voice note, audio or document is a
``whatsapp:<kind>:<media-id>`` reference (:mod:`.whatsapp_format`); with the access token the
gateway asks Graph for its URL (``GET /<media-id>``), downloads it (``GET <url>``, the same
bearer token, no redirects, at most :data:`MAX_FILE_BYTES`) and ingests it: the reference
becomes a ``media:<sha256>?mime=...`` one. The token goes only to the Graph API base and to
Meta's media hosts (:data:`MEDIA_HOSTS`). When anything fails the message keeps its reference
(and is still published): the agent says an attachment could not be loaded. The token is never
logged."""

from __future__ import annotations

import logging

import httpx

from switchboard.media import MediaClient, MediaServiceError, media_ref
from switchboard.v1 import messages_pb2

from .whatsapp_format import parse_ref

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 100 * 1024 * 1024  # the Cloud API's largest (documents)
MEDIA_HOSTS = (".fbsbx.com", ".facebook.com", ".whatsapp.net")


class NotDownloaded(Exception):
    """Graph did not give the file (the text says why, never the token)."""


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host.lower(), parsed.port


def allowed(url: str, api_base: str) -> bool:
    """Whether the token may go to ``url``: the Graph API's own origin, or https to Meta's
    media hosts."""
    try:
        scheme, host, port = _origin(url)
        base = _origin(api_base)
    except httpx.InvalidURL:
        return False
    if (scheme, host, port) == base:
        return True
    return scheme == "https" and port is None and host.endswith(MEDIA_HOSTS)


async def download(client: httpx.AsyncClient, api_base: str, media_id: str) -> tuple[bytes, str]:
    """The file's bytes and type."""
    found = await client.get(f"{api_base}/{media_id}")
    if found.status_code != 200:
        raise NotDownloaded(f"graph answered {found.status_code} for the media id")
    info = found.json()
    url = info.get("url") if isinstance(info, dict) else None
    if not isinstance(url, str) or not allowed(url, api_base):
        raise NotDownloaded("graph gave no media URL it may be fetched from")
    mime = str(info.get("mime_type") or "").split(";")[0].strip()[:128]
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise NotDownloaded(f"the media host answered {response.status_code}")
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > MAX_FILE_BYTES:
                raise NotDownloaded("the file is too large")
    return bytes(data), mime or response.headers.get("content-type", "")


async def ingest(
    client: httpx.AsyncClient,
    api_base: str,
    media: MediaClient,
    message: messages_pb2.InboundMessage,
) -> None:
    """Replace the message's ``whatsapp:`` references by media ones where possible."""
    for n, ref in enumerate(message.media):
        found = parse_ref(ref)
        if found is None:
            continue
        kind, media_id, name = found
        try:
            data, mime = await download(client, api_base, media_id)
            stored = await media.ingest_bytes(data, name=name or kind, declared_mime=mime)
        except (httpx.HTTPError, ValueError, NotDownloaded, MediaServiceError) as exc:
            log.warning("whatsapp %s not ingested (%s)", kind, type(exc).__name__)
            continue
        message.media[n] = media_ref(stored.sha256, stored.mime or mime, name)
