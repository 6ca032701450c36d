"""Media references and the media service's client, shared by its callers (the gateway ingests
attachments, the agent turns them into content blocks and sends images back).

A stored file travels in ``InboundMessage.media`` / ``OutboundMessage.media`` as
``media:<sha256>?mime=<type>`` (the type is the one the service sniffed; ``name`` may follow,
for display). :func:`media_ref` writes one, :func:`parse_media_ref` reads one (``None`` for
any other reference, such as ``telegram:photo:<file_id>`` or a URL).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

import grpc

from .errors import SwitchboardError
from .v1 import media_pb2, media_pb2_grpc

SCHEME = "media"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MIME = re.compile(r"[a-z]+/[a-z0-9.+-]{1,64}")
MAX_NAME_CHARS = 128
PIECE = 1024 * 1024  # bytes per Ingest message (gRPC caps a message at 4 MB)
TIMEOUT_S = 30.0
TRANSCRIBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class MediaReference:
    sha256: str
    mime: str = ""
    name: str = ""

    @property
    def is_image(self) -> bool:
        return self.mime.startswith("image/")

    @property
    def is_audio(self) -> bool:
        return self.mime.startswith("audio/")


def media_ref(sha256: str, mime: str, name: str = "") -> str:
    """``media:<sha256>?mime=<type>[&name=<name>]``."""
    fields = {"mime": mime} if mime else {}
    if name:
        fields["name"] = name[:MAX_NAME_CHARS]
    return f"{SCHEME}:{sha256}" + (f"?{urlencode(fields)}" if fields else "")


def parse_media_ref(ref: str) -> MediaReference | None:
    """A ``media:`` reference, or None for anything else (or a malformed one)."""
    scheme, _, rest = ref.partition(":")
    sha, _, query = rest.partition("?")
    if scheme != SCHEME or not _SHA256.fullmatch(sha):
        return None
    fields = parse_qs(query)
    mime = fields.get("mime", [""])[0]
    return MediaReference(
        sha,
        mime if _MIME.fullmatch(mime) else "",
        fields.get("name", [""])[0][:MAX_NAME_CHARS],
    )


class MediaServiceError(SwitchboardError):
    """A call to the media service failed; the message is readable by a user or a model."""


class MediaUnavailable(MediaServiceError):
    """The media service (or what it depends on) did not answer."""


class MediaRefused(MediaServiceError):
    """The media service refused the input (bad or unsupported file, over the cap, a URL the
    guard refuses); the message is its reason."""


class MediaNotFound(MediaServiceError):
    """No such file, or it expired."""


class MediaNotConfigured(MediaServiceError):
    """The operation needs settings the media service lacks (transcription)."""


def _error(exc: grpc.aio.AioRpcError) -> MediaServiceError:
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.NOT_FOUND:
        return MediaNotFound(details or "the file is not stored (or expired)")
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return MediaRefused(details or "the file was refused")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return MediaNotConfigured(details or "the media service is not configured for this")
    return MediaUnavailable(f"the media service is unavailable ({code.name})")


def _requests(
    header: media_pb2.MediaIngestHeader, data: bytes
) -> Iterable[media_pb2.MediaIngestRequest]:
    yield media_pb2.MediaIngestRequest(header=header, data=data[:PIECE])
    for start in range(PIECE, len(data), PIECE):
        yield media_pb2.MediaIngestRequest(data=data[start : start + PIECE])


class MediaClient:
    """The media service's gRPC API with deadlines, its failures as :class:`MediaServiceError`."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = media_pb2_grpc.MediaStub(channel)

    async def ingest_bytes(
        self, data: bytes, name: str = "", declared_mime: str = ""
    ) -> media_pb2.MediaRef:
        header = media_pb2.MediaIngestHeader(name=name, declared_mime=declared_mime)
        try:
            ref: media_pb2.MediaRef = await self.stub.Ingest(
                iter(_requests(header, data)), timeout=TIMEOUT_S
            )
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        return ref

    async def ingest_url(self, url: str, name: str = "") -> media_pb2.MediaRef:
        header = media_pb2.MediaIngestHeader(url=url, name=name)
        request = media_pb2.MediaIngestRequest(header=header)
        try:
            ref: media_pb2.MediaRef = await self.stub.Ingest(iter([request]), timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        return ref

    async def chunks(self, sha256: str) -> AsyncIterator[tuple[media_pb2.MediaRef | None, bytes]]:
        """The stored file: ``(ref, data)`` for the first chunk, ``(None, data)`` after."""
        call = self.stub.Get(media_pb2.MediaGetRequest(sha256=sha256), timeout=TIMEOUT_S)
        try:
            async for chunk in call:
                yield (chunk.ref if chunk.HasField("ref") else None), chunk.data
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None

    async def head(self, sha256: str) -> media_pb2.MediaRef:
        """The stored file's reference (its type and size) without its bytes: the first chunk
        of ``Get``, the rest of the stream cancelled. :class:`MediaNotFound` when unknown."""
        call = self.stub.Get(media_pb2.MediaGetRequest(sha256=sha256), timeout=TIMEOUT_S)
        try:
            chunk = await call.read()
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        finally:
            call.cancel()
        if chunk is grpc.aio.EOF or not chunk.HasField("ref"):
            raise MediaUnavailable("the media service answered without the file's reference")
        ref: media_pb2.MediaRef = chunk.ref
        return ref

    async def get(self, sha256: str) -> tuple[media_pb2.MediaRef, bytes]:
        found = media_pb2.MediaRef()
        body = bytearray()
        async for ref, data in self.chunks(sha256):
            if ref is not None:
                found = ref
            body += data
        return found, bytes(body)

    async def transform(
        self,
        sha256: str,
        operation: str,
        max_width: int = 0,
        max_height: int = 0,
        image_format: str = "",
        quality: int = 0,
    ) -> media_pb2.MediaRef:
        request = media_pb2.MediaTransformRequest(
            sha256=sha256,
            operation=operation,
            max_width=max_width,
            max_height=max_height,
            format=image_format,
            quality=quality,
        )
        try:
            ref: media_pb2.MediaRef = await self.stub.Transform(request, timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        return ref

    async def transcribe(self, sha256: str, language: str = "") -> str:
        request = media_pb2.MediaTranscribeRequest(sha256=sha256, language=language)
        try:
            reply: media_pb2.MediaTranscribeResponse = await self.stub.Transcribe(
                request, timeout=TRANSCRIBE_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        return reply.text
