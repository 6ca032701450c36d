"""WhatsApp Cloud API payloads: webhook events in, message calls out.

In: ``entry[].changes[].value.messages[]`` of a ``whatsapp_business_account`` event. Text,
image, audio (voice notes) and document messages become one :class:`InboundMessage` each
(sender: the ``from`` wa_id, chat: direct with it, ``message_id``: the ``wamid`` Meta repeats
on a retried delivery, so the INBOUND dedupe keeps one); a file is a ``whatsapp:<kind>:<id>``
reference until :mod:`.whatsapp_media` fetches it. ``statuses[]`` (sent, delivered, read,
failed) start nothing; a failed one is logged with Meta's error code.

Out: text split at :data:`TEXT_LIMIT` characters, links to media in the text (WhatsApp shows
a preview), stored files uploaded (``POST /<phone-number-id>/media``) and sent by id as an
image, audio or document message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from switchboard.media import MediaReference
from switchboard.v1 import messages_pb2

from .base import BadPayload, PlatformMessage, Undeliverable
from .media_out import stored_refs, upload_spec

log = logging.getLogger(__name__)
TEXT_LIMIT = 4096  # characters of a text message's body
KINDS = ("image", "audio", "document")
IMAGE_TYPES = frozenset({"image/jpeg", "image/png"})
AUDIO_TYPES = frozenset({"audio/ogg", "audio/mpeg", "audio/mp4", "audio/aac", "audio/amr"})
REF_PREFIX = "whatsapp:"
_WA_ID = re.compile(r"[0-9]{1,32}")
_MEDIA_ID = re.compile(r"[0-9A-Za-z_.-]{1,128}")
_REF = re.compile(r"whatsapp:(image|audio|document):([0-9A-Za-z_.-]{1,128})(?:\?name=(.*))?")


def media_ref_of(kind: str, media_id: str, name: str = "") -> str:
    """The reference of a file not fetched yet: ``whatsapp:<kind>:<media-id>[?name=...]``."""
    ref = f"{REF_PREFIX}{kind}:{media_id}"
    return ref + (f"?name={quote(name[:128], safe='')}" if name else "")


def parse_ref(ref: str) -> tuple[str, str, str] | None:
    """(kind, media id, file name) of a ``whatsapp:`` reference; None for anything else."""
    found = _REF.fullmatch(ref)
    if found is None:
        return None
    return found[1], found[2], unquote(found[3] or "")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_events(body: bytes) -> list[messages_pb2.InboundMessage]:
    """The messages of one webhook call; :class:`BadPayload` unless it is Meta's JSON."""
    try:
        event = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadPayload("the body is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("entry", []), list):
        raise BadPayload("not a WhatsApp webhook event")
    messages: list[messages_pb2.InboundMessage] = []
    for entry in _list(event.get("entry")):
        for change in _list(_dict(entry).get("changes")):
            value = _dict(_dict(change).get("value"))
            for status in _list(value.get("statuses")):
                _log_status(_dict(status))
            for raw in _list(value.get("messages")):
                message = _message(_dict(raw))
                if message is not None:
                    messages.append(message)
    return messages


def _log_status(status: Mapping[str, Any]) -> None:
    if status.get("status") != "failed":
        return
    for error in _list(status.get("errors")):
        error = _dict(error)
        log.warning(
            "whatsapp reports a message failed: %s %s",
            str(error.get("code", ""))[:16],
            str(error.get("title", ""))[:120],
        )


def _message(raw: Mapping[str, Any]) -> messages_pb2.InboundMessage | None:
    sender, message_id, kind = raw.get("from"), raw.get("id"), raw.get("type")
    if not isinstance(sender, str) or not _WA_ID.fullmatch(sender):
        return None
    if not isinstance(message_id, str) or not 0 < len(message_id) <= 256:
        return None
    text, media = "", []
    if kind == "text":
        text = str(_dict(raw.get("text")).get("body") or "")
    elif kind in KINDS:
        body = _dict(raw.get(kind))
        media_id = body.get("id")
        if not isinstance(media_id, str) or not _MEDIA_ID.fullmatch(media_id):
            return None
        text = str(body.get("caption") or "")
        name = str(body.get("filename") or "") if kind == "document" else ""
        media = [media_ref_of(kind, media_id, name)]
    else:  # stickers, locations, reactions, buttons...: not handled (docs/channels/whatsapp.md)
        log.info("whatsapp message of type %s ignored", str(kind)[:32])
        return None
    if not text and not media:
        return None
    reply_to = str(_dict(raw.get("context")).get("id") or "")
    return messages_pb2.InboundMessage(
        sender=sender,
        chat=messages_pb2.ChatRef(id=sender, type="direct"),
        text=text,
        media=media,
        message_id=message_id,
        reply_to=reply_to[:256],
    )


def split_text(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """Pieces of at most ``limit`` characters keeping every character, cut after a newline
    or a space when there is one in the piece's second half."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = max(text.rfind("\n", limit // 2, limit), text.rfind(" ", limit // 2, limit))
        cut = cut + 1 if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:]
    if text:
        pieces.append(text)
    return pieces


def kind_for(mime: str) -> str:
    if mime in IMAGE_TYPES:
        return "image"
    if mime in AUDIO_TYPES:
        return "audio"
    return "document"


def format_part(part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
    """The calls for one reply part: its text (with links) in pieces, then one per file."""
    to = part.chat.id
    if not _WA_ID.fullmatch(to):
        raise Undeliverable("the part names no WhatsApp number")
    links = [ref for ref in part.media if ref.startswith(("https://", "http://"))]
    text = "\n".join(t for t in [part.text, *links] if t.strip())
    files: list[MediaReference] = stored_refs(part.media)
    messages: list[PlatformMessage] = []
    for piece in split_text(text) if text.strip() else []:
        body = {"body": piece, "preview_url": bool(links)}
        messages.append(PlatformMessage({"to": to, "type": "text", "text": body}))
    for ref in files:
        upload = {"to": to, "type": kind_for(ref.mime), "upload": upload_spec(ref)}
        messages.append(PlatformMessage(upload))
    if messages and part.reply_to.startswith("wamid."):
        messages[0].payload["context"] = {"message_id": part.reply_to}
    return messages
