"""Images with Pillow: checking one fully before it is stored (the declared size against the
pixel limit before anything is decoded, then every frame decoded: truncated or damaged files
fail here), and making new ones (EXIF orientation applied, metadata stripped, resized keeping
the aspect ratio, converted).

Pillow's own decompression-bomb limit (``Image.MAX_IMAGE_PIXELS``) is set from
``SB_MEDIA_MAX_PIXELS`` by :func:`configure` when the service starts; the explicit check here
refuses at the same number, so its warning never has to be turned into an error.

Pillow itself is imported by the first image, not by the service's start, which its modules
cost about 0.1 s of imports (docs/startup.md); :func:`_pillow` puts the limits in force
whenever it is used."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import InvalidMedia
from .structure import check_structure

if TYPE_CHECKING:
    from PIL import Image

FORMATS = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
_PILLOW_FORMATS = {
    "image/jpeg": "JPEG",
    "image/png": "PNG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
}
THUMBNAIL_BOX = 320
DEFAULT_QUALITY = 85
# EXIF orientations that swap width and height.
_TRANSPOSED = (5, 6, 7, 8)
_ORIENTATION = 0x0112


_max_pixels: int | None = None  # configure()'s, in force once Pillow is imported


def configure(max_pixels: int) -> None:
    """Pillow's process-wide limits: a bomb above ``max_pixels`` (its error above twice as
    many), and truncated files are errors (never padded with grey). In force now if Pillow is
    imported already, else from its import (:func:`_pillow`)."""
    global _max_pixels
    _max_pixels = max_pixels
    if "PIL.Image" in sys.modules:
        _pillow()


def _pillow() -> ModuleType:
    """``PIL.Image`` (imported on first use), with :func:`configure`'s limits in force."""
    from PIL import Image, ImageFile

    if _max_pixels is not None:
        Image.MAX_IMAGE_PIXELS = _max_pixels
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    return Image


def _open(data: bytes, mime: str, max_pixels: int) -> Image.Image:
    pil = _pillow()
    try:
        image: Image.Image = pil.open(io.BytesIO(data), formats=[_PILLOW_FORMATS[mime]])
    except (pil.UnidentifiedImageError, pil.DecompressionBombError, OSError, ValueError) as exc:
        raise InvalidMedia(_why(exc, mime)) from exc
    width, height = image.size
    if width * height > max_pixels:
        raise InvalidMedia(
            f"the image declares {width}x{height} pixels, more than the {max_pixels} allowed "
            "(a decompression bomb or an image too large): refused"
        )
    return image


def _why(exc: Exception, mime: str) -> str:
    if isinstance(exc, _pillow().DecompressionBombError):
        return "the image declares more pixels than allowed (a decompression bomb): refused"
    kind = mime.removeprefix("image/")
    return f"the {kind} image could not be decoded (truncated or damaged)"


def verify(data: bytes, mime: str, max_pixels: int) -> tuple[int, int]:
    """Its (width, height) once the container is whole and every frame decodes;
    :class:`InvalidMedia` otherwise."""
    check_structure(data, mime)
    image = _open(data, mime, max_pixels)
    width, height = image.size
    decoded = 0
    try:
        with image:
            if mime == "image/jpeg":
                # Every byte of the bitstream is still decoded (a truncated or damaged one
                # fails), only the pixels are produced at 1/8 scale: five times faster.
                image.draft(None, (max(1, image.size[0] // 8), max(1, image.size[1] // 8)))
            for frame in range(getattr(image, "n_frames", 1)):
                image.seek(frame)
                image.load()
                decoded += image.size[0] * image.size[1]
                if decoded > max_pixels:
                    raise InvalidMedia(
                        f"the animation decodes to more than {max_pixels} pixels: refused"
                    )
            return width, height
    except (OSError, ValueError, EOFError, SyntaxError) as exc:
        raise InvalidMedia(_why(exc, mime)) from exc


@dataclass(frozen=True)
class Made:
    data: bytes
    mime: str
    width: int
    height: int


def _box(operation: str, max_width: int, max_height: int) -> tuple[int, int] | None:
    if operation == "thumbnail":
        return (max_width or THUMBNAIL_BOX, max_height or THUMBNAIL_BOX)
    if operation == "resize" and not (max_width or max_height):
        raise InvalidMedia("resize needs max_width or max_height")
    if max_width or max_height:
        return (max_width or 1 << 30, max_height or 1 << 30)
    return None


def transform(
    data: bytes,
    mime: str,
    operation: str,
    max_width: int,
    max_height: int,
    image_format: str,
    quality: int,
    max_pixels: int,
) -> Made:
    """A new image from a stored one: upright (EXIF orientation applied), fitted in the box,
    in ``image_format``, with no metadata but its colour profile."""
    if operation not in ("resize", "thumbnail", "convert"):
        raise InvalidMedia("operation must be resize, thumbnail or convert")
    if max_width < 0 or max_height < 0 or not 0 <= quality <= 95:
        raise InvalidMedia("max_width and max_height must be >= 0, quality 0-95")
    target = image_format or ("png" if mime == "image/gif" else mime.removeprefix("image/"))
    if target not in FORMATS:
        raise InvalidMedia("format must be jpeg, png or webp")
    box = _box(operation, max_width, max_height)
    image = _open(data, mime, max_pixels)
    from PIL import ImageOps  # Pillow is imported by now (_open)

    try:
        with image:
            turned = image.getexif().get(_ORIENTATION) in _TRANSPOSED
            width, height = image.size
            shown = (height, width) if turned else (width, height)
            size = _fit(shown, box) if box is not None else shown
            if size != shown and mime == "image/jpeg":
                # Decode at a reduced scale (1/2..1/8, never below the size wanted): far
                # faster than decoding every pixel and throwing most away.
                image.draft(None, (size[1], size[0]) if turned else size)
            image.load()
            icc = image.info.get("icc_profile")
            made = ImageOps.exif_transpose(image)
            if made.size != size:
                made = made.resize(size, _pillow().Resampling.BICUBIC, reducing_gap=3.0)
            return _encode(made, target, quality or DEFAULT_QUALITY, icc)
    except (OSError, ValueError, EOFError, SyntaxError) as exc:
        raise InvalidMedia(_why(exc, mime)) from exc


def _fit(size: tuple[int, int], box: tuple[int, int]) -> tuple[int, int]:
    """``size`` scaled to fit in ``box``, keeping its aspect ratio; never enlarged."""
    scale = min(box[0] / size[0], box[1] / size[1], 1.0)
    return (max(1, round(size[0] * scale)), max(1, round(size[1] * scale)))


def _encode(image: Image.Image, target: str, quality: int, icc: bytes | None) -> Made:
    if target == "jpeg" and image.mode not in ("RGB", "L"):
        rgba = image.convert("RGBA")
        image = _pillow().new("RGB", rgba.size, "white")  # transparency on white, not black
        image.paste(rgba, mask=rgba.getchannel("A"))
    elif image.mode == "P":
        image = image.convert("RGBA")
    image.info.clear()  # no EXIF, XMP, comments or text chunks carried over
    out = io.BytesIO()
    options: dict[str, object] = {"icc_profile": icc} if icc else {}
    if target in ("jpeg", "webp"):
        options["quality"] = quality
    if target == "jpeg":
        options["optimize"] = False
    image.save(out, FORMATS[target].removeprefix("image/").upper(), **options)
    return Made(out.getvalue(), FORMATS[target], image.width, image.height)
