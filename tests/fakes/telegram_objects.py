"""Bot API ``Update`` objects as Telegram sends them to a webhook, and the webhook call itself
(``X-Telegram-Bot-Api-Secret-Token``), for tests::

    tg = TelegramUpdates(secret, bot_username="switchboard_test_bot", bot_id=7000000001)
    update = tg.message("hi @switchboard_test_bot", chat=tg.group(-1001), user=tg.user(42))
    body, headers = tg.webhook(update)

Shapes follow core.telegram.org/bots/api: ``Message.from`` and ``chat`` objects, ``entities``
with UTF-16 offsets, ``photo`` as an array of ``PhotoSize``, ``edited_message`` with
``edit_date``, forum topics with ``message_thread_id`` and ``is_topic_message``.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_ENTITY = re.compile(r"(?<![\w@])(@[A-Za-z0-9_]{5,32})|(?<![\w/])(/[A-Za-z0-9_]+(?:@\w+)?)")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def entities_of(text: str) -> list[dict[str, Any]]:
    """The ``mention`` and ``bot_command`` entities Telegram finds in ``text``."""
    found = []
    for match in _ENTITY.finditer(text):
        kind = "mention" if match.group(1) else "bot_command"
        if kind == "bot_command" and match.start() != 0:
            continue  # Telegram marks commands at the start of a message only
        offset = utf16_len(text[: match.start()])
        found.append({"type": kind, "offset": offset, "length": utf16_len(match.group(0))})
    return found


class TelegramUpdates:
    def __init__(self, secret: str, bot_username: str, bot_id: int) -> None:
        self.secret = secret
        self.bot_username = bot_username
        self.bot_id = bot_id
        self._update_ids = itertools.count(900_000_001)
        self._message_ids = itertools.count(501)

    # --- objects ---------------------------------------------------------------------------

    @staticmethod
    def user(user_id: int = 4242, first_name: str = "Ada", username: str = "ada") -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": first_name, "username": username}

    def bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": "Switchboard",
                "username": self.bot_username}  # fmt: skip

    @staticmethod
    def private(user: dict[str, Any]) -> dict[str, Any]:
        return {"id": user["id"], "first_name": user["first_name"], "type": "private"}

    @staticmethod
    def group(chat_id: int = -1001234567890, forum: bool = False) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "title": "Team", "type": "supergroup"}
        if forum:
            chat["is_forum"] = True
        return chat

    def message_object(
        self,
        text: str | None = None,
        *,
        user: dict[str, Any] | None = None,
        chat: dict[str, Any] | None = None,
        message_id: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A ``Message``: from ``user`` (default Ada) in ``chat`` (default her private chat);
        ``fields`` adds or replaces fields (``caption``, ``photo``, ``reply_to_message``...)."""
        user = user or self.user()
        message: dict[str, Any] = {
            "message_id": message_id if message_id is not None else next(self._message_ids),
            "from": user,
            "chat": chat or self.private(user),
            "date": int(time.time()),
        }
        if text is not None:
            message["text"] = text
            entities = entities_of(text)
            if entities:
                message["entities"] = entities
        message.update(fields)
        return message

    # --- updates ---------------------------------------------------------------------------

    def update(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        return {"update_id": next(self._update_ids), kind: message}

    def message(self, text: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """A ``message`` update (see :meth:`message_object` for the arguments)."""
        return self.update("message", self.message_object(text, **kwargs))

    def edited(self, original: dict[str, Any], text: str, edit_date: int) -> dict[str, Any]:
        """An ``edited_message`` update for ``original`` (a Message) with new ``text``."""
        edited = {**original, "text": text, "edit_date": edit_date}
        edited.pop("entities", None)
        if entities_of(text):
            edited["entities"] = entities_of(text)
        return self.update("edited_message", edited)

    # --- the webhook call ------------------------------------------------------------------

    def webhook(self, update: object, secret: str | None = None) -> tuple[bytes, dict[str, str]]:
        """The body and headers of Telegram's POST of ``update`` to our webhook."""
        body = json.dumps(update).encode()
        headers = {"Content-Type": "application/json"}
        if (secret if secret is not None else self.secret) != "":
            headers[SECRET_HEADER] = secret if secret is not None else self.secret
        return body, headers
