"""The fake Discord's (:mod:`tests.fakes.discord`) wire pieces: the REST objects it records and
returns (message objects; error bodies ``{"message", "code"}``, ``Invalid Form Body`` with its
``errors`` tree, the 429 body with ``retry_after`` and ``global`` plus its headers), and the
uvicorn thread that serves it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

TEXT_LIMIT = 2000
MAX_FILE_BYTES = 10 * 1024 * 1024  # what a bot may upload without boosts
ERRORS: dict[tuple[int, str], tuple[str, int]] = {  # (status, route kind) -> (message, code)
    (401, "bot"): ("401: Unauthorized", 0),
    (401, "hook"): ("Invalid Webhook Token", 50027),
    (403, "bot"): ("Missing Access", 50001),
    (403, "hook"): ("Missing Access", 50001),
    (404, "bot"): ("Unknown Channel", 10003),
    (404, "hook"): ("Unknown Webhook", 10015),
}


@dataclass(frozen=True)
class Attachment:
    """A file uploaded with a message (``files[n]`` of a ``multipart/form-data`` call)."""

    id: str
    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class Message:
    id: str
    channel_id: str
    content: str
    via: str  # "bot" (channel message), "original" (interaction response), "followup"
    allowed_mentions: Any = None
    message_reference: Any = None
    nonce: Any = None
    edits: int = 0
    application_id: str = ""  # of an interaction's response or follow-up
    attachments: tuple[Attachment, ...] = ()
    components: Any = None  # action rows of buttons, as sent
    flags: int = 0  # 64: ephemeral (only the interaction's user sees it)


@dataclass
class Interaction:
    token: str
    application_id: str
    channel_id: str
    response: dict[str, Any] | None = None  # what the endpoint answered Discord
    expired: bool = False
    original: Message | None = None
    followups: list[Message] = field(default_factory=list)


@dataclass(frozen=True)
class ApiCall:
    method: str
    route: str  # "channel", "typing", "original", "followup", "gateway" (never a token)
    status: int
    authorization: str  # the Authorization header as sent ("" when none)
    at: float


def message_object(message: Message, bot_id: str) -> dict[str, Any]:
    """A message object as Discord returns it."""
    now = datetime.now(UTC).isoformat()
    obj: dict[str, Any] = {
        "id": message.id,
        "type": 19 if message.message_reference else 0,
        "content": message.content,
        "channel_id": message.channel_id,
        "author": {"id": bot_id, "username": "switchboard", "discriminator": "0", "bot": True},
        "attachments": [
            {
                "id": a.id,
                "filename": a.filename,
                "size": len(a.data),
                "content_type": a.content_type,
                "url": f"https://cdn.discordapp.com/attachments/{message.channel_id}/{a.id}/"
                + a.filename,
            }
            for a in message.attachments
        ],
        "embeds": [],
        "mentions": [],
        "mention_roles": [],
        "mention_everyone": False,
        "pinned": False,
        "tts": False,
        "timestamp": now,
        "edited_timestamp": now if message.edits else None,
        "flags": message.flags,
        "components": message.components or [],
        "nonce": message.nonce,
    }
    if message.message_reference:
        obj["message_reference"] = {
            "type": 0,
            "channel_id": message.channel_id,
            **message.message_reference,
        }
    if message.via != "bot":  # sent through the interaction's webhook
        obj["webhook_id"] = obj["application_id"] = message.application_id
    return obj


def rate_limited(retry_after: float, global_: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """A 429's body and headers (``Retry-After`` in whole seconds, the body's float exact)."""
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": global_}
    headers = {
        "Retry-After": str(math.ceil(retry_after)),
        "X-RateLimit-Scope": "global" if global_ else "user",
    }
    if global_:
        headers["X-RateLimit-Global"] = "true"
    return body, headers


def message_json(
    raw: bytes | str, files: dict[int, Attachment] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A message call's JSON body (for a multipart call: its ``payload_json`` and the files
    ``files[n]``, which become ``body["files"]``), or Discord's 400 error body for it. A
    message needs content or a file."""
    try:
        body = json.loads(raw)
    except ValueError:
        return {}, {"message": "The request body contains invalid JSON.", "code": 50109}
    if not isinstance(body, dict):
        return {}, {"message": "The request body contains invalid JSON.", "code": 50109}
    files = files or {}
    for n, named in enumerate(body.get("attachments") or []):
        if not isinstance(named, dict) or named.get("id") not in files:
            return {}, form_error(["attachments", str(n)], "ATTACHMENT_NOT_FOUND", "Not found")
    body["files"] = [files[n] for n in sorted(files)]
    content = body.get("content", "")
    if not isinstance(content, str) or (not content.strip() and not files):
        return {}, {"message": "Cannot send an empty message", "code": 50006}
    if len(content) > TEXT_LIMIT:
        return {}, too_long()
    return body, None


def form_error(path: list[str], code: str, message: str) -> dict[str, Any]:
    """Discord's ``Invalid Form Body`` (50035) with the error at ``path`` of its tree."""
    tree: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        tree = {key: tree}
    return {"message": "Invalid Form Body", "code": 50035, "errors": tree}


def too_long() -> dict[str, Any]:
    detail = {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}
    return {
        "message": "Invalid Form Body",
        "code": 50035,
        "errors": {"content": {"_errors": [detail]}},
    }
