"""Files for media tests and the benchmark, made here with Pillow (nothing downloaded): photos
with EXIF orientation and GPS, noise that compresses like a real photo, and the bad ones (a
truncated JPEG, polyglots, a decompression bomb, audio headers)."""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib

from PIL import Image

GPS_IFD = 0x8825
ORIENTATION = 0x0112


def jpeg(
    width: int = 64,
    height: int = 32,
    *,
    orientation: int = 0,
    gps: bool = False,
    colour: tuple[int, int, int] = (200, 30, 30),
    quality: int = 90,
) -> bytes:
    """A JPEG, its left half ``colour`` and its right half blue (so that an orientation
    applied can be seen), with an EXIF orientation tag and GPS position when asked."""
    image = Image.new("RGB", (width, height), (20, 20, 220))
    image.paste(Image.new("RGB", (width // 2, height), colour), (0, 0))
    exif = Image.Exif()
    exif[0x010F] = "TestCam"  # Make
    if orientation:
        exif[ORIENTATION] = orientation
    if gps:
        exif[GPS_IFD] = {1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)}
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality, exif=exif.tobytes())
    return out.getvalue()


def png(width: int = 16, height: int = 16, colour: tuple[int, int, int] = (0, 128, 0)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def noise_jpeg(width: int = 4000, height: int = 3000, seed: int = 12) -> bytes:
    """A photo-like JPEG: smooth gradients plus noise (compresses to a few MB at 12 MP)."""
    rng = random.Random(seed)
    small = Image.new("RGB", (width // 50, height // 50))
    small.putdata(
        [
            (rng.randrange(256), rng.randrange(256), rng.randrange(256))
            for _ in range(small.width * small.height)
        ]
    )
    base = small.resize((width, height), Image.Resampling.BICUBIC)
    noise = Image.effect_noise((width, height), 40).convert("RGB")
    photo = Image.blend(base, noise, 0.25)
    out = io.BytesIO()
    photo.save(out, "JPEG", quality=90)
    return out.getvalue()


def truncated_jpeg() -> bytes:
    whole = jpeg(256, 256)
    return whole[: len(whole) * 2 // 3]


def zip_polyglot() -> bytes:
    """A JPEG with a ZIP archive appended (a JPEG viewer and an unzip tool both accept it)."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("payload.sh", "#!/bin/sh\necho owned\n")
    return jpeg() + archive.getvalue()


def html_polyglot() -> bytes:
    """A GIF whose comment holds a script (a browser sniffing it as HTML would run it)."""
    out = io.BytesIO()
    Image.new("P", (8, 8)).save(out, "GIF", comment=b"<script>alert(1)</script>")
    return out.getvalue()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A well-formed PNG of a few hundred bytes that declares ``width`` x ``height`` pixels:
    its one IDAT is a deflate stream of zeros that would expand to gigabytes."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    row = b"\x00" * (width + 1)
    z = zlib.compressobj(9)
    data = z.compress(row * 4) + z.flush()  # a few rows: enough to look real, tiny
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", data)
        + _chunk(b"IEND", b"")
    )


def ogg_voice(seconds: int = 2) -> bytes:
    """Bytes that start like an Ogg/Opus voice note (Telegram's): the page header and the
    OpusHead packet, then filler. The service sniffs the type; the provider decodes audio."""
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48000, 0, 0)
    page = b"OggS\x00\x02" + b"\x00" * 8 + b"\x01\x00\x00\x00" + b"\x00" * 8 + b"\x01"
    page += bytes([len(head)]) + head
    return page + bytes(random.Random(seconds).randrange(256) for _ in range(seconds * 2000))
