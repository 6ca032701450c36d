"""Signed Slack Events API calls, as Slack sends them to an app's Request URL: the
``event_callback`` envelope (team_id, api_app_id, event_id, event_time, authorizations) around
``app_mention`` and ``message`` events, and ``url_verification``; signed with the app's signing
secret (``X-Slack-Signature: v0=<HMAC-SHA256 of "v0:<timestamp>:<body>">``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from typing import Any


class SlackEvents:
    """Builds Events API calls of one app, signed with its signing secret."""

    def __init__(
        self, secret: str | None = None, *, team_id: str = "T0FAKE", bot_user_id: str = "U0BOT"
    ) -> None:
        self.secret = secret or uuid.uuid4().hex
        self.team_id, self.bot_user_id = team_id, bot_user_id
        self._seq = 0

    def ts(self) -> str:
        """A fresh message timestamp, unique to this builder."""
        self._seq += 1
        return f"{int(time.time())}.{self._seq:06d}"

    def _message(self, kind: str, user: str, text: str, channel: str, **extra: Any) -> dict:
        ts = extra.pop("ts", None) or self.ts()
        event: dict[str, Any] = {
            "client_msg_id": str(uuid.uuid4()),
            "type": kind,
            "text": text,
            "user": user,
            "ts": ts,
            "blocks": [
                {
                    "type": "rich_text",
                    "block_id": "b1",
                    "elements": [
                        {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
                    ],
                }
            ],
            "team": self.team_id,
            "channel": channel,
            "event_ts": ts,
        }
        event.update({k: v for k, v in extra.items() if v is not None})
        return event

    def app_mention(self, user: str, text: str, channel: str, **extra: Any) -> dict:
        """``extra``: ts, thread_ts, files... (``text`` should hold ``<@bot>``, as Slack's)."""
        return self._message("app_mention", user, text, channel, **extra)

    def message(
        self, user: str, text: str, channel: str, channel_type: str = "im", **extra: Any
    ) -> dict:
        """A ``message`` event (``channel_type``: im, channel, group, mpim); ``extra``: ts,
        thread_ts, subtype, bot_id, files..."""
        return self._message("message", user, text, channel, channel_type=channel_type, **extra)

    def envelope(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        return {
            "token": "legacy-verification-token",
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "api_app_id": "A0FAKE",
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }

    def url_verification(self, challenge: str) -> dict[str, Any]:
        return {
            "token": "legacy-verification-token",
            "challenge": challenge,
            "type": "url_verification",
        }

    def sign(self, body: bytes, timestamp: int) -> str:
        base = b"v0:" + str(timestamp).encode() + b":" + body
        return "v0=" + hmac.new(self.secret.encode(), base, hashlib.sha256).hexdigest()

    def request(
        self,
        payload: dict[str, Any] | bytes,
        *,
        timestamp: int | None = None,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
    ) -> tuple[bytes, dict[str, str]]:
        """A signed call: its raw body and headers (``timestamp``: now by default; a retry
        carries ``X-Slack-Retry-Num`` and ``-Reason``)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {
            "content-type": "application/json",
            "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            "x-slack-request-timestamp": str(ts),
            "x-slack-signature": self.sign(body, ts),
        }
        if retry_num is not None:
            headers["x-slack-retry-num"] = str(retry_num)
            headers["x-slack-retry-reason"] = retry_reason
        return body, headers
