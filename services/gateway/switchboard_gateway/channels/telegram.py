"""Telegram: Bot API webhooks in (``POST /channels/telegram/default``), ``sendMessage`` out.

Configured by ``SB_TELEGRAM_BOT_TOKEN`` (from @BotFather). In webhook mode (the default)
``SB_TELEGRAM_WEBHOOK_SECRET`` is required: Telegram sends it in
``X-Telegram-Bot-Api-Secret-Token`` and a call without it is refused, so the webhook is never
served unauthenticated; with ``SB_TELEGRAM_WEBHOOK_URL`` set, ``start`` registers that URL
with ``setWebhook``. ``SB_TELEGRAM_MODE=polling`` fetches updates instead
(:mod:`.telegram_poll`). ``SB_TELEGRAM_API_BASE`` points the client at a self-hosted Bot API
server (or a test's fake). Updates are parsed by :mod:`.telegram_inbound` (shared with
polling), replies formatted by :mod:`.telegram_format`. See docs/channels/telegram.md.

The Bot API client (:mod:`.telegram_api`) never puts the bot token in a URL httpx logs or an
exception shows. ``call(method, params)`` and ``bot`` (id and username) are public for polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from switchboard.errors import ConfigError
from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..config import GatewaySettings
from .accounts import Platform
from .base import (
    ChannelAdapter,
    Inbound,
    InboundRequest,
    OnPublish,
    PlatformMessage,
    RetryLater,
    Unauthorized,
    Undeliverable,
)
from .media_out import Upload, load, stored_refs
from .telegram_accounts import DEFAULT, Bot, configured_bots
from .telegram_api import BotApi, BotApiError, describe, second_try
from .telegram_buttons import BEST_EFFORT, answer_messages, keyboard
from .telegram_files import ingest_attachments
from .telegram_format import to_pieces
from .telegram_inbound import (
    ALLOWED_UPDATES,
    BotInfo,
    parse_body,
    parse_media_ref,
    parse_update,
    telegram_message_id,
)
from .telegram_media import FIELDS, caption_of, file_messages, upload_method
from .telegram_poll import Polling, start_polling  # polling mode (helper telegram-poll)

log = logging.getLogger(__name__)

ACCOUNT = DEFAULT  # the bot of SB_TELEGRAM_BOT_TOKEN; named ones: SB_TELEGRAM_ACCOUNTS
SECRET_HEADER = "x-telegram-bot-api-secret-token"
MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 3600.0
SEND_MEDIA = {
    "photo": "sendPhoto",
    "document": "sendDocument",
    "audio": "sendAudio",
    "voice": "sendVoice",
    "video": "sendVideo",
}
_CHAT_ID = re.compile(r"-?[0-9]{1,20}|@[A-Za-z0-9_]{4,32}")
_TOPIC = re.compile(r"[0-9]{1,12}")
_MD_LABEL = re.compile(r"([\\`*_~\[\]])")


class TelegramAdapter:
    """One Telegram bot: one account (``default`` unless named, telegram_accounts.py)."""

    name = "telegram"

    def __init__(
        self,
        bot_token: str,
        webhook_secret: str = "",
        api_base: str = "https://api.telegram.org",
        *,
        mode: str = "webhook",
        webhook_url: str = "",
        timeout_s: float = 15.0,
        settings: GatewaySettings | None = None,
        account: str = ACCOUNT,
    ) -> None:
        self.account = account
        self.accounts = (account,)  # webhooks to any other account are 404 (channels/routes.py)
        self._secret = webhook_secret.encode()
        self.api = BotApi(api_base, bot_token, timeout_s=timeout_s)
        self.mode = mode
        self.leased = mode == "polling"  # polls under the lease telegram.<account>
        self.webhook_url = webhook_url
        self.settings = settings  # for polling's start (telegram_poll.start_polling)
        self.bot = BotInfo.from_token(bot_token)  # the username comes with getMe at start
        self._init_task: asyncio.Task[None] | None = None
        self._polling: Polling | None = None  # polling mode (helper telegram-poll)
        self.on_publish: OnPublish | None = None  # polled messages (typing), base.py
        self._failures = 0  # consecutive 5xx and connection failures: the backoff's exponent
        self.media: MediaClient | None = None  # attachments go to the media service (server.py)

    def __repr__(self) -> str:  # never the token or the secret
        return f"TelegramAdapter({self.api!r}, bot={self.bot!r}, mode={self.mode!r})"

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self, rt: ServiceRuntime | None = None) -> None:
        """Open the client, learn the bot's username (``getMe``) and, in webhook mode with a
        URL, register the webhook. A token or URL Telegram refuses stops the gateway;
        Telegram out of reach does not (both are tried again in the background)."""
        self.api.open()
        try:
            await self._introduce()
        except (BotApiError, httpx.HTTPError) as exc:
            log.warning("telegram is not answering at start (%s); trying again", describe(exc))
            self._init_task = asyncio.create_task(self._introduce_later(), name="telegram-init")
        # --- polling mode (helper telegram-poll): getUpdates on the replica holding the lease
        if self.mode == "polling" and rt is not None and self.settings is not None:
            self._polling = await start_polling(
                rt,
                self.settings,
                self,
                self.parse_update,
                account=self.account,
                bot_id=self.bot.id,
                on_publish=self.on_publish,
                prepare=self.fetch_attachments,
            )

    async def _introduce(self) -> None:
        try:
            me = await self.call("getMe")
        except BotApiError as exc:
            if exc.code in (401, 404):
                which = "SB_TELEGRAM_BOT_TOKEN"
                if self.account != ACCOUNT:
                    which = f"the bot token of SB_TELEGRAM_ACCOUNTS {self.account!r}"
                raise ConfigError(
                    f"Telegram refused {which} ({exc.code} {exc.description}): "
                    "set the token @BotFather gave the bot."
                ) from None
            raise
        if isinstance(me, Mapping) and isinstance(me.get("id"), int):
            self.bot = BotInfo(me["id"], str(me.get("username") or ""))
        log.info("telegram bot is @%s (%s)", self.bot.username, self.bot.id)
        if self.mode == "webhook" and self.webhook_url:
            params = {
                "url": self.webhook_url,
                "secret_token": self._secret.decode(),
                "allowed_updates": list(ALLOWED_UPDATES),
            }
            try:
                await self.call("setWebhook", params)
            except BotApiError as exc:
                if exc.code == 400:
                    raise ConfigError(
                        f"Telegram refused SB_TELEGRAM_WEBHOOK_URL: {exc.description}"
                    ) from None
                raise
            log.info("telegram webhook set to %s", self.webhook_url)

    async def _introduce_later(self) -> None:
        delay = 1.0
        while True:
            await asyncio.sleep(delay)
            try:
                await self._introduce()
                return
            except ConfigError as exc:
                log.error("%s", exc)
                return
            except (BotApiError, httpx.HTTPError) as exc:
                log.warning("telegram still not answering (%s)", describe(exc))
                delay = min(delay * 2, MAX_BACKOFF_S)

    async def close(self) -> None:
        # --- polling mode (helper telegram-poll): stop polling (releases the lease) first
        polling, self._polling = self._polling, None
        if polling is not None:
            await polling.close()
        task, self._init_task = self._init_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.api.close()

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One Bot API call; its ``result`` (see :meth:`BotApi.call`)."""
        return await self.api.call(method, params, timeout_s=timeout_s)

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        """``sendChatAction`` (typing); any failure is ignored."""
        if account != self.account or not _CHAT_ID.fullmatch(chat.id):
            return
        params: dict[str, Any] = {"chat_id": _chat(chat.id), "action": "typing"}
        if _TOPIC.fullmatch(thread_id):
            params["message_thread_id"] = int(thread_id)
        try:
            await self.call("sendChatAction", params)
        except Exception as exc:
            log.debug("telegram typing failed (%s)", describe(exc))

    # --- inbound ---------------------------------------------------------------------------

    def verify(self, request: InboundRequest) -> None:
        if not self._secret:  # polling mode without a secret: there is no webhook
            raise Unauthorized("this Telegram bot takes no webhook calls")
        given = request.headers.get(SECRET_HEADER, "")
        if not given:
            raise Unauthorized("missing X-Telegram-Bot-Api-Secret-Token")
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self._secret):
            raise Unauthorized("bad X-Telegram-Bot-Api-Secret-Token")

    def parse(self, request: InboundRequest) -> Inbound:
        return Inbound(messages=parse_body(request.body, self.bot))

    async def fetch_attachments(self, message: messages_pb2.InboundMessage) -> None:
        """Photos, voice notes and audio into the media service (telegram_files.py)."""
        if self.media is not None and message.media:
            await ingest_attachments(self.api, self.media, message)

    def parse_update(self, update: Mapping[str, Any]) -> list[messages_pb2.InboundMessage]:
        """One ``Update`` (from getUpdates) as this bot sees it."""
        return parse_update(update, self.bot)

    # --- outbound --------------------------------------------------------------------------

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        """``sendMessage`` calls for one part (HTML, split at 4096 characters), replying to
        ``reply_to`` with its first, in the forum topic ``thread_id``; then one
        ``send<Photo|Document|...>`` per ``telegram:`` media reference (URLs go as links) and
        an upload per stored file (``media:``, telegram_media.py: the text may be its
        caption). An approval notice's last message carries the Approve and Deny buttons; the
        answer to a click is the callback's answer and the notice's edit (telegram_buttons.py)."""
        if not _CHAT_ID.fullmatch(part.chat.id):
            raise Undeliverable("the part names no Telegram chat")
        if part.HasField("click"):
            return answer_messages(part, _chat(part.chat.id))
        base: dict[str, Any] = {"chat_id": _chat(part.chat.id)}
        if _TOPIC.fullmatch(part.thread_id):
            base["message_thread_id"] = int(part.thread_id)
        reply = None
        if part.part == 0 and part.reply_to.partition(":")[0] == part.chat.id:
            reply = telegram_message_id(part.reply_to)
        urls = [r for r in part.media if r.startswith(("https://", "http://"))]
        links = [f"[{_markdown_escape(url)}]({url})" for url in urls]
        text = "\n".join(t for t in [part.text, *links] if t)
        pieces = to_pieces(text) if text.strip() else []
        files = stored_refs(part.media)  # uploads (telegram_media.py)
        caption = caption_of(pieces) if files else None
        messages: list[PlatformMessage] = []
        if caption is not None:  # the text goes as the first file's caption
            pieces = []
            base_first = {**base}
            if reply is not None:
                base_first["reply_parameters"] = {
                    "message_id": reply,
                    "allow_sending_without_reply": True,
                }
            messages += file_messages(base_first, files[:1], caption)
            files = files[1:]
        for piece in pieces:
            params = {**base, "text": piece.html if piece.html is not None else piece.plain}
            if piece.html is not None:
                params["parse_mode"] = "HTML"
            if reply is not None and not messages:
                params["reply_parameters"] = {
                    "message_id": reply,
                    "allow_sending_without_reply": True,
                }
            messages.append(
                PlatformMessage({"method": "sendMessage", "params": params, "plain": piece.plain})
            )
        for ref in part.media:
            media = parse_media_ref(ref)
            if media is not None:
                params = {**base, media.kind: media.file_id}
                method = SEND_MEDIA[media.kind]
                messages.append(PlatformMessage({"method": method, "params": params}))
        messages += file_messages(base, files, None)
        buttons = keyboard(part.approval_id) if part.approval_id else None
        texts = [m for m in messages if m.payload["method"] == "sendMessage"]
        if buttons is not None and texts:
            texts[-1].payload["params"]["reply_markup"] = buttons
        return messages

    async def send(self, account: str, message: PlatformMessage) -> None:
        if account != self.account:
            raise Undeliverable(f"no Telegram account {account[:64]!r} (only {self.account!r})")
        method, params = str(message.payload["method"]), dict(message.payload["params"])
        upload: Upload | None = None
        if "upload" in message.payload:  # a stored file: its bytes from the media service
            upload = await load(self.media, message.payload["upload"])
            method = upload_method(method, len(upload.data))
        try:
            await self._post(method, params, upload)
        except BotApiError as exc:
            if message.payload.get(BEST_EFFORT) and exc.code == 400:  # a query too old...
                log.info("telegram %s refused: %s", method, exc.description)
                return
            again = second_try(exc, params, message.payload.get("plain"))
            if again is None:
                raise self._failure(exc) from None
            try:
                await self._post(method, again, upload)
            except BotApiError as exc2:
                raise self._failure(exc2) from None
        self._failures = 0

    async def _post(
        self, method: str, params: dict[str, Any], upload: Upload | None = None
    ) -> None:
        try:
            if upload is None:
                await self.call(method, params)
            else:
                file = (upload.name, upload.data, upload.mime)
                await self.api.upload(method, params, FIELDS[method], file)
        except httpx.HTTPError as exc:  # refused, reset, timed out
            raise self._backoff(f"telegram unreachable: {type(exc).__name__}") from None

    def _failure(self, exc: BotApiError) -> RetryLater | Undeliverable:
        if exc.code == 429:
            wait = exc.retry_after if exc.retry_after is not None else 1.0
            return RetryLater("telegram rate limited", min(max(wait, 0.0), MAX_RETRY_AFTER_S))
        if exc.code >= 500:
            return self._backoff(f"telegram {exc.code}")
        if exc.code in (401, 404):
            return Undeliverable(f"telegram refused the bot token ({exc.code})")
        return Undeliverable(f"telegram refused the message: {exc.code} {exc.description}")

    def _backoff(self, reason: str) -> RetryLater:
        self._failures += 1
        return RetryLater(reason, min(2.0 ** (self._failures - 1), MAX_BACKOFF_S))


def _markdown_escape(text: str) -> str:
    return _MD_LABEL.sub(r"\\\1", text)


def _chat(chat_id: str) -> int | str:
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


def _adapter(settings: GatewaySettings, bot: Bot) -> TelegramAdapter:
    return TelegramAdapter(
        bot.token,
        bot.secret,
        bot.api_base,
        mode=bot.mode,
        webhook_url=bot.webhook_url,
        settings=settings,
        account=bot.account,
    )


PLATFORM = Platform(TelegramAdapter.name, configured_bots, _adapter)


def from_settings(settings: GatewaySettings) -> ChannelAdapter | None:
    """The ``default`` bot (SB_TELEGRAM_BOT_TOKEN) alone as before, or with the named ones of
    SB_TELEGRAM_ACCOUNTS every bot behind one :class:`~.accounts.Accounts`."""
    return PLATFORM.adapter(settings)
