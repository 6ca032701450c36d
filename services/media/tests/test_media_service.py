"""The media service through its gRPC API, against real PostgreSQL and nats-server, with the
transcriber talking to a fake OpenAI-compatible server and URLs served by a local one."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest
from PIL import Image

from switchboard.media import MediaNotConfigured, MediaNotFound
from switchboard.v1 import media_pb2
from tests.fakes.transcription import FakeTranscription
from tests.fakes.web import Reply, WebServer
from tests.support import media_files

from .media_harness import RunningMedia, media_service


@pytest.fixture
def transcription() -> Iterator[FakeTranscription]:
    with FakeTranscription(require_key="tr-key") as fake:
        yield fake


@pytest.fixture
async def media(
    nats_url: str, database_url: str, tmp_path: Path, transcription: FakeTranscription
) -> AsyncIterator[RunningMedia]:
    async with media_service(
        nats_url,
        database_url,
        tmp_path,
        SB_MEDIA_FETCH_ALLOW_CIDRS='["127.0.0.0/8"]',
        SB_TRANSCRIPTION_BASE_URL=transcription.base_url,
        SB_TRANSCRIPTION_API_KEY="tr-key",
        SB_TRANSCRIPTION_MODEL="whisper-test",
    ) as m:
        yield m


async def rows(database_url: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return list(await conn.fetch("SELECT * FROM media.files ORDER BY created_at"))
    finally:
        await conn.close()


def pieces(
    data: bytes, size: int = 100_000, *, url: str = "", name: str = "", declared_mime: str = ""
) -> Iterator[media_pb2.MediaIngestRequest]:
    header = media_pb2.MediaIngestHeader(url=url, name=name, declared_mime=declared_mime)
    yield media_pb2.MediaIngestRequest(header=header, data=data[:size])
    for start in range(size, len(data), size):
        yield media_pb2.MediaIngestRequest(data=data[start : start + size])


async def test_ingest_sniffs_the_bytes_and_dedupes(media: RunningMedia, database_url: str) -> None:
    photo = media_files.jpeg(64, 32)
    # A name and a declared type that lie: the stored type is what the bytes are.
    ref = await media.stub.Ingest(pieces(photo, 1000, name="notes.txt", declared_mime="text/plain"))
    assert ref.sha256 == hashlib.sha256(photo).hexdigest()
    assert (ref.mime, ref.size, ref.width, ref.height) == ("image/jpeg", len(photo), 64, 32)
    again = await media.client.ingest_bytes(photo, name="other.png")
    assert again.sha256 == ref.sha256 and again.expires_at_ms >= ref.expires_at_ms
    assert [p.name for p in media.files()] == [ref.sha256]
    assert len(await rows(database_url)) == 1
    assert (media.root.stat().st_mode & 0o777) == 0o700
    assert (media.files()[0].stat().st_mode & 0o777) == 0o600


async def test_get_streams_the_bytes_back(media: RunningMedia) -> None:
    big = media_files.noise_jpeg(1200, 900)  # several chunks of the store's 256 KiB
    ref = await media.client.ingest_bytes(big)
    got_ref, body = await media.client.get(ref.sha256)
    assert body == big and got_ref.mime == "image/jpeg"
    chunks = [c async for c in media.stub.Get(media_pb2.MediaGetRequest(sha256=ref.sha256))]
    assert len(chunks) > 1 and chunks[0].HasField("ref") and not chunks[1].HasField("ref")


async def test_ingest_a_url(media: RunningMedia) -> None:
    photo = media_files.png(20, 10)
    # The server claims HTML: the type comes from the bytes.
    with WebServer("127.0.0.1", {"/cat.html": Reply(body=photo, content_type="text/html")}) as site:
        ref = await media.client.ingest_url(site.url("/cat.html"))
        assert site.requests[0].headers["accept"] == "*/*"
    assert (ref.mime, ref.width, ref.height) == ("image/png", 20, 10)
    assert ref.sha256 == hashlib.sha256(photo).hexdigest()


async def test_transform_applies_orientation_and_strips_metadata(media: RunningMedia) -> None:
    # Orientation 6: the camera was turned; the upright picture is 32 wide, 64 high, with the
    # red half on top.
    photo = media_files.jpeg(64, 32, orientation=6, gps=True)
    source = await media.client.ingest_bytes(photo)
    made = await media.client.transform(source.sha256, "resize", max_width=16, max_height=16)
    assert (made.mime, made.width, made.height) == ("image/jpeg", 8, 16)
    _, body = await media.client.get(made.sha256)
    image = Image.open(io.BytesIO(body))
    assert image.size == (8, 16)
    assert not image.getexif() and "exif" not in image.info
    assert b"TestCam" not in body and b"Exif" not in body
    rgb = image.convert("RGB")
    top, bottom = rgb.getpixel((4, 1)), rgb.getpixel((4, 14))
    assert isinstance(top, tuple) and isinstance(bottom, tuple)
    assert top[0] > 150 and top[2] < 100, top  # red on top
    assert bottom[2] > 150 and bottom[0] < 100, bottom  # blue below


async def test_convert_and_thumbnail(media: RunningMedia) -> None:
    source = await media.client.ingest_bytes(media_files.jpeg(800, 600))
    png = await media.client.transform(source.sha256, "convert", image_format="png")
    assert (png.mime, png.width, png.height) == ("image/png", 800, 600)
    thumb = await media.client.transform(source.sha256, "thumbnail", image_format="webp")
    assert (thumb.mime, thumb.width, thumb.height) == ("image/webp", 320, 240)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await media.stub.Transform(
            media_pb2.MediaTransformRequest(sha256=source.sha256, operation="resize")
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_width or max_height" in (refused.value.details() or "")


async def test_transcribe_through_the_provider(
    media: RunningMedia, transcription: FakeTranscription
) -> None:
    voice = media_files.ogg_voice()
    transcription.texts[hashlib.sha256(voice).hexdigest()] = "buy milk and eggs"
    ref = await media.client.ingest_bytes(voice, name="voice.jpg")  # the name lies
    assert ref.mime == "audio/ogg" and ref.width == 0
    reply = await media.stub.Transcribe(
        media_pb2.MediaTranscribeRequest(sha256=ref.sha256, language="en")
    )
    assert (reply.text, reply.language, reply.model) == ("buy milk and eggs", "en", "whisper-test")
    (upload,) = transcription.seen()
    assert (upload.model, upload.language, upload.size) == ("whisper-test", "en", len(voice))
    assert upload.filename == "audio.ogg" and upload.content_type == "audio/ogg"
    photo = await media.client.ingest_bytes(media_files.png())
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await media.stub.Transcribe(media_pb2.MediaTranscribeRequest(sha256=photo.sha256))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_transcription_not_configured_says_what_to_set(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with media_service(nats_url, database_url, tmp_path) as m:
        ref = await m.client.ingest_bytes(media_files.ogg_voice())
        with pytest.raises(MediaNotConfigured, match="SB_TRANSCRIPTION_API_KEY"):
            await m.client.transcribe(ref.sha256)


async def test_expired_files_are_cleaned_up(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with media_service(
        nats_url, database_url, tmp_path, SB_MEDIA_TTL_S="1", SB_MEDIA_CLEANUP_INTERVAL_S="0.2"
    ) as m:
        ref = await m.client.ingest_bytes(media_files.png())
        assert m.files()
        for _ in range(200):
            if not m.files() and not await rows(database_url):
                break
            await asyncio.sleep(0.1)
        assert not m.files() and not await rows(database_url)
        with pytest.raises(MediaNotFound):
            await m.client.get(ref.sha256)


async def test_unknown_sha_is_not_found(media: RunningMedia) -> None:
    for sha in ("0" * 64, "not-a-sha"):
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await media.stub.Transform(
                media_pb2.MediaTransformRequest(sha256=sha, operation="thumbnail")
            )
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (media_files.truncated_jpeg, "truncated"),
        (media_files.zip_polyglot, "after the end of its image"),
        (media_files.html_polyglot, "polyglot"),
        (media_files.png_bomb, "decompression bomb"),
        (lambda: b"%PDF-1.7\n" + b"x" * 100, "unsupported file type"),
        (lambda: b"", "empty"),
    ],
)
async def test_bad_files_are_refused_and_nothing_is_stored(
    media: RunningMedia, database_url: str, make: object, why: str
) -> None:
    assert callable(make)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await media.stub.Ingest(pieces(make()))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert why in (refused.value.details() or ""), refused.value.details()
    assert media.files() == [] and await rows(database_url) == []
    ok = await media.client.ingest_bytes(media_files.png())  # the service still serves
    assert ok.mime == "image/png"


async def test_a_private_address_is_refused_without_the_allow_list(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    photo = media_files.png()
    with WebServer("127.0.0.1", {"/p.png": Reply(body=photo, content_type="image/png")}) as site:
        async with media_service(nats_url, database_url, tmp_path) as m:
            for url in (site.url("/p.png"), "http://169.254.169.254/latest/meta-data/"):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await m.stub.Ingest(pieces(b"", url=url))
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "refused" in (refused.value.details() or "")
            assert site.requests == []
            assert m.files() == [] and await rows(database_url) == []


async def test_over_the_cap_is_refused_while_streaming(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    big = media_files.noise_jpeg(600, 400)
    cap = len(big) // 2
    with WebServer("127.0.0.1", {"/big.jpg": Reply(body=big, content_type="image/jpeg")}) as site:
        async with media_service(
            nats_url,
            database_url,
            tmp_path,
            SB_MEDIA_MAX_BYTES=str(cap),
            SB_MEDIA_FETCH_ALLOW_CIDRS='["127.0.0.0/8"]',
        ) as m:
            # Many small pieces after the cap: the client is still writing when the server
            # decides, and must still be told why (not a failed write reported as INTERNAL).
            uploads = [pieces(big * 8, 4096) for _ in range(5)]
            for request in (*uploads, pieces(b"", url=site.url("/big.jpg"))):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await m.stub.Ingest(request)
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "larger than the" in (refused.value.details() or "")
            assert m.files() == [] and await rows(database_url) == []
            small = await m.client.ingest_bytes(media_files.png())
            assert small.mime == "image/png"
