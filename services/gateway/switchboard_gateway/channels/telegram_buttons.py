"""Telegram's buttons for approvals (docs/chat-approvals.md): an inline keyboard under an
approval notice, the ``callback_query`` a click sends, and the answer to it.

- A notice (``OutboundMessage.approval_id``) gets ``reply_markup.inline_keyboard`` with two
  buttons whose ``callback_data`` is short and opaque: ``ap:<hex digits of the id>:y``
  (Approve) or ``:n`` (Deny), at most 45 bytes of Telegram's 64.
- A click (an update with ``callback_query``, by webhook or polling) becomes an inbound message
  from the clicker in the message's chat whose text is the command it stands for
  (``/approve <hex>``), with ``click`` naming the message and the clicker; the router decides
  it exactly as that text typed there. The query's id and the message's text and entities
  travel in ``reply_context`` for the answer. Data that is not ours, a click on a message
  Telegram no longer shows, or one by a bot publishes nothing.
- The answer (``OutboundMessage.click``): ``answerCallbackQuery`` with the router's text (at
  most 200 characters, Telegram's limit) and, when the click decided, ``editMessageText``: the
  notice's text and entities as they were, then "Approved by <name>" in bold, and no keyboard.
  A query too old to answer is logged, not retried (the edit still goes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from switchboard.v1 import messages_pb2

from .base import PlatformMessage

APPROVAL_ID = re.compile(r"ap_([0-9a-f]{6,40})")
CALLBACK_DATA = re.compile(r"ap:([0-9a-f]{6,40}):([yn])")
ANSWER_LIMIT = 200  # answerCallbackQuery's text
TEXT_LIMIT = 4096
MAX_ENTITIES_JSON = 32_000
MAX_NAME = 64
# reply_context keys of a click
CALLBACK_ID = "callback_query_id"
MESSAGE_TEXT = "message_text"
MESSAGE_ENTITIES = "message_entities"
# A PlatformMessage payload key: a failure of this call is logged, not retried.
BEST_EFFORT = "best_effort"


def keyboard(approval_id: str) -> dict[str, Any] | None:
    """The ``reply_markup`` of an approval notice; None for an id that is not one."""
    found = APPROVAL_ID.fullmatch(approval_id)
    if found is None:
        return None
    digits = found.group(1)
    return {
        "inline_keyboard": [
            [
                {"text": "Approve", "callback_data": f"ap:{digits}:y"},
                {"text": "Deny", "callback_data": f"ap:{digits}:n"},
            ]
        ]
    }


def parse_callback(
    query: Any, bot_id: int, chat_types: Mapping[str, str]
) -> messages_pb2.InboundMessage | None:
    """The click in a ``callback_query``, or None when it is not a click on our buttons."""
    if not isinstance(query, Mapping):
        return None
    query_id, data, user, message = (
        query.get("id"),
        query.get("data"),
        query.get("from"),
        query.get("message"),
    )
    if not isinstance(query_id, str) or not query_id or len(query_id) > 64:
        return None
    found = CALLBACK_DATA.fullmatch(data) if isinstance(data, str) else None
    if found is None or not isinstance(user, Mapping) or not isinstance(message, Mapping):
        return None
    if not _is_int(user.get("id")) or user.get("is_bot") is True or user["id"] == bot_id:
        return None
    chat, number = message.get("chat"), message.get("message_id")
    if not isinstance(chat, Mapping) or not _is_int(chat.get("id")) or not _is_int(number):
        return None
    chat_type = chat_types.get(str(chat.get("type")))
    if chat_type is None or message.get("date") == 0:  # 0: a message the bot cannot see
        return None
    digits, verb = found.group(1), "approve" if found.group(2) == "y" else "deny"
    topic = message.get("message_thread_id") if message.get("is_topic_message") else None
    context = {CALLBACK_ID: query_id}
    text = message.get("text")
    if isinstance(text, str) and len(text) <= TEXT_LIMIT:
        context[MESSAGE_TEXT] = text
        entities = message.get("entities")
        if isinstance(entities, list):
            encoded = json.dumps(entities, separators=(",", ":"))
            if len(encoded) <= MAX_ENTITIES_JSON:
                context[MESSAGE_ENTITIES] = encoded
    return messages_pb2.InboundMessage(
        sender=str(user["id"]),
        chat=messages_pb2.ChatRef(id=str(chat["id"]), type=chat_type),
        text=f"/{verb} {digits}",
        message_id=f"{chat['id']}:{number}:click:{query_id}",
        thread_id=str(topic) if _is_int(topic) else "",
        mentions_bot=True,  # a click on the bot's own message is addressed to it
        reply_context=context,
        click=messages_pb2.ButtonClick(message_id=str(number), by=name_of(user)),
    )


def name_of(user: Mapping[str, Any]) -> str:
    """How Telegram shows a user: first and last name, else @username, else the id."""
    names = [user.get("first_name"), user.get("last_name")]
    full = " ".join(n.strip() for n in names if isinstance(n, str) and n.strip())
    username = user.get("username")
    if not full and isinstance(username, str) and username:
        full = f"@{username}"
    return (full or str(user.get("id", "someone")))[:MAX_NAME]


def verdict(decision: str, by: str) -> str:
    return f"{'Approved' if decision == 'approved' else 'Denied'} by {by or 'someone'}"


def answer_messages(
    part: messages_pb2.OutboundMessage, chat_id: int | str
) -> list[PlatformMessage]:
    """The calls that answer a click: the callback's answer, then the notice's edit when the
    click decided."""
    messages: list[PlatformMessage] = []
    query_id = part.reply_context.get(CALLBACK_ID, "")
    if query_id:
        answer = {"callback_query_id": query_id, "text": _cut(part.text, ANSWER_LIMIT)}
        messages.append(
            PlatformMessage({"method": "answerCallbackQuery", "params": answer, BEST_EFFORT: True})
        )
    number = part.click.message_id
    if part.click.decision and number.isdigit() and len(number) < 12:
        params: dict[str, Any] = {"chat_id": chat_id, "message_id": int(number), **_edit(part)}
        messages.append(PlatformMessage({"method": "editMessageText", "params": params}))
    return messages


def _edit(part: messages_pb2.OutboundMessage) -> dict[str, Any]:
    """editMessageText's text, entities and (empty) keyboard."""
    original = part.reply_context.get(MESSAGE_TEXT, "").rstrip()
    line = verdict(part.click.decision, part.click.by)
    head = f"{original}\n\n" if original else ""
    if len(head) + len(line) > TEXT_LIMIT:
        head = original = ""
    entities: list[Any] = []
    if original and MESSAGE_ENTITIES in part.reply_context:
        try:
            loaded = json.loads(part.reply_context[MESSAGE_ENTITIES])
        except ValueError:
            loaded = []
        entities = loaded if isinstance(loaded, list) else []
    entities.append({"type": "bold", "offset": _utf16(head), "length": _utf16(line)})
    return {"text": head + line, "entities": entities, "reply_markup": {"inline_keyboard": []}}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
