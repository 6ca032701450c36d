"""Discord gateway events (``MESSAGE_CREATE`` from the WebSocket connection, see
:mod:`.discord_gateway`) as inbound messages.

A message in a DM with the bot is ``direct``; one in a server channel is ``group``, addressed to
the bot when it mentions the bot (``mentions``, or a reply to the bot's message). The bot's own
messages, other bots' and webhooks' messages, and system messages (joins, pins...) are dropped,
and so is a message without text or attachments (in a server, the content of a message that
does not mention the bot is empty without the privileged MESSAGE_CONTENT intent). The bot's
mention is taken out of the text; attachments come as media (their URLs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from switchboard.v1 import messages_pb2

from .base import BadPayload
from .discord_interactions import SNOWFLAKE

DEFAULT, REPLY = 0, 19  # message types that people write
MAX_TEXT = 16_000


def parse_message(event: Mapping[str, Any], bot_id: str) -> messages_pb2.InboundMessage | None:
    """The inbound message of a ``MESSAGE_CREATE`` event's ``d``, or ``None`` when the message
    is not for the agent."""
    author = _object(event, "author")
    if author.get("bot") or event.get("webhook_id") or event.get("type") not in (DEFAULT, REPLY):
        return None
    sender = _snowflake(author.get("id"), "author.id")
    if sender == bot_id:
        return None
    message_id = _snowflake(event.get("id"), "id")
    channel_id = _snowflake(event.get("channel_id"), "channel_id")
    content = event.get("content")
    if not isinstance(content, str) or len(content) > MAX_TEXT:
        raise BadPayload("the message has no valid content")
    media = [
        a["url"]
        for a in _list(event, "attachments")
        if isinstance(a, dict) and isinstance(a.get("url"), str)
    ]
    reference = _object(event, "message_reference")
    referenced = _object(event, "referenced_message")
    reply_to = reference.get("message_id")
    mentioned = bot_id != "" and (
        any(isinstance(u, dict) and u.get("id") == bot_id for u in _list(event, "mentions"))
        or _object(referenced, "author").get("id") == bot_id
    )
    text = _without_mention(content, bot_id).strip() if bot_id else content.strip()
    if not text and not media:
        return None
    group = event.get("guild_id") is not None
    return messages_pb2.InboundMessage(
        sender=sender,
        chat=messages_pb2.ChatRef(id=channel_id, type="group" if group else "direct"),
        text=text,
        media=media,
        message_id=message_id,
        reply_to=reply_to if isinstance(reply_to, str) and SNOWFLAKE.fullmatch(reply_to) else "",
        mentions_bot=mentioned if group else False,
    )


def _without_mention(content: str, bot_id: str) -> str:
    return re.sub(rf"\s*<@!?{re.escape(bot_id)}>\s*", " ", content)


def _snowflake(value: object, field: str) -> str:
    if isinstance(value, str) and SNOWFLAKE.fullmatch(value):
        return value
    raise BadPayload(f"the message has no valid {field}")


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    """A list field; anything else (a number, an object) counts as none, not as a crash that
    would drop the connection."""
    value = data.get(key)
    return value if isinstance(value, list) else []
