"""WhatsApp (Cloud API): Meta's webhook in (``/channels/whatsapp/<account>``), the Graph API's
``/<phone-number-id>/messages`` out. See docs/channels/whatsapp.md.

Meta checks the webhook with ``GET ?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...``
(:meth:`WhatsAppAdapter.challenge`: the challenge echoed when the verify token matches, else
403); events arrive by ``POST`` signed ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw
body with the app secret>``, checked before anything is parsed. Messages are parsed by
:mod:`.whatsapp_format`, their files fetched by :mod:`.whatsapp_media`; each is marked read when
it arrives, and while the agent answers the read receipt carries WhatsApp's typing indicator.

Errors: Graph's 131047 (more than 24 hours since the user last wrote: only a template may go)
and every other refusal are :class:`Undeliverable` with Meta's own text; 429 and Graph's
rate-limit codes, 5xx and an unreachable Graph are retried (:class:`RetryLater`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import httpx

from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..accounts_config import DEFAULT
from ..config import GatewaySettings
from .accounts import Platform
from .base import (
    ChannelAdapter,
    ChannelError,
    Inbound,
    InboundRequest,
    PlatformMessage,
    RetryLater,
    Unauthorized,
    Undeliverable,
)
from .media_out import load
from .whatsapp_accounts import Number, configured_numbers
from .whatsapp_format import format_part, parse_events
from .whatsapp_media import ingest

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 60.0
OUTSIDE_WINDOW = 131047  # "Re-engagement message": the 24-hour customer service window closed
# Graph's codes for "too many calls now" (besides HTTP 429), and for "try again".
RATE_LIMIT_CODES = frozenset({4, 17, 32, 613, 80007, 130429, 131048, 131056})
TRANSIENT_CODES = frozenset({1, 2, 131000, 131016})
# A read receipt is sent before its message is published: a slow Graph must not hold Meta's call.
READ_TIMEOUT_S = 3.0
_LAST_IDS = 10_000  # chats whose last message id is remembered (read receipts with typing)


class Forbidden(ChannelError):
    """The verification GET does not carry the verify token."""

    status = 403


class WhatsAppAdapter:
    """One WhatsApp business number (``default`` unless named, SB_WHATSAPP_ACCOUNTS)."""

    name = "whatsapp"

    def __init__(
        self,
        access_token: str,
        app_secret: str,
        verify_token: str,
        phone_number_id: str,
        api_base: str = "https://graph.facebook.com/v21.0",
        *,
        account: str = DEFAULT,
        timeout_s: float = 15.0,
    ) -> None:
        self.account = account
        self.accounts: Collection[str] = (account,)
        self.leased = False  # webhooks only
        self.media: MediaClient | None = None
        self.api_base = api_base.rstrip("/")
        self.phone_number_id = phone_number_id
        self._secret = app_secret.encode()
        self._verify_token = verify_token.encode()
        self._client = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=timeout_s,
            follow_redirects=False,
        )
        self._last: dict[str, str] = {}  # chat (wa_id) -> its last message id
        self._failures = 0

    def __repr__(self) -> str:  # never the token or the secrets
        return f"WhatsAppAdapter(api_base={self.api_base!r}, number={self.phone_number_id!r})"

    async def start(self, rt: ServiceRuntime | None = None) -> None:
        """Nothing to register: the webhook is set up in Meta's console."""

    async def close(self) -> None:
        await self._client.aclose()

    # --- inbound ---------------------------------------------------------------------------

    def challenge(self, query: Mapping[str, str]) -> str:
        """The answer to Meta's verification GET: ``hub.challenge`` when the verify token
        matches; :class:`Forbidden` otherwise."""
        token = query.get("hub.verify_token", "").encode("utf-8", "replace")
        matches = hmac.compare_digest(token, self._verify_token)
        if query.get("hub.mode") != "subscribe" or not matches:
            raise Forbidden("the verify token does not match")
        return query.get("hub.challenge", "")[:256]

    def verify(self, request: InboundRequest) -> None:
        signature = request.headers.get("x-hub-signature-256", "")
        if not signature:
            raise Unauthorized("missing X-Hub-Signature-256")
        expected = "sha256=" + hmac.new(self._secret, request.body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise Unauthorized("bad X-Hub-Signature-256")

    def parse(self, request: InboundRequest) -> Inbound:
        messages = parse_events(request.body)
        for message in messages:
            if len(self._last) >= _LAST_IDS:
                self._last.clear()
            self._last[message.chat.id] = message.message_id
        return Inbound(messages)

    async def fetch_attachments(self, message: messages_pb2.InboundMessage) -> None:
        """Mark the message read (best effort) and fetch its files into the media service."""
        await self._read(message.message_id, typing=False)
        if self.media is not None and message.media:
            await ingest(self._client, self.api_base, self.media, message)

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        """The read receipt of the chat's last message with ``typing_indicator`` (WhatsApp
        shows it up to 25 seconds or until the reply)."""
        message_id = self._last.get(chat.id)
        if message_id:
            await self._read(message_id, typing=True)

    async def _read(self, message_id: str, *, typing: bool) -> None:
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
        }
        if typing:
            body["typing_indicator"] = {"type": "text"}
        try:
            response = await self._client.post(
                self._messages_url, json=body, timeout=READ_TIMEOUT_S
            )
        except httpx.HTTPError as exc:
            log.warning("whatsapp read receipt failed (%s)", type(exc).__name__)
            return
        if response.status_code != 200:
            log.warning("whatsapp read receipt refused (%s)", response.status_code)

    # --- outbound --------------------------------------------------------------------------

    @property
    def _messages_url(self) -> str:
        return f"{self.api_base}/{self.phone_number_id}/messages"

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        return format_part(part)

    async def send(self, account: str, message: PlatformMessage) -> None:
        if account != self.account:
            raise Undeliverable(f"no WhatsApp account {account[:64]!r} (only {self.account!r})")
        payload = dict(message.payload)
        kind = str(payload["type"])
        try:
            if "upload" in payload:
                upload = await load(self.media, payload.pop("upload"))
                media_id = await self._upload(upload.name, upload.mime, upload.data)
                payload[kind] = {"id": media_id}
                if kind == "document":
                    payload[kind]["filename"] = upload.name
            body = {"messaging_product": "whatsapp", "recipient_type": "individual", **payload}
            response = await self._client.post(self._messages_url, json=body)
        except httpx.HTTPError as exc:  # refused, reset, timed out
            raise self._backoff(f"whatsapp unreachable: {type(exc).__name__}") from None
        self._check(response)
        self._failures = 0

    async def _upload(self, name: str, mime: str, data: bytes) -> str:
        response = await self._client.post(
            f"{self.api_base}/{self.phone_number_id}/media",
            data={"messaging_product": "whatsapp", "type": mime},
            files={"file": (name, data, mime)},
        )
        self._check(response)
        media_id = _json(response).get("id")
        if not isinstance(media_id, str) or not media_id:
            raise self._backoff("whatsapp upload answered no media id")
        return media_id

    def _check(self, response: httpx.Response) -> None:
        if response.status_code == 200:
            return
        error = _json(response).get("error")
        error = error if isinstance(error, dict) else {}
        code = error.get("code") if isinstance(error.get("code"), int) else 0
        if code == OUTSIDE_WINDOW:  # permanent until the user writes again: no retries
            raise Undeliverable(f"whatsapp refused the message: {_describe(error, response)}")
        if response.status_code == 429 or code in RATE_LIMIT_CODES:
            raise RetryLater(f"whatsapp rate limited ({code})", _retry_after(response))
        if response.status_code >= 500 or code in TRANSIENT_CODES:
            raise self._backoff(f"whatsapp {response.status_code} ({code})")
        raise Undeliverable(f"whatsapp refused the message: {_describe(error, response)}")

    def _backoff(self, reason: str) -> RetryLater:
        self._failures += 1
        return RetryLater(reason, min(2.0 ** (self._failures - 1), MAX_BACKOFF_S))


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(error: Mapping[str, Any], response: httpx.Response) -> str:
    """Meta's own words: the message, its details and code (131047: outside the 24-hour
    window)."""
    details = error.get("error_data")
    details = details.get("details") if isinstance(details, dict) else None
    words = [str(w)[:300] for w in (error.get("message"), details) if w]
    code = error.get("code")
    text = " ".join(words) or f"HTTP {response.status_code}"
    return f"{text} (code {code})" if isinstance(code, int) else text


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("retry-after", "1")), 0.0), 3600.0)
    except ValueError:
        return 1.0


def _adapter(settings: GatewaySettings, number: Number) -> WhatsAppAdapter:
    return WhatsAppAdapter(
        number.token,
        number.app_secret,
        number.verify_token,
        number.phone_number_id,
        number.api_base,
        account=number.account,
    )


PLATFORM = Platform(WhatsAppAdapter.name, configured_numbers, _adapter)


def from_settings(settings: GatewaySettings) -> ChannelAdapter | None:
    """The ``default`` number alone, or with SB_WHATSAPP_ACCOUNTS every number behind one
    :class:`~.accounts.Accounts`."""
    return PLATFORM.adapter(settings)
