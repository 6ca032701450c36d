"""Telegram Bot API ``Update`` objects -> normalized inbound messages.

:func:`parse_update` is shared by the webhook (:mod:`.telegram`) and polling
(:mod:`.telegram_poll`). One update gives at most one message:

- ``message`` and ``edited_message`` (``edited=True``) in private chats (chat type
  ``direct``), groups and supergroups (``group``); a ``callback_query`` from a click on an
  approval notice's button gives the command it stands for (:mod:`.telegram_buttons`); channel
  posts, member updates and other kinds give none (Telegram gets its 200 and does not retry
  them);
- the text is the message's ``text`` or a media message's ``caption``;
- ``message_id`` is ``<chat_id>:<message_id>`` (Telegram's ids are unique per chat only), and
  an edit's ``<chat_id>:<message_id>:edit:<edit_date>``: globally unique and the same when
  Telegram retries the update (the INBOUND dedupe key). :func:`telegram_message_id` maps one
  back to Telegram's number;
- ``thread_id`` is the forum topic (``message_thread_id`` of a topic message);
- ``reply_to`` is the replied-to message in the same form (a topic's own root is no reply);
- ``sender`` is ``str(from.id)``; for a message sent on behalf of a chat (``sender_chat``: an
  anonymous group admin, a user writing as their channel), that chat's (negative) id;
- ``mentions_bot``: an ``@username`` of the bot, a ``text_mention`` of it, a bot command
  (``/cmd`` or ``/cmd@thisbot``) or a reply to one of the bot's messages;
- attachments become references in ``media`` (see :func:`media_ref`).

Media references read ``telegram:<kind>:<file_id>[?mime=<type>&name=<file name>]`` with
``kind`` one of ``photo`` (the largest size; always JPEG), ``document``, ``audio``, ``voice``,
``video``, and the query percent-encoded (``urllib.parse.parse_qs`` reads it). The file itself
is fetched with ``getFile`` by whoever needs it; a reference can also be sent back as is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import parse_qs, quote, urlencode

from switchboard import jsonsafe
from switchboard.v1 import messages_pb2

from .base import BadPayload
from .telegram_buttons import parse_callback

# The update kinds that can carry messages for the agent (and button clicks): setWebhook and
# getUpdates ask for these only.
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
MEDIA_KINDS = ("photo", "document", "audio", "voice", "video")
CHAT_TYPES = {"private": "direct", "group": "group", "supergroup": "group"}
_FILE_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")
_MIME = re.compile(r"[A-Za-z0-9][\w.+-]{0,126}/[\w.+-]{1,127}")
MAX_NAME_CHARS = 255


@dataclass(frozen=True)
class BotInfo:
    """Who the bot is: its user id and ``@username`` (from ``getMe``)."""

    id: int
    username: str = ""

    @classmethod
    def from_token(cls, token: str) -> BotInfo:
        """What the token says: a bot token is ``<bot id>:<secret>``; the username is unknown
        until ``getMe`` answers."""
        head = token.partition(":")[0]
        return cls(int(head) if head.isdigit() and len(head) < 20 else 0)


@dataclass(frozen=True)
class MediaRef:
    kind: str
    file_id: str
    mime: str = ""
    name: str = ""


def media_ref(kind: str, file_id: str, mime: str = "", name: str = "") -> str:
    query = {}
    if mime:
        query["mime"] = mime
    if name:
        query["name"] = name
    tail = f"?{urlencode(query, quote_via=quote)}" if query else ""
    return f"telegram:{kind}:{file_id}{tail}"


def parse_media_ref(ref: str) -> MediaRef | None:
    """A ``telegram:<kind>:<file_id>[?...]`` reference, or None for anything else."""
    scheme, _, rest = ref.partition(":")
    kind, _, rest = rest.partition(":")
    file_id, _, query = rest.partition("?")
    if scheme != "telegram" or kind not in MEDIA_KINDS or not _FILE_ID.fullmatch(file_id):
        return None
    fields = parse_qs(query)
    return MediaRef(
        kind, file_id, fields.get("mime", [""])[0], fields.get("name", [""])[0][:MAX_NAME_CHARS]
    )


def telegram_message_id(message_id: str) -> int | None:
    """Telegram's ``message_id`` in one of ours (``<chat>:<id>[:edit:<date>]``), or None."""
    parts = message_id.split(":")
    if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) < 12:
        return int(parts[1])
    return None


def parse_body(body: bytes, bot: BotInfo) -> list[messages_pb2.InboundMessage]:
    """The messages of a webhook call's body (one Update); :class:`BadPayload` unless it is
    one (bounded JSON: nothing past ``jsonsafe.MAX_DEPTH`` levels is walked)."""
    try:
        update = jsonsafe.loads(body)
    except jsonsafe.JsonRefused as exc:
        raise BadPayload(f"the body is not a JSON Telegram update: {exc}") from None
    return parse_update(update, bot)


