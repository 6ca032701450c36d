"""Discord: the interactions endpoint in (``POST /channels/discord/default``), REST out.

Configured by ``SB_DISCORD_BOT_TOKEN`` and ``SB_DISCORD_PUBLIC_KEY`` (the application's hex
Ed25519 key) together; ``SB_DISCORD_APPLICATION_ID`` is a fallback for replies (interactions
name their application) and ``SB_DISCORD_API_BASE`` points the REST client elsewhere (tests,
proxies). Calls are verified as Discord signs them: ``X-Signature-Ed25519`` over
``X-Signature-Timestamp`` + the raw body, the timestamp within five minutes. Interactions are
parsed by :mod:`.discord_interactions`, replies formatted by :mod:`.discord_format`.

A reply to an interaction (``reply_context`` holds its token) is its follow-up: the first
message of part 0 edits the deferred response (``PATCH /webhooks/<app>/<token>/messages/
@original``, idempotent), later ones are follow-ups (``POST /webhooks/<app>/<token>``, which
Discord cannot deduplicate: a retry after a lost answer posts twice). Other replies are channel
messages (``POST /channels/<id>/messages``) with Discord's ``nonce`` + ``enforce_nonce`` so a
retried send is not posted twice. With ``SB_DISCORD_GATEWAY=true`` the adapter also competes
for the gateway connection (DMs and mentions, :mod:`.discord_gateway`). See
docs/channels/discord.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from switchboard.media import MediaClient, MediaReference
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..accounts_config import DEFAULT
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
from .discord_accounts import App, configured_apps
from .discord_buttons import answer_body, notice_components
from .discord_format import message_body, split_content
from .discord_gateway import DiscordGatewayConnection, start_gateway
from .discord_interactions import (
    APPLICATION_ID,
    INTERACTION_TOKEN,
    SNOWFLAKE,
    TOKEN,
    parse_interaction,
)
from .lease import LeasedWork
from .media_out import load, stored_refs, upload_spec

log = logging.getLogger(__name__)

ACCOUNT = DEFAULT  # the application of SB_DISCORD_BOT_TOKEN; named: SB_DISCORD_ACCOUNTS
REPLAY_WINDOW_S = 300
MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 3600.0
INTERACTION_TTL_S = 15 * 60  # an interaction's token (and its response) lasts 15 minutes
MAX_THINKING = 10_000
UPLOAD_TIMEOUT_S = 60.0
# Discord asks for "DiscordBot ($url, $version)"; the project has no public URL to name.
USER_AGENT = "DiscordBot (switchboard, 1.0)"
# Where a platform message goes (PlatformMessage.payload["route"]).
ORIGINAL, FOLLOWUP, CHANNEL = "original", "followup", "channel"
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


class DiscordAdapter:
    """A Discord application's bot: one account (``default`` unless named)."""

    name = "discord"

    def __init__(
        self,
        bot_token: str,
        public_key: str,
        api_base: str = "https://discord.com/api/v10",
        application_id: str = "",
        *,
        now: Callable[[], float] = time.time,
        timeout_s: float = 15.0,
        gateway: bool = False,
        account: str = ACCOUNT,
    ) -> None:
        self.account = account
        self.accounts = (account,)  # webhooks to any other account are 404 (channels/routes.py)
        self._token = bot_token
        self._key = VerifyKey(bytes.fromhex(public_key))
        self.api_base = api_base.rstrip("/")
        self.application_id = application_id
        self._now = now
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None
        self.gateway = gateway  # hold the gateway connection (under a lease) when started
        self.leased = gateway
        self._gateway: LeasedWork | None = None
        self.on_publish: OnPublish | None = None  # gateway-connection messages (typing)
        self.connection: DiscordGatewayConnection | None = None
        self._failures = 0  # consecutive 5xx and connection failures: the backoff's exponent
        # Channels where an interaction's response shows "<bot> is thinking..." (until the
        # token expires): no typing indicator on top of it.
        self._thinking: dict[str, float] = {}
        self.media: MediaClient | None = None  # files of replies come from it (server.py)

    def __repr__(self) -> str:  # never the token
        return f"DiscordAdapter(api_base={self.api_base!r}, app={self.application_id!r})"

    async def start(self, rt: ServiceRuntime | None = None) -> None:
        """Open the REST client, and with ``gateway`` start competing for the gateway
        connection's lease. No call is made here: Discord out of reach does not stop the
        gateway, and a refused token shows on the first send (and in the connection's log)."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.api_base,
                timeout=self._timeout_s,
                headers={"User-Agent": USER_AGENT},
                follow_redirects=False,
            )
        if self.gateway and rt is not None and self._gateway is None:
            self._gateway, self.connection = await start_gateway(
                rt,
                self._token,
                lambda: self._client,
                account=self.account,
                on_publish=self.on_publish,
            )

    async def close(self) -> None:
        if self._gateway is not None:
            await self._gateway.stop()
            self._gateway = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        """``POST /channels/<id>/typing``; any failure is ignored. Not where a deferred
        interaction response already shows that the bot is thinking."""
        channel = thread_id if SNOWFLAKE.fullmatch(thread_id) else chat.id
        if self._client is None or not SNOWFLAKE.fullmatch(channel):
            return
        if self._thinking.get(channel, 0.0) > time.monotonic():
            return
        try:
            response = await self._client.post(f"/channels/{channel}/typing", headers=self._bot())
        except httpx.HTTPError as exc:
            log.debug("discord typing failed: %s", type(exc).__name__)
            return
        if response.status_code >= 300:
            log.debug("discord typing refused: %s", response.status_code)

    # --- inbound ---------------------------------------------------------------------------

    def verify(self, request: InboundRequest) -> None:
        signature = request.headers.get("x-signature-ed25519", "")
        timestamp = request.headers.get("x-signature-timestamp", "")
        if not signature or not timestamp:
            raise Unauthorized("missing Discord signature")
        if not _TIMESTAMP.fullmatch(timestamp) or len(signature) != 128:
            raise Unauthorized("bad Discord signature")
        try:
            self._key.verify(timestamp.encode() + request.body, bytes.fromhex(signature))
        except (BadSignatureError, ValueError):
            raise Unauthorized("bad Discord signature") from None
        if abs(self._now() - int(timestamp)) > REPLAY_WINDOW_S:
            raise Unauthorized("replayed or stale request")

    def parse(self, request: InboundRequest) -> Inbound:
        inbound = parse_interaction(request.body)
        now = time.monotonic()
        if len(self._thinking) > MAX_THINKING:
            self._thinking = {k: t for k, t in self._thinking.items() if t > now}
        for message in inbound.messages:
            if not message.HasField("click"):  # a click's deferred update shows nothing
                self._thinking[message.chat.id] = now + INTERACTION_TTL_S
        return inbound

    # --- outbound --------------------------------------------------------------------------

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        """The calls that deliver one part: an interaction's response edit and follow-ups, or
        channel messages (the first one a reply to ``reply_to`` when set). Media references
        that are URLs go as links (Discord shows a preview); stored files (``media:``) are
        uploaded as attachments (``multipart/form-data``: ``payload_json`` and ``files[0]``),
        the text in the first one's content when it fits one message. An approval notice's
        last message carries the Approve and Deny buttons; the answer to a click edits the
        clicked message or follows up to the clicker alone (discord_buttons.py)."""
        if part.HasField("click"):
            return self._click_answer(part)
        links = [ref for ref in part.media if ref.startswith(("https://", "http://"))]
        text = "\n".join(t for t in [part.text, *links] if t)
        entries = _entries(split_content(text) if text.strip() else [], stored_refs(part.media))
        if not entries:
            return []
        token = part.reply_context.get(INTERACTION_TOKEN, "")
        if token:
            application = part.reply_context.get(APPLICATION_ID) or self.application_id
            if not TOKEN.fullmatch(token) or not SNOWFLAKE.fullmatch(application):
                raise Undeliverable("the part's Discord interaction is malformed")
            hook = {"application_id": application, "interaction_token": token}
            return [
                _with_file(
                    {
                        "route": ORIGINAL if part.part == 0 and i == 0 else FOLLOWUP,
                        **hook,
                        "json": message_body(piece),
                    },
                    file,
                )
                for i, (piece, file) in enumerate(entries)
            ]
        if not SNOWFLAKE.fullmatch(part.chat.id):
            raise Undeliverable("the part names no Discord channel")
        messages = []
        for i, (piece, file) in enumerate(entries):
            body = message_body(piece)
            if part.run_id:  # Discord drops a second message with the same nonce
                body["nonce"] = _nonce(part.run_id, part.part, i)
                body["enforce_nonce"] = True
            if i == 0 and SNOWFLAKE.fullmatch(part.reply_to):
                body["message_reference"] = {
                    "message_id": part.reply_to,
                    "fail_if_not_exists": False,
                }
            messages.append(
                _with_file({"route": CHANNEL, "channel_id": part.chat.id, "json": body}, file)
            )
        components = notice_components(part.approval_id) if part.approval_id else None
        if components is not None:
            messages[-1].payload["json"]["components"] = components
        return messages

    def _click_answer(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        token = part.reply_context.get(INTERACTION_TOKEN, "")
        application = part.reply_context.get(APPLICATION_ID) or self.application_id
        if not TOKEN.fullmatch(token) or not SNOWFLAKE.fullmatch(application):
            raise Undeliverable("the part's Discord interaction is malformed")
        answer = answer_body(part)
        if answer is None:
            return []
        edit, body = answer
        hook = {"application_id": application, "interaction_token": token}
        return [PlatformMessage({"route": ORIGINAL if edit else FOLLOWUP, **hook, "json": body})]

    async def send(self, account: str, message: PlatformMessage) -> None:
        if account != self.account:
            raise Undeliverable(f"no Discord account {account[:64]!r} (only {self.account!r})")
        if self._client is None:
            raise RetryLater("the Discord client is not started", 1.0)
        payload = message.payload
        route = payload["route"]
        if route in (ORIGINAL, FOLLOWUP):
            url = f"/webhooks/{payload['application_id']}/{payload['interaction_token']}"
            method, headers = "POST", {}  # the interaction's token authorizes these
            if route == ORIGINAL:
                method, url = "PATCH", url + "/messages/@original"
        else:
            method, url, headers = (
                "POST",
                f"/channels/{payload['channel_id']}/messages",
                self._bot(),
            )
        try:
            if "upload" in payload:  # a stored file: its bytes from the media service
                upload = await load(self.media, payload["upload"])
                response = await self._client.request(
                    method,
                    url,
                    data={"payload_json": json.dumps(payload["json"])},
                    files={"files[0]": (upload.name, upload.data, upload.mime)},
                    headers=headers,
                    timeout=UPLOAD_TIMEOUT_S,
                )
            else:
                response = await self._client.request(
                    method, url, json=payload["json"], headers=headers
                )
        except httpx.HTTPError as exc:  # refused, reset, timed out: never str(exc) (the URL)
            raise self._backoff(f"discord unreachable: {type(exc).__name__}") from None
        if response.status_code < 300:
            self._failures = 0
            return
        raise self._failure(response, route)

    def _bot(self) -> dict[str, str]:
        return {"Authorization": f"Bot {self._token}"}

    def _failure(self, response: httpx.Response, route: str) -> RetryLater | Undeliverable:
        status = response.status_code
        error = _error(response)
        if status == 429:
            return RetryLater("discord rate limited", _retry_after(response, error))
        if status >= 500:
            return self._backoff(f"discord {status}")
        code, text = error.get("code"), str(error.get("message") or "")[:100]
        if status == 401 and route != CHANNEL:
            return Undeliverable("the Discord interaction's token expired or is invalid")
        if status == 401:
            log.error("Discord refused SB_DISCORD_BOT_TOKEN (401): set the bot's token")
            return Undeliverable("Discord refused the bot token")
        return Undeliverable(f"discord refused the message: {status} {code} {text}".rstrip())

    def _backoff(self, reason: str) -> RetryLater:
        self._failures += 1
        return RetryLater(reason, min(2.0 ** (self._failures - 1), MAX_BACKOFF_S))


def _error(response: httpx.Response) -> dict[str, Any]:
    """Discord's JSON error body (``{"message", "code"}``...), or ``{}``."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(response: httpx.Response, error: dict[str, Any]) -> float:
    """Discord's ``retry_after`` (seconds, a float), else its ``Retry-After`` header."""
    for raw in (error.get("retry_after"), response.headers.get("retry-after")):
        try:
            if raw is not None and not isinstance(raw, bool):
                return min(max(float(raw), 0.0), MAX_RETRY_AFTER_S)
        except (TypeError, ValueError):
            continue
    return 1.0


