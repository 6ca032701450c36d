"""Slack: the Events API in (``POST /channels/slack/default``), ``chat.postMessage`` out.

Configured by ``SB_SLACK_BOT_TOKEN`` (``xoxb-...``) and ``SB_SLACK_SIGNING_SECRET`` together;
``SB_SLACK_API_BASE`` points the Web API client elsewhere (tests, proxies). Calls are verified
by Slack's signing secret (``X-Slack-Signature: v0=<HMAC-SHA256>`` over ``v0:<timestamp>:<raw
body>``, the timestamp within five minutes). Events are parsed by :mod:`.slack_events`, replies
formatted by :mod:`.slack_format`; the same route, verified the same way, takes the clicks on
an approval notice's buttons (interactivity, :mod:`.slack_buttons`). Slack has no typing
indicator for a bot's plain messages: ``typing`` does nothing. See docs/channels/slack.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web import WebClient

from switchboard.errors import ConfigError
from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..accounts_config import DEFAULT
from ..config import GatewaySettings
from .accounts import Platform
from .base import (
    ChannelAdapter,
    Inbound,
    InboundRequest,
    PlatformMessage,
    RetryLater,
    Unauthorized,
    Undeliverable,
)
from .media_out import load, stored_refs, upload_spec
from .slack_accounts import Workspace, configured_workspaces
from .slack_buttons import (
    EPHEMERAL,
    UPDATE,
    answer_messages,
    is_interactive,
    notice_blocks,
    parse_interactivity,
    send_answer,
)
from .slack_events import parse_events
from .slack_files import SlackFiles
from .slack_format import TEXT_LIMIT, split_mrkdwn, to_mrkdwn

log = logging.getLogger(__name__)

ACCOUNT = DEFAULT  # the workspace of SB_SLACK_BOT_TOKEN; named ones: SB_SLACK_ACCOUNTS
REPLAY_WINDOW_S = 300  # Slack's: a request older (or newer) than five minutes is refused
MAX_BACKOFF_S = 60.0
# Errors that say Slack could not take the call now; any other error is the call's own fault
# (channel_not_found, not_in_channel, is_archived, invalid_auth, msg_too_long...).
TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
)
AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_ERROR_CODE = re.compile(r"^[a-z0-9_]{1,64}$")
_SLACK_TS = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")


class SlackAdapter:
    """A Slack workspace's bot: one account (``default`` unless named, SB_SLACK_ACCOUNTS)."""

    name = "slack"

    def __init__(
        self,
        bot_token: str,
        signing_secret: str,
        api_base: str = "https://slack.com/api/",
        *,
        now: Callable[[], float] = time.time,
        timeout_s: int = 15,
        files: SlackFiles | None = None,
        account: str = ACCOUNT,
    ) -> None:
        self.account = account
        self.leased = False  # webhooks only: no connection under a lease
        self.accounts = (account,)  # webhooks to any other account are 404 (channels/routes.py)
        self._secret = signing_secret.encode()
        self._now = now
        # The SDK's own retries are off: delivery retries (and counts) a failed part itself.
        self._client = WebClient(
            token=bot_token, base_url=api_base, timeout=timeout_s, retry_handlers=[]
        )
        self.files = files or SlackFiles(bot_token)  # url_private downloads (slack_files.py)
        self.media: MediaClient | None = None  # files in and out go through it (server.py)
        self.bot_user_id = ""  # from auth.test at start; events also carry it
        self.bot_id = ""
        self._failures = 0  # consecutive 5xx and connection failures: the backoff's exponent

    def __repr__(self) -> str:  # never the token or the secret
        return f"SlackAdapter(api_base={self._client.base_url!r}, bot={self.bot_user_id!r})"

    async def start(self, rt: ServiceRuntime | None = None) -> None:
        """Learn the bot's user id with ``auth.test`` (to know its own messages and mentions).
        A token Slack refuses stops the gateway; Slack out of reach does not (the events'
        authorizations name the bot too)."""
        try:
            response = await asyncio.to_thread(self._client.auth_test)
        except SlackApiError as exc:
            error = _error_code(exc)
            if error in AUTH_ERRORS:
                which = "SB_SLACK_BOT_TOKEN"
                if self.account != ACCOUNT:
                    which = f"the bot token of SB_SLACK_ACCOUNTS {self.account!r}"
                raise ConfigError(
                    f"Slack refused {which} ({error}): set the bot's xoxb- token."
                ) from None
            log.warning("slack auth.test failed (%s); continuing without the bot's id", error)
            return
        except (OSError, http.client.HTTPException) as exc:
            log.warning("slack auth.test failed (%s); continuing", type(exc).__name__)
            return
        self.bot_user_id = str(response.get("user_id") or "")
        self.bot_id = str(response.get("bot_id") or "")
        log.info("slack bot is %s in team %s", self.bot_user_id, response.get("team_id"))

    async def close(self) -> None:
        """Nothing to close: the client opens a connection per call."""

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        """Slack has no typing indicator for a bot's plain messages: nothing to do."""

    # --- inbound ---------------------------------------------------------------------------

    def verify(self, request: InboundRequest) -> None:
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not timestamp or not signature:
            raise Unauthorized("missing Slack signature")
        if not _TIMESTAMP.match(timestamp):
            raise Unauthorized("bad Slack request timestamp")
        if abs(self._now() - int(timestamp)) > REPLAY_WINDOW_S:
            raise Unauthorized("replayed or stale request")
        base = b"v0:" + timestamp.encode() + b":" + request.body
        expected = "v0=" + hmac.new(self._secret, base, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise Unauthorized("bad Slack signature")

    def parse(self, request: InboundRequest) -> Inbound:
        retry = request.headers.get("x-slack-retry-num")
        if retry:  # the same event again: its message id makes it a duplicate on INBOUND
            reason = request.headers.get("x-slack-retry-reason", "")[:40]
            log.info("slack retry %s (%s)", retry[:4], reason)
        if is_interactive(request.headers, request.body):  # a button's click
            return parse_interactivity(request.body)
        return parse_events(request.body, self.bot_user_id)

    async def fetch_attachments(self, message: messages_pb2.InboundMessage) -> None:
        """Files (``url_private``) into the media service (slack_files.py)."""
        if self.media is not None and message.media:
            await self.files.ingest(self.media, message)

    # --- outbound --------------------------------------------------------------------------

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        """``chat.postMessage`` calls for one part: mrkdwn, split at Slack's text limit, in
        the part's thread (``thread_ts``) when it has one. Media references that are URLs
        go as links (Slack shows a preview); stored files (``media:``) are uploaded after
        the text (``files_upload_v2``: files.getUploadURLExternal, the upload,
        files.completeUploadExternal), each one platform message. An approval notice's last
        message carries the Approve and Deny buttons (``blocks``); the answer to a click updates
        the notice or tells the clicker alone (slack_buttons.py)."""
        if not part.chat.id:
            raise Undeliverable("the part names no Slack channel")
        if part.HasField("click"):
            return answer_messages(part)
        text = to_mrkdwn(part.text)
        links = [f"<{ref}>" for ref in part.media if ref.startswith(("https://", "http://"))]
        text = "\n".join(t for t in [text, *links] if t)
        files = stored_refs(part.media)
        if not text.strip() and not files:
            return []
        thread_ts = _thread_ts(part.thread_id) or _thread_ts(part.reply_to)
        messages = []
        pieces = split_mrkdwn(text, TEXT_LIMIT) if text.strip() else []
        contents: list[dict[str, Any]] = [{"text": p} for p in pieces]
        contents += [{"upload": upload_spec(f)} for f in files]
        for payload in contents:
            payload["channel"] = part.chat.id
            if thread_ts:
                payload["thread_ts"] = thread_ts
            messages.append(PlatformMessage(payload))
        texts = [m.payload for m in messages if "text" in m.payload]
        blocks = notice_blocks(texts[-1]["text"], part.approval_id) if texts else None
        if blocks is not None:
            texts[-1]["blocks"] = blocks
        return messages

    async def send(self, account: str, message: PlatformMessage) -> None:
        if account != self.account:
            raise Undeliverable(f"no Slack account {account[:64]!r} (only {self.account!r})")
        payload = message.payload
        upload = await load(self.media, payload["upload"]) if "upload" in payload else None
        try:
            if upload is not None:
                await asyncio.to_thread(
                    self._client.files_upload_v2,
                    file=upload.data,
                    filename=upload.name,
                    title=upload.name,
                    channel=payload["channel"],
                    thread_ts=payload.get("thread_ts"),
                )
            elif payload.get("call") in (UPDATE, EPHEMERAL):  # a click's answer
                await asyncio.to_thread(send_answer, self._client, payload)
            else:
                await asyncio.to_thread(
                    self._client.chat_postMessage,
                    channel=payload["channel"],
                    text=payload["text"],
                    thread_ts=payload.get("thread_ts"),
                    mrkdwn=True,
                    blocks=payload.get("blocks"),
                )
        except SlackApiError as exc:
            raise self._api_failure(exc) from None
        except SlackRequestError:  # the upload to Slack's upload URL failed
            raise self._backoff("slack file upload failed") from None
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
            raise self._backoff(f"slack unreachable: {type(exc).__name__}") from None
        self._failures = 0

    def _api_failure(self, exc: SlackApiError) -> RetryLater | Undeliverable:
        status = int(getattr(exc.response, "status_code", 0) or 0)
        error = _error_code(exc)
        if status == 429 or error == "ratelimited":
            return RetryLater("slack ratelimited", _retry_after(exc.response.headers))
        if status >= 500 or error in TRANSIENT_ERRORS:
            return self._backoff(f"slack {error or status}")
        return Undeliverable(f"slack refused the message: {error or status}")

    def _backoff(self, reason: str) -> RetryLater:
        self._failures += 1
        return RetryLater(reason, min(2.0 ** (self._failures - 1), MAX_BACKOFF_S))


def _error_code(exc: SlackApiError) -> str:
    """Slack's error code (``channel_not_found``...), or ``""`` when the body has none."""
    data = getattr(exc.response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) and _ERROR_CODE.match(error) else ""


def _retry_after(headers: Mapping[str, Any]) -> float:
    for key, value in headers.items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) and value else value
            try:
                return min(max(float(raw), 0.0), 3600.0)
            except (TypeError, ValueError):
                break
    return 1.0


def _thread_ts(ref: str) -> str:
    """The Slack ``ts`` in a thread id or message id (``<ts>`` or ``<channel>:<ts>[...]``)."""
    for token in ref.split(":")[:2]:
        if _SLACK_TS.fullmatch(token):
            return token
    return ""


def _adapter(settings: GatewaySettings, workspace: Workspace) -> SlackAdapter:
    token = workspace.token
    files = SlackFiles(token, settings.slack_file_origins, settings.slack_file_allow_cidrs)
    return SlackAdapter(
        token, workspace.secret, workspace.api_base, files=files, account=workspace.account
    )


PLATFORM = Platform(SlackAdapter.name, configured_workspaces, _adapter)


def from_settings(settings: GatewaySettings) -> ChannelAdapter | None:
    """The ``default`` workspace (SB_SLACK_BOT_TOKEN) alone as before, or with the named ones
    of SB_SLACK_ACCOUNTS every workspace behind one :class:`~.accounts.Accounts`."""
    return PLATFORM.adapter(settings)
