"""The media service starts without Pillow (docs/startup.md): it is imported by the first
image, with the limits the service set at start (SB_MEDIA_MAX_PIXELS) in force from then on."""

from __future__ import annotations

import io
import subprocess
import sys

from PIL import Image

CHECK = """
import sys
import switchboard_media.server  # everything the service imports to start
from switchboard_media import images
assert "PIL" not in sys.modules, "Pillow imported at start"
images.configure(5000)  # as serve() does with SB_MEDIA_MAX_PIXELS
assert "PIL" not in sys.modules
png = bytes.fromhex(sys.stdin.read())
assert images.verify(png, "image/png", 5000) == (40, 30)
from PIL import Image, ImageFile
print(Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)
made = images.transform(png, "image/png", "thumbnail", 20, 0, "jpeg", 80, 5000)
print(made.mime, made.width, made.height)
"""


def test_pillow_loads_at_the_first_image_with_the_configured_limits() -> None:
    out = io.BytesIO()
    Image.new("RGBA", (40, 30), (10, 20, 30, 128)).save(out, "PNG")
    result = subprocess.run(
        [sys.executable, "-c", CHECK],
        input=out.getvalue().hex(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["5000 False", "image/jpeg 20 15"]