def parse_update(update: Any, bot: BotInfo) -> list[messages_pb2.InboundMessage]:
    """The messages in one Bot API ``Update`` (none or one); :class:`BadPayload` when it is
    not shaped like one."""
    if not isinstance(update, Mapping):
        raise BadPayload("a Telegram update is a JSON object")
    update_id = update.get("update_id")
    if not _is_int(update_id):
        raise BadPayload("the update has no integer update_id")
    if "message" in update:
        found = _message(update["message"], bot, edited=False, update_id=update_id)
    elif "edited_message" in update:
        found = _message(update["edited_message"], bot, edited=True, update_id=update_id)
    elif "callback_query" in update:  # a button's click
        found = parse_callback(update["callback_query"], bot.id, CHAT_TYPES)
    else:  # channel posts, member changes...: nothing for the agent
        return []
    return [found] if found is not None else []


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _message(
    msg: Any, bot: BotInfo, *, edited: bool, update_id: int
) -> messages_pb2.InboundMessage | None:
    if not isinstance(msg, Mapping):
        raise BadPayload("the update's message is not an object")
    chat, number = msg.get("chat"), msg.get("message_id")
    if not isinstance(chat, Mapping) or not _is_int(chat.get("id")) or not _is_int(number):
        raise BadPayload("the message lacks chat.id or message_id")
    chat_type = CHAT_TYPES.get(str(chat.get("type")))
    if chat_type is None or msg.get("is_automatic_forward"):
        return None  # a channel, or a channel's post forwarded into its discussion group
    sender = _sender(msg, bot)
    if sender is None:
        return None
    text, entities = _text(msg)
    media = _media(msg)
    if not text.strip() and not media:
        return None  # a sticker, a service message (members joined, a pin...)
    chat_id = chat["id"]
    message_id = f"{chat_id}:{number}"
    if edited:
        edit_date = msg.get("edit_date")
        message_id += f":edit:{edit_date if _is_int(edit_date) else f'u{update_id}'}"
    topic = msg.get("message_thread_id") if msg.get("is_topic_message") is True else None
    reply = _replied(msg, topic)
    reply_number = reply.get("message_id") if reply is not None else None
    return messages_pb2.InboundMessage(
        sender=sender,
        chat=messages_pb2.ChatRef(id=str(chat_id), type=chat_type),
        text=text,
        media=media,
        message_id=message_id,
        thread_id=str(topic) if _is_int(topic) else "",
        reply_to=f"{chat_id}:{reply_number}" if _is_int(reply_number) else "",
        mentions_bot=_mentions(text, entities, bot) or _from_bot(reply, bot),
        edited=edited,
    )


def _sender(msg: Mapping[str, Any], bot: BotInfo) -> str | None:
    """Who wrote it; None for the bot itself and other bots."""
    sender_chat = msg.get("sender_chat")
    if isinstance(sender_chat, Mapping) and _is_int(sender_chat.get("id")):
        return str(sender_chat["id"])  # an anonymous admin (the group), or as a channel
    user = msg.get("from")
    if not isinstance(user, Mapping) or not _is_int(user.get("id")):
        return None
    if user["id"] == bot.id or user.get("is_bot") is True:
        return None  # never answer ourselves or another bot (loops)
    return str(user["id"])


def _text(msg: Mapping[str, Any]) -> tuple[str, list[Any]]:
    for field, entities_field in (("text", "entities"), ("caption", "caption_entities")):
        value = msg.get(field)
        if isinstance(value, str):
            entities = msg.get(entities_field)
            return value, entities if isinstance(entities, list) else []
    return "", []


def _replied(msg: Mapping[str, Any], topic: object) -> Mapping[str, Any] | None:
    """The message this one replies to; in a forum topic every message "replies" to the
    topic's creation, which is no reply."""
    reply = msg.get("reply_to_message")
    if not isinstance(reply, Mapping):
        return None
    if "forum_topic_created" in reply or (topic is not None and reply.get("message_id") == topic):
        return None
    return reply


def _from_bot(reply: Mapping[str, Any] | None, bot: BotInfo) -> bool:
    author = reply.get("from") if reply is not None else None
    return isinstance(author, Mapping) and bot.id != 0 and author.get("id") == bot.id


def _mentions(text: str, entities: list[Any], bot: BotInfo) -> bool:
    if not entities:
        return False
    units = text.encode("utf-16-le")  # entity offsets count UTF-16 code units
    name = bot.username.lower()
    for entity in entities:
        if not isinstance(entity, Mapping):
            continue
        kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
        if kind == "text_mention":
            user = entity.get("user")
            if isinstance(user, Mapping) and bot.id != 0 and user.get("id") == bot.id:
                return True
            continue
        if kind not in ("mention", "bot_command") or not (_is_int(offset) and _is_int(length)):
            continue
        piece = units[2 * offset : 2 * (offset + length)].decode("utf-16-le", "replace").lower()
        if kind == "mention" and name and piece == f"@{name}":
            return True
        if kind == "bot_command":
            _, at, target = piece.partition("@")
            if not at or (name and target == name):
                return True  # /cmd (to every bot here) or /cmd@thisbot
    return False


def _media(msg: Mapping[str, Any]) -> list[str]:
    refs = []
    photo = msg.get("photo")
    if isinstance(photo, list):
        sizes = [p for p in photo if isinstance(p, Mapping) and _good_id(p.get("file_id"))]
        if sizes:
            largest = max(sizes, key=_photo_size)
            refs.append(media_ref("photo", largest["file_id"], "image/jpeg"))
    for kind in MEDIA_KINDS[1:]:
        item = msg.get(kind)
        if not isinstance(item, Mapping) or not _good_id(item.get("file_id")):
            continue
        mime = item.get("mime_type")
        name = item.get("file_name")
        refs.append(
            media_ref(
                kind,
                item["file_id"],
                mime if isinstance(mime, str) and _MIME.fullmatch(mime) else "",
                name[:MAX_NAME_CHARS] if isinstance(name, str) else "",
            )
        )
    return refs


def _good_id(value: object) -> bool:
    return isinstance(value, str) and _FILE_ID.fullmatch(value) is not None


def _photo_size(size: Mapping[str, Any]) -> tuple[int, int]:
    width, height, file_size = size.get("width"), size.get("height"), size.get("file_size")
    area = width * height if _is_int(width) and _is_int(height) else 0
    return (area, file_size if _is_int(file_size) else 0)
