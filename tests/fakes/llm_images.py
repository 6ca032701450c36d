"""Image blocks as the Anthropic Messages API checks them (the fake of :mod:`tests.fakes.llm`):
``{"type": "image", "source": {"type": "base64", "media_type": ..., "data": ...}}`` with a type
Anthropic takes and data that is base64 of an image of that type; or a ``url`` source. A
request that breaks this is a 400 ``invalid_request_error`` naming the block, as Anthropic's."""

from __future__ import annotations

import base64
import binascii
from typing import Any

MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAGIC = {
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


def image_problem(body: dict[str, Any]) -> str | None:
    """What Anthropic would refuse in the request's image blocks; None when they are fine."""
    messages = body.get("messages")
    for m, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for b, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "image":
                problem = _block_problem(block.get("source"))
                if problem is not None:
                    return f"messages.{m}.content.{b}.image.source: {problem}"
    return None


def _block_problem(source: Any) -> str | None:
    if not isinstance(source, dict):
        return "Field required"
    if source.get("type") == "url":
        return None if isinstance(source.get("url"), str) else "url: Field required"
    if source.get("type") != "base64":
        return "Input tag does not match any of the expected tags: 'base64', 'url'"
    media_type = source.get("media_type")
    if media_type not in MEDIA_TYPES:
        return (
            "base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or "
            "'image/webp'"
        )
    try:
        data = base64.b64decode(str(source.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        return "base64.data: invalid base64 data"
    if not data.startswith(MAGIC[media_type]):
        return f"base64.data: Image does not match the provided media type {media_type}"
    return None