def _entries(
    pieces: list[str], files: list[MediaReference]
) -> list[tuple[str, MediaReference | None]]:
    """The part's messages as (content, file): the text in the first file's message when it
    is one piece, else the text first and each file after it with no content."""
    if files and len(pieces) <= 1:
        return [(pieces[0] if pieces else "", files[0]), *(("", f) for f in files[1:])]
    return [(piece, None) for piece in pieces] + [("", f) for f in files]


def _with_file(payload: dict[str, Any], file: MediaReference | None) -> PlatformMessage:
    """The message, with ``file`` as its one attachment (``attachments[0]`` names
    ``files[0]``)."""
    if file is not None:
        spec = upload_spec(file)
        payload["json"]["attachments"] = [{"id": 0, "filename": spec["name"]}]
        payload["upload"] = spec
    return PlatformMessage(payload)


def _nonce(run_id: str, part: int, index: int) -> str:
    """A message's nonce (at most 25 characters): the same for every attempt of one message."""
    return hashlib.sha256(f"{run_id}:{part}:{index}".encode()).hexdigest()[:25]


def _adapter(_: GatewaySettings, app: App) -> DiscordAdapter:
    return DiscordAdapter(
        app.token,
        app.public_key,
        app.api_base,
        app.application_id,
        gateway=app.gateway,
        account=app.account,
    )


PLATFORM = Platform(DiscordAdapter.name, configured_apps, _adapter)


def from_settings(settings: GatewaySettings) -> ChannelAdapter | None:
    """The ``default`` application (SB_DISCORD_BOT_TOKEN) alone as before, or with the named
    ones of SB_DISCORD_ACCOUNTS every application behind one :class:`~.accounts.Accounts`."""
    return PLATFORM.adapter(settings)
