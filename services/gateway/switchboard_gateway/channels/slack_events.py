"""Slack's Events API payloads as inbound messages (docs/channels/slack.md).

One call carries one envelope: ``url_verification`` (answered with its challenge) or an
``event_callback`` with one event. ``app_mention`` in a channel and ``message`` in a DM (or in
a channel the app reads) become messages; the bot's own and other bots' messages, and message
subtypes that are not a person's text, are dropped. Slack sends a mention twice (``message``
and ``app_mention``) and retries calls it saw no quick 200 for: every copy gets the same
``message_id`` ``<channel>:<ts>`` (unique in a workspace), so the INBOUND dedupe keeps one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from switchboard import jsonsafe
from switchboard.v1 import messages_pb2

from .base import BadPayload, Inbound
from .slack_format import from_mrkdwn

_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # channel, user and team ids: C0123, U0123, W0123
_TS = re.compile(r"^\d{1,12}\.\d{1,9}$")  # "1515449522.000016"
# Subtypes of a person's message; every other one (joins, topics, bot_message...) is dropped.
USER_SUBTYPES = frozenset({"", "file_share", "thread_broadcast", "me_message"})


@dataclass(frozen=True)
class _Message:
    """A person's message as an event carries it (an edit carries it under ``message``)."""

    user: str
    text: str
    ts: str
    thread_ts: str
    files: list[Any]


def parse_events(body: bytes, bot_user_id: str) -> Inbound:
    """The inbound messages of one Events API call; :class:`BadPayload` when malformed."""
    try:
        envelope = jsonsafe.loads(body)
    except jsonsafe.JsonRefused as exc:
        raise BadPayload(str(exc)) from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("type"), str):
        raise BadPayload("expected an Events API envelope with a type")
    kind = envelope["type"]
    if kind == "url_verification":
        challenge = envelope.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise BadPayload("url_verification without a challenge")
        return Inbound(reply={"challenge": challenge})
    if kind != "event_callback":
        return Inbound()  # app_rate_limited and other notices: nothing to do
    event = envelope.get("event")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise BadPayload("event_callback without an event")
    bots = _bot_users(envelope, bot_user_id)
    message = _inbound(event, bots)
    return Inbound(messages=[message] if message is not None else [])


def _bot_users(envelope: Mapping[str, Any], bot_user_id: str) -> frozenset[str]:
    """The bot's user ids: from ``auth.test`` at start and the envelope's authorizations."""
    ids = {bot_user_id} if bot_user_id else set()
    authorizations = envelope.get("authorizations")
    if isinstance(authorizations, list):
        for auth in authorizations:
            if (
                isinstance(auth, dict)
                and auth.get("is_bot")
                and isinstance(auth.get("user_id"), str)
            ):
                ids.add(auth["user_id"])
    return frozenset(ids)


def _str(event: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None = None) -> str:
    """An optional string field (``""`` when absent); :class:`BadPayload` when it is there but
    is not a string or does not match ``pattern``."""
    value = event.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
        raise BadPayload(f"the event's {key} is malformed")
    return value


def _required(event: Mapping[str, Any], key: str, pattern: re.Pattern[str]) -> str:
    value = _str(event, key, pattern)
    if not value:
        raise BadPayload(f"the event has no {key}")
    return value


def _message(event: Mapping[str, Any]) -> _Message:
    files = event.get("files")
    if files is not None and not isinstance(files, list):
        raise BadPayload("the event's files is malformed")
    return _Message(
        user=_str(event, "user", _ID),
        text=_str(event, "text"),
        ts=_required(event, "ts", _TS),
        thread_ts=_str(event, "thread_ts", _TS),
        files=files or [],
    )


def _by_a_bot(event: Mapping[str, Any], bots: frozenset[str]) -> bool:
    user = event.get("user")  # not yet checked: a list or an object is no member of bots
    return (
        bool(event.get("bot_id"))
        or event.get("subtype") == "bot_message"
        or (isinstance(user, str) and user in bots)
    )


def _inbound(event: Mapping[str, Any], bots: frozenset[str]) -> messages_pb2.InboundMessage | None:
    kind = event["type"]
    if kind not in ("app_mention", "message"):
        return None  # an event the app subscribed to but does not handle (reactions...)
    channel = _required(event, "channel", _ID)
    channel_type = _str(event, "channel_type")
    subtype = _str(event, "subtype")
    edited = subtype == "message_changed"
    if edited:
        inner = event.get("message")
        if not isinstance(inner, dict):
            raise BadPayload("message_changed without the message")
        # An unfurl also changes a message: only a person's edit carries "edited".
        edit = inner.get("edited")
        if not isinstance(edit, dict) or _by_a_bot(inner, bots):
            return None
        message = _message(inner)
        edit_ts = _str(edit, "ts", _TS) or _required(event, "ts", _TS)
        message_id = f"{channel}:{message.ts}:edit:{edit_ts}"
    elif subtype in USER_SUBTYPES:
        if _by_a_bot(event, bots):
            return None
        message = _message(event)
        message_id = f"{channel}:{message.ts}"
    else:
        return None  # message_deleted, channel_join, bot_message...
    if not message.user:
        raise BadPayload("the message has no user")
    media = _media(message.files)
    text = from_mrkdwn(message.text, bots)
    if not text and not media:
        return None
    direct = kind == "message" and channel_type == "im"  # else channel, group (private), mpim
    mentioned = kind == "app_mention" or any(f"<@{bot}>" in message.text for bot in bots)
    thread_id = message.thread_ts
    if not direct and mentioned and not thread_id:
        thread_id = message.ts  # the reply starts a thread on the mention
    return messages_pb2.InboundMessage(
        sender=message.user,
        chat=messages_pb2.ChatRef(id=channel, type="direct" if direct else "group"),
        text=text,
        media=media,
        message_id=message_id,
        thread_id=thread_id,
        mentions_bot=mentioned and not direct,
        edited=edited,
    )


def _media(files: list[Any]) -> list[str]:
    """Attachment references: each file's ``url_private`` (downloaded with the bot token,
    scope files:read, and ingested by :mod:`.slack_files`), else ``slack:file:<id>``."""
    refs = []
    for item in files:
        if not isinstance(item, dict):
            continue
        url = item.get("url_private")
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            refs.append(url)
        elif isinstance(item.get("id"), str) and _ID.match(item["id"]):
            refs.append(f"slack:file:{item['id']}")
    return refs
