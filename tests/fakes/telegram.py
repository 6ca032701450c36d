"""A fake Telegram Bot API over real HTTP (a uvicorn thread, like :mod:`tests.fakes.llm`),
reached by our httpx client through ``SB_TELEGRAM_API_BASE``::

    with FakeTelegram() as tg:
        adapter = TelegramAdapter(tg.token, secret, tg.base_url)
        tg.fail_next("sendMessage", 429, retry_after=2)
        [sent] = tg.wait_for_sent(1)

Methods (``POST /bot<token>/<method>``, parameters as JSON, a form or a query string, as the Bot
API takes them): ``getMe``, ``setWebhook``, ``deleteWebhook``, ``getWebhookInfo``,
``sendMessage``, ``sendChatAction`` and ``sendPhoto``/``sendDocument``/``sendAudio``/
``sendVoice``/``sendVideo`` (by ``file_id``, or uploading the file in a ``multipart/form-data``
call: the bytes are kept in ``Sent.upload``; a photo that is not an image or is over 10 MB is
refused, a caption over 1024 characters is "message caption is too long"). Answers are
Telegram's: ``{"ok": true, "result": ...}``, or ``{"ok": false, "error_code",
"description"[, "parameters": {"retry_after"}]}`` with
the same HTTP status: a wrong token is ``401 Unauthorized``, an unknown method ``404 Not
Found``. ``sendMessage`` checks what Telegram checks: an empty text, more than 4096 characters
after the entities are parsed ("message is too long"), and with ``parse_mode=HTML`` the markup
(:mod:`tests.fakes.telegram_html`; "can't parse entities: ..."); ``blocked`` chats answer 403
"bot was blocked by the user", ``missing_chats`` 400 "chat not found". ``fail_next`` and
``fail_always`` script errors (429 with ``retry_after``, 5xx...).

Files: ``getFile`` answers a ``File`` (``file_path``, ``file_size``) for the ids of
:attr:`FakeTelegram.files` (the test puts bytes there; others are "400 Bad Request: invalid
file_id"), and ``GET /file/bot<token>/<file_path>`` serves the bytes, as the Bot API does.

Buttons: ``sendMessage``'s ``reply_markup`` (an inline keyboard) is checked and kept with the
message; :attr:`FakeTelegram.buttons` makes the ``callback_query`` of a click and serves
``answerCallbackQuery`` and ``editMessageText`` (:mod:`tests.fakes.telegram_buttons`).

Other methods plug in through :attr:`FakeTelegram.methods` (``getUpdates`` for polling lives
in :mod:`tests.fakes.telegram_updates`).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from PIL import Image, UnidentifiedImageError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server_thread import ServerThread
from tests.fakes.telegram_buttons import TelegramButtons, check_markup
from tests.fakes.telegram_wire import (
    ApiCall,
    HtmlError,
    Refused,
    Sent,
    Uploaded,
    error_response,
    int_param,
    ok,
    params_of,
    refusal,
    visible_text,
)

__all__ = ["ApiCall", "FakeTelegram", "Sent", "Uploaded"]

TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
MEDIA_METHODS = {
    "sendPhoto": "photo",
    "sendDocument": "document",
    "sendAudio": "audio",
    "sendVoice": "voice",
    "sendVideo": "video",
}
Handler = Callable[[dict[str, Any]], Awaitable[JSONResponse]]


class FakeTelegram:
    def __init__(
        self,
        token: str = "7000000001:AAH-fake_telegram_token-0123456789abcdef",
        username: str = "switchboard_test_bot",
    ) -> None:
        self.token = token
        self.bot_id = int(token.partition(":")[0])
        self.username = username
        self.sent: list[Sent] = []
        self.calls: list[ApiCall] = []
        self.actions: list[tuple[int, str, int | None]] = []  # (chat, action, thread)
        self.webhook: dict[str, Any] = {}
        self.blocked: set[int] = set()
        self.missing_chats: set[int] = set()
        self.methods: dict[str, Handler] = {}  # more methods (getUpdates...)
        self.files: dict[str, bytes] = {}  # file_id -> its bytes (getFile, /file/bot...)
        self.downloads: list[str] = []  # file paths fetched
        self._next: list[tuple[str, Refused]] = []
        self._always: dict[str, Refused] = {}
        self._ids: dict[int, itertools.count[int]] = {}
        self._lock = threading.Lock()
        self.port = 0
        self.app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._api, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
            ]
        )
        self._server = ServerThread(self.app, "fake-telegram")
        self.buttons = TelegramButtons(self)  # answerCallbackQuery, editMessageText

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- the test's side -------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        code: int,
        description: str = "",
        retry_after: int | None = None,
        migrate_to_chat_id: int | None = None,
    ) -> None:
        """The next call of ``method`` fails so (a 429 says "Too Many Requests: retry after
        N" with ``parameters.retry_after``; a group become a supergroup has
        ``parameters.migrate_to_chat_id``)."""
        refused = refusal(code, description, retry_after)
        if migrate_to_chat_id is not None:
            refused.parameters["migrate_to_chat_id"] = migrate_to_chat_id
        self._next.append((method, refused))

    def reset(self) -> None:
        """Forget what was sent and called and what the test scripted (failures, blocked and
        missing chats), for a test sharing the fake; the webhook the bot set stays."""
        with self._lock:
            self.sent.clear()
            self.calls.clear()
            self.actions.clear()
            self.downloads.clear()
            self._next.clear()
            self._always.clear()
            self.blocked.clear()
            self.missing_chats.clear()
        self.buttons.reset()

    def fail_always(self, method: str, code: int, description: str = "") -> None:
        self._always[method] = refusal(code, description, None)

    def recover(self, method: str) -> None:
        self._always.pop(method, None)

    def sent_to(self, chat_id: int) -> list[Sent]:
        return [s for s in self.sent if s.chat_id == chat_id]

    def attempts(self, method: str = "sendMessage") -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    def wait_for_sent(self, count: int, timeout: float = 60.0) -> list[Sent]:
        """The first ``count`` accepted messages, once there are that many."""
        deadline = time.monotonic() + timeout
        while len(self.sent) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.sent)} messages sent, expected {count}")
            time.sleep(0.02)
        return self.sent[:count]

    # --- the API ---------------------------------------------------------------------------

    async def _api(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        arrived = time.monotonic()
        try:
            params = await params_of(request)
        except ValueError:
            params = {}
        try:
            if request.path_params["token"] != self.token:
                raise Refused(401, "Unauthorized")
            response, sent = await self._answer(method, params)
        except Refused as refused:
            self.calls.append(ApiCall(method, params, refused.code, refused.description, arrived))
            return error_response(refused)
        # The call is on record before its message is visible: a test that sees the message
        # sees the attempt that sent it.
        with self._lock:
            self.calls.append(ApiCall(method, params, response.status_code, "", arrived))
            if sent is not None:
                self.sent.append(sent)
        return response

    async def _answer(
        self, method: str, params: dict[str, Any]
    ) -> tuple[JSONResponse, Sent | None]:
        for i, (name, refused) in enumerate(self._next):
            if name == method:
                del self._next[i]
                raise refused
        if method in self._always:
            raise self._always[method]
        if method in self.methods:
            return await self.methods[method](params), None
        if method == "getMe":
            return ok(self.me()), None
        if method == "setWebhook":
            return self._set_webhook(params), None
        if method == "deleteWebhook":
            was = bool(self.webhook.get("url"))
            self.webhook = {}
            return ok(True, "Webhook was deleted" if was else "Webhook is already deleted"), None
        if method == "getWebhookInfo":
            info = {"url": "", "has_custom_certificate": False, "pending_update_count": 0}
            info.update({k: v for k, v in self.webhook.items() if k != "secret_token"})
            return ok(info), None
        if method == "sendChatAction":
            chat = self._chat(params)
            if params.get("action") not in ("typing", "upload_photo", "upload_document"):
                raise Refused(400, "Bad Request: wrong parameter action in request")
            self.actions.append(
                (chat, str(params["action"]), int_param(params, "message_thread_id"))
            )
            return ok(True), None
        if method == "sendMessage" or method in MEDIA_METHODS:
            message, sent = self._send(method, params)
            return ok(message), sent
        if method == "getFile":
            return ok(self._get_file(params)), None
        raise Refused(404, "Not Found")

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            raise Refused(400, "Bad Request: invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": "u" + file_id[-8:],
            "file_size": len(self.files[file_id]),
            "file_path": f"files/{file_id}",
        }

    async def _file(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response(status_code=401)
        path = str(request.path_params["path"])
        data = self.files.get(path.removeprefix("files/"))
        if data is None:
            return Response(status_code=404)
        self.downloads.append(path)
        return Response(data, media_type="application/octet-stream")

    def me(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Switchboard",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def _set_webhook(self, params: dict[str, Any]) -> JSONResponse:
        url = str(params.get("url", ""))
        secret = str(params.get("secret_token", ""))
        if (secret and not all(c.isalnum() or c in "_-" for c in secret)) or len(secret) > 256:
            raise Refused(400, "Bad Request: secret token contains unallowed characters")
        allowed = params.get("allowed_updates")
        if isinstance(allowed, str):
            allowed = json.loads(allowed or "[]")
        self.webhook = {"url": url, "secret_token": secret}
        if allowed:
            self.webhook["allowed_updates"] = allowed
        return ok(True, "Webhook was set")

    def _chat(self, params: dict[str, Any]) -> int:
        chat = int_param(params, "chat_id")
        if chat is None:
            raise Refused(400, "Bad Request: chat_id is empty")
        if chat in self.missing_chats:
            raise Refused(400, "Bad Request: chat not found")
        if chat in self.blocked:
            raise Refused(403, "Forbidden: bot was blocked by the user")
        return chat

    def _send(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], Sent]:
        chat = self._chat(params)
        raw = str(params.get("text" if method == "sendMessage" else "caption", ""))
        parse_mode = params.get("parse_mode")
        text = raw
        if parse_mode == "HTML":
            try:
                text = visible_text(raw)
            except HtmlError as exc:
                raise Refused(400, f"Bad Request: can't parse entities: {exc}") from None
        elif parse_mode is not None:
            raise Refused(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
        file_id, upload = None, None
        if method != "sendMessage" and len(text.encode("utf-16-le")) // 2 > CAPTION_LIMIT:
            raise Refused(400, "Bad Request: message caption is too long")
        if method == "sendMessage":
            check_markup(params)
            if not text.strip():
                raise Refused(400, "Bad Request: message text is empty")
            if len(text.encode("utf-16-le")) // 2 > TEXT_LIMIT:
                raise Refused(400, "Bad Request: message is too long")
        elif isinstance(params.get(MEDIA_METHODS[method]), Uploaded):
            upload = params[MEDIA_METHODS[method]]
            check_upload(method, upload)
            file_id = f"AgAC{hashlib.sha256(upload.data).hexdigest()[:24]}"
        else:
            file_id = str(params.get(MEDIA_METHODS[method], "")) or None
            if file_id is None:
                raise Refused(
                    400, f"Bad Request: there is no {MEDIA_METHODS[method]} in the request"
                )
        reply = params.get("reply_parameters")
        if isinstance(reply, str):
            reply = json.loads(reply)
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        thread = int_param(params, "message_thread_id")
        with self._lock:
            number = next(self._ids.setdefault(chat, itertools.count(1001)))
        sent = Sent(
            method, chat, number, text, raw, parse_mode, reply_to, thread, file_id, params, upload
        )
        message: dict[str, Any] = {
            "message_id": number,
            "from": {k: v for k, v in self.me().items() if k in ("id", "is_bot", "first_name")},
            "chat": {"id": chat, "type": "private" if chat > 0 else "supergroup"},
            "date": int(time.time()),
        }
        if thread is not None:
            message["message_thread_id"] = thread
        if method == "sendMessage":
            message["text"] = text
        else:
            message[MEDIA_METHODS[method]] = {
                "file_id": file_id,
                "file_unique_id": "u" + str(number),
            }
        return message, sent

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        self.port = self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def check_upload(method: str, upload: Uploaded) -> None:
    """What Telegram refuses in an uploaded file: an empty one, and for ``sendPhoto`` a file
    over 10 MB or one that is not an image it can process."""
    if not upload.data:
        raise Refused(400, "Bad Request: file must be non-empty")
    if method != "sendPhoto":
        return
    if len(upload.data) > MAX_PHOTO_BYTES:
        raise Refused(400, "Bad Request: file is too big")
    try:
        with Image.open(io.BytesIO(upload.data)) as image:
            image.verify()
    except (UnidentifiedImageError, OSError, SyntaxError):
        raise Refused(400, "Bad Request: IMAGE_PROCESS_FAILED") from None
