"""What the service does, apart from gRPC: ingest (sniff, check, store), fetch a URL through
the SSRF guard, transform an image, transcribe audio. Decoding and encoding run in threads,
a few at a time (they hold the GIL little and memory much)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from switchboard.net.errors import FetchError, Refused
from switchboard.net.errors import TooLarge as BodyTooLarge
from switchboard.net.fetch import Fetcher, FetchLimits, size_text
from switchboard.net.ssrf import SsrfGuard

from . import images
from .config import MediaSettings
from .errors import InvalidMedia, TooLarge
from .metrics import INGEST_BYTES, TRANSCRIPTIONS, TRANSFORM_SECONDS
from .sniff import AUDIO, IMAGES, sniff
from .store import MediaStore, Stored
from .transcribe import Transcriber

log = logging.getLogger(__name__)
T = TypeVar("T")


def _status_ok(content_type: str, status: int) -> None:
    if status >= 400:
        raise FetchError(f"the server answered {status}")


class Media:
    def __init__(
        self, settings: MediaSettings, store: MediaStore, transcriber: Transcriber
    ) -> None:
        self.store = store
        self.transcriber = transcriber
        self.max_bytes = settings.media_max_bytes
        self.max_pixels = settings.media_max_pixels
        self.fetcher = Fetcher(
            SsrfGuard(settings.media_fetch_allow_cidrs),
            FetchLimits(
                max_bytes=settings.media_max_bytes,
                max_redirects=settings.media_fetch_max_redirects,
                read_timeout_s=settings.media_fetch_timeout_s,
            ),
            accept="*/*",
        )
        self._cpu = asyncio.Semaphore(2)

    def too_large(self) -> TooLarge:
        return TooLarge(f"the file is larger than the {size_text(self.max_bytes)} limit")

    async def _in_thread(self, work: Callable[..., T], *args: object) -> T:
        async with self._cpu:
            return await asyncio.to_thread(work, *args)

    async def ingest(self, data: bytes, ttl_s: int = 0) -> Stored:
        """Sniff, check (images decoded fully) and store ``data``."""
        if not data:
            raise InvalidMedia("the file is empty")
        if len(data) > self.max_bytes:
            raise self.too_large()
        mime = sniff(data[:64])
        width = height = 0
        if mime in IMAGES:
            width, height = await self._in_thread(images.verify, data, mime, self.max_pixels)
        stored = await self.store.put(data, mime, width, height, ttl_s)
        INGEST_BYTES.inc(len(data))
        return stored

    async def fetch(self, url: str) -> bytes:
        """The body at ``url``, through the SSRF guard and the size cap."""
        try:
            fetched = await self.fetcher.fetch(url, _status_ok)
        except BodyTooLarge as exc:
            raise self.too_large() from exc
        except Refused as exc:
            raise InvalidMedia(f"the URL was refused: {exc.reason}") from exc
        except FetchError as exc:
            raise InvalidMedia(f"the URL could not be fetched: {exc}") from exc
        return fetched.body

    async def transform(
        self,
        sha256: str,
        operation: str,
        max_width: int,
        max_height: int,
        image_format: str,
        quality: int,
    ) -> Stored:
        source = await self.store.find(sha256)
        if source.mime not in IMAGES:
            raise InvalidMedia(f"only images can be transformed, not {source.mime}")
        data = await self.store.read(source)
        start = time.perf_counter()
        made = await self._in_thread(
            images.transform,
            data,
            source.mime,
            operation,
            max_width,
            max_height,
            image_format,
            quality,
            self.max_pixels,
        )
        TRANSFORM_SECONDS.observe(time.perf_counter() - start)
        return await self.store.put(made.data, made.mime, made.width, made.height)

    async def transcribe(self, sha256: str, language: str, prompt: str) -> str:
        source = await self.store.find(sha256)
        if source.mime not in AUDIO:
            raise InvalidMedia(f"only audio can be transcribed, not {source.mime}")
        data = await self.store.read(source)
        try:
            text = await self.transcriber.transcribe(data, source.mime, language, prompt)
        except Exception:
            TRANSCRIPTIONS.labels("error").inc()
            raise
        TRANSCRIPTIONS.labels("ok").inc()
        return text
