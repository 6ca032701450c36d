"""gRPC ``Media``: requests checked and turned into calls of :class:`.Media`; its errors (kinds
of :mod:`switchboard.errors`) into statuses a caller can act on by :func:`.grpc_errors`, never a
stack trace or internal text."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import grpc

from switchboard.errors_map import grpc_errors
from switchboard.v1 import media_pb2, media_pb2_grpc

from .errors import InvalidMedia
from .media import Media
from .metrics import INGESTED
from .store import Stored

log = logging.getLogger(__name__)
statuses = grpc_errors("the media service failed")
# How long the rest of an upload over the cap is read (and dropped, never buffered) before the
# refusal: a status sent while the client is still writing reaches it as a failed write
# (INTERNAL "SendMessageOperation" from grpc-aio) instead of RESOURCE_EXHAUSTED. An upload that
# has not ended by then is cut with the same status.
DRAIN_S = 10.0


def ref_of(stored: Stored) -> media_pb2.MediaRef:
    return media_pb2.MediaRef(
        sha256=stored.sha256,
        mime=stored.mime,
        size=stored.size,
        width=stored.width,
        height=stored.height,
        expires_at_ms=stored.expires_at_ms,
    )


class MediaService(media_pb2_grpc.MediaServicer):
    def __init__(self, media: Media) -> None:
        self.media = media

    @statuses
    async def Ingest(
        self,
        request_iterator: AsyncIterator[media_pb2.MediaIngestRequest],
        context: grpc.aio.ServicerContext,
    ) -> media_pb2.MediaRef:
        header: media_pb2.MediaIngestHeader | None = None
        body = bytearray()
        try:
            async for request in request_iterator:
                if header is None:
                    header = request.header
                elif request.HasField("header"):
                    raise InvalidMedia("the header goes in the first message only")
                if request.data and header.url:
                    raise InvalidMedia("an ingest of a URL takes no bytes")
                if len(body) + len(request.data) > self.media.max_bytes:
                    await drain(request_iterator, DRAIN_S)  # before buffering more than the cap
                    raise self.media.too_large()
                body += request.data
            if header is None:
                raise InvalidMedia("no header and no bytes were sent")
            if header.ttl_s < 0:
                raise InvalidMedia("ttl_s must be >= 0")
            data = await self.media.fetch(header.url) if header.url else bytes(body)
            stored = await self.media.ingest(data, int(header.ttl_s))
        except Exception as exc:
            source = "url" if header is not None and header.url else "bytes"
            INGESTED.labels(source, type(exc).__name__).inc()
            raise
        INGESTED.labels("url" if header.url else "bytes", "ok").inc()
        log.info("ingested", extra={"sha256": stored.sha256, "mime": stored.mime})
        return ref_of(stored)

    @statuses
    async def Get(
        self, request: media_pb2.MediaGetRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[media_pb2.MediaChunk]:
        stored = await self.media.store.find(request.sha256)
        first = True
        async for data in self.media.store.chunks(stored):
            yield media_pb2.MediaChunk(ref=ref_of(stored) if first else None, data=data)
            first = False

    @statuses
    async def Transform(
        self, request: media_pb2.MediaTransformRequest, context: grpc.aio.ServicerContext
    ) -> media_pb2.MediaRef:
        stored = await self.media.transform(
            request.sha256,
            request.operation,
            request.max_width,
            request.max_height,
            request.format.lower(),
            request.quality,
        )
        return ref_of(stored)

    @statuses
    async def Transcribe(
        self, request: media_pb2.MediaTranscribeRequest, context: grpc.aio.ServicerContext
    ) -> media_pb2.MediaTranscribeResponse:
        if len(request.language) > 16 or len(request.prompt) > 2000:
            raise InvalidMedia("language is at most 16 characters, prompt at most 2000")
        text = await self.media.transcribe(request.sha256, request.language, request.prompt)
        return media_pb2.MediaTranscribeResponse(
            text=text, language=request.language, model=self.media.transcriber.model
        )


async def drain(requests: AsyncIterator[media_pb2.MediaIngestRequest], seconds: float) -> None:
    """Read what is left of a client's stream and drop it, for at most ``seconds``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            async for _ in requests:
                pass
