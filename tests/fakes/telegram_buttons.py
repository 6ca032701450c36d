"""Inline keyboards for the fake Bot API (:mod:`tests.fakes.telegram`): what a click on a button
sends (a ``callback_query``), and the two methods that answer it, as core.telegram.org/bots/api
describes them::

    sent = tg.wait_for_sent(1)[0]                       # a sendMessage with reply_markup
    query = tg.buttons.click(sent, user, "ap:0123abcd:y")  # the CallbackQuery object
    update = {"update_id": 1, "callback_query": query}
    tg.buttons.answers, tg.buttons.edits                # what the bot answered

- ``answerCallbackQuery(callback_query_id, text, show_alert)``: the id must be one a click
  issued and not answered yet ("query is too old and response timeout expired or query ID is
  invalid" otherwise); the text at most 200 characters.
- ``editMessageText(chat_id, message_id, text, entities, reply_markup)``: the message must be
  one the bot sent ("message to edit not found"); the same text and keyboard again is
  "message is not modified"; an empty text or one over 4096 characters is refused. The message
  then shows the new text and keyboard (a click on it carries them).
- A ``reply_markup`` sent with ``sendMessage`` is checked as Telegram checks it: an
  ``inline_keyboard`` of rows of buttons, each with a ``text`` and 1 to 64 bytes of
  ``callback_data`` ("BUTTON_DATA_INVALID").
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from tests.fakes.telegram_wire import Refused, Sent, int_param, ok

if TYPE_CHECKING:
    from tests.fakes.telegram import FakeTelegram

ANSWER_LIMIT = 200
TEXT_LIMIT = 4096
QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"


@dataclass(frozen=True)
class CallbackAnswer:
    query_id: str
    text: str
    show_alert: bool


@dataclass(frozen=True)
class Edit:
    chat_id: int
    message_id: int
    text: str
    entities: list[Any]
    reply_markup: dict[str, Any] | None


def _json(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value


def check_markup(params: dict[str, Any]) -> dict[str, Any] | None:
    """The ``reply_markup`` of a call, checked; None when there is none."""
    markup = _json(params.get("reply_markup"))
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise Refused(400, "Bad Request: can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise Refused(400, "Bad Request: can't parse reply keyboard markup JSON object")
    for button in (b for row in rows for b in row):
        data = button.get("callback_data") if isinstance(button, dict) else None
        if not isinstance(button, dict) or not isinstance(button.get("text"), str):
            raise Refused(400, "Bad Request: can't parse inline keyboard button")
        if not isinstance(data, str) or not 1 <= len(data.encode()) <= 64:
            raise Refused(400, "Bad Request: BUTTON_DATA_INVALID")
    return markup


class TelegramButtons:
    """The fake's buttons: installs its methods into ``tg.methods``."""

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg
        self.answers: list[CallbackAnswer] = []
        self.edits: list[Edit] = []
        self._open: set[str] = set()  # query ids issued and not answered
        self._shown: dict[tuple[int, int], tuple[str, dict[str, Any] | None]] = {}
        self._ids = itertools.count(4_000_000_001)
        self._lock = threading.Lock()
        tg.methods["answerCallbackQuery"] = self._answer
        tg.methods["editMessageText"] = self._edit

    def reset(self) -> None:
        with self._lock:
            self.answers.clear()
            self.edits.clear()

    def keyboard(self, sent: Sent) -> dict[str, Any] | None:
        """The keyboard ``sent`` shows now (after any edit)."""
        key = (sent.chat_id, sent.message_id)
        if key in self._shown:
            return self._shown[key][1]
        markup = _json(sent.params.get("reply_markup"))
        return markup if isinstance(markup, dict) else None

    def click(self, sent: Sent, user: dict[str, Any], data: str) -> dict[str, Any]:
        """The ``CallbackQuery`` Telegram sends when ``user`` presses the button ``data`` under
        ``sent`` (a message the bot sent)."""
        query_id = str(next(self._ids))
        with self._lock:
            self._open.add(query_id)
        text = self._shown.get((sent.chat_id, sent.message_id), (sent.text, None))[0]
        chat_type = "private" if sent.chat_id > 0 else "supergroup"
        message: dict[str, Any] = {
            "message_id": sent.message_id,
            "from": {"id": self.tg.bot_id, "is_bot": True, "first_name": "Switchboard"},
            "chat": {"id": sent.chat_id, "type": chat_type},
            "date": int(time.time()),
            "text": text,
        }
        markup = self.keyboard(sent)
        if markup is not None:
            message["reply_markup"] = markup
        if sent.thread_id is not None:
            message.update(message_thread_id=sent.thread_id, is_topic_message=True)
        return {
            "id": query_id,
            "from": user,
            "message": message,
            "chat_instance": f"-{abs(sent.chat_id)}77",
            "data": data,
        }

    async def _answer(self, params: dict[str, Any]) -> JSONResponse:
        query_id = str(params.get("callback_query_id", ""))
        text = str(params.get("text", ""))
        if len(text) > ANSWER_LIMIT:
            raise Refused(400, "Bad Request: MESSAGE_TOO_LONG")
        with self._lock:
            if query_id not in self._open:
                raise Refused(400, QUERY_INVALID)
            self._open.discard(query_id)
            alert = params.get("show_alert") in (True, "true")
            self.answers.append(CallbackAnswer(query_id, text, alert))
        return ok(True)

    async def _edit(self, params: dict[str, Any]) -> JSONResponse:
        chat, number = int_param(params, "chat_id"), int_param(params, "message_id")
        sent = next((s for s in self.tg.sent if (s.chat_id, s.message_id) == (chat, number)), None)
        if chat is None or number is None or sent is None:
            raise Refused(400, "Bad Request: message to edit not found")
        text = str(params.get("text", ""))
        if not text.strip():
            raise Refused(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > TEXT_LIMIT:
            raise Refused(400, "Bad Request: MESSAGE_TOO_LONG")
        markup = check_markup(params)
        if markup is not None and not markup.get("inline_keyboard"):
            markup = None  # an empty keyboard: none
        entities = _json(params.get("entities")) or []
        if not isinstance(entities, list):
            raise Refused(400, "Bad Request: can't parse entities JSON object")
        with self._lock:
            before = self._shown.get((chat, number), (sent.text, self.keyboard(sent)))
            if before == (text, markup):
                raise Refused(
                    400,
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup "
                    "of the message",
                )
            self._shown[(chat, number)] = (text, markup)
            self.edits.append(Edit(chat, number, text, entities, markup))
        return ok({"message_id": number, "chat": {"id": chat}, "text": text})
