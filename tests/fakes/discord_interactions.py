"""Discord's side of the interactions endpoint, for tests: interactions in Discord's own JSON
shapes (PING, a slash command in a server channel or in a DM with the bot, a click on a
message's button), signed as Discord signs them: ``X-Signature-Ed25519`` is the hex Ed25519
signature, by the application's key, of ``X-Signature-Timestamp`` (unix seconds) followed by the
raw body::

    signer = DiscordInteractions(application_id="1100000000000000001")
    body, headers = signer.request(signer.slash_command("what time is it?", guild_id=GUILD))
    # SB_DISCORD_PUBLIC_KEY=signer.public_key
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from nacl.signing import SigningKey

__all__ = ["DiscordInteractions", "snowflake"]

DISCORD_EPOCH_MS = 1_420_070_400_000


def snowflake(at: float | None = None) -> str:
    """A Discord id: milliseconds since Discord's epoch shifted left 22 bits, plus noise."""
    ms = int((time.time() if at is None else at) * 1000) - DISCORD_EPOCH_MS
    return str((ms << 22) | random.getrandbits(22))


def user(user_id: str, name: str = "ada") -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "discriminator": "0",
        "global_name": name.title(),
        "avatar": None,
        "avatar_decoration_data": None,
        "public_flags": 0,
    }


class DiscordInteractions:
    """Builds and signs interactions for ``application_id`` with a fresh Ed25519 key;
    ``on_token`` is told of every interaction token made (the fake REST API accepts its
    webhooks from then on)."""

    def __init__(
        self,
        application_id: str | None = None,
        *,
        on_token: Callable[[str, str, str], None] | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.application_id = application_id or snowflake()
        self.signing_key = SigningKey.generate()
        self.on_token = on_token
        self.now = now

    @property
    def public_key(self) -> str:
        """The hex public key (the Developer Portal's "Public Key": SB_DISCORD_PUBLIC_KEY)."""
        return self.signing_key.verify_key.encode().hex()

    def sign(self, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        stamp = str(int(self.now()) if timestamp is None else timestamp)
        signature = self.signing_key.sign(stamp.encode() + body).signature.hex()
        return {
            "x-signature-ed25519": signature,
            "x-signature-timestamp": stamp,
            "content-type": "application/json",
            "user-agent": "Discord-Interactions/1.0 (+https://discord.com)",
        }

    def request(
        self, payload: dict[str, Any] | bytes, *, timestamp: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """A signed call: the raw body and its headers."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return body, self.sign(body, timestamp)

    def _token(self, channel_id: str) -> str:
        interaction = snowflake()
        token = f"aW50ZXJhY3Rpb246{interaction}:{secrets.token_urlsafe(96)}".replace(":", "_")
        if self.on_token is not None:
            self.on_token(token, self.application_id, channel_id)
        return token

    def ping(self) -> dict[str, Any]:
        return {
            "application_id": self.application_id,
            "entitlements": [],
            "id": snowflake(),
            "token": self._token(""),
            "type": 1,
            "user": user("1000000000000000001", "discord"),
            "version": 1,
        }

    def slash_command(
        self,
        prompt: str,
        *,
        user_id: str = "4100000000000000001",
        channel_id: str = "4200000000000000001",
        guild_id: str | None = None,
        name: str = "ask",
        option: str = "prompt",
    ) -> dict[str, Any]:
        """``/<name> <option>:<prompt>`` used in ``guild_id``'s channel, or in a DM with the
        bot (``guild_id`` None; the DM channel is ``channel_id``)."""
        invoker = user(user_id)
        payload: dict[str, Any] = {
            "app_permissions": "562949953601536",
            "application_id": self.application_id,
            "channel_id": channel_id,
            "data": {
                "id": "4300000000000000001",
                "name": name,
                "options": [{"name": option, "type": 3, "value": prompt}],
                "type": 1,
            },
            "entitlement_sku_ids": [],
            "entitlements": [],
            "id": snowflake(),
            "locale": "en-US",
            "token": self._token(channel_id),
            "type": 2,
            "version": 1,
        }
        if guild_id is None:
            payload["channel"] = {
                "flags": 0,
                "id": channel_id,
                "last_message_id": None,
                "recipients": [invoker],
                "type": 1,
            }
            payload["context"] = 1  # BOT_DM
            payload["authorizing_integration_owners"] = {"1": user_id}
            payload["user"] = invoker
            return payload
        payload["channel"] = {
            "flags": 0,
            "guild_id": guild_id,
            "id": channel_id,
            "last_message_id": None,
            "name": "general",
            "nsfw": False,
            "parent_id": None,
            "permissions": "2248473465835073",
            "position": 0,
            "rate_limit_per_user": 0,
            "topic": None,
            "type": 0,
        }
        payload["context"] = 0  # GUILD
        payload["authorizing_integration_owners"] = {"0": guild_id}
        payload["guild"] = {"features": [], "id": guild_id, "locale": "en-US"}
        payload["guild_id"] = guild_id
        payload["guild_locale"] = "en-US"
        payload["member"] = {
            "avatar": None,
            "communication_disabled_until": None,
            "deaf": False,
            "flags": 0,
            "joined_at": "2024-01-01T00:00:00.000000+00:00",
            "mute": False,
            "nick": None,
            "pending": False,
            "permissions": "2248473465835073",
            "premium_since": None,
            "roles": [],
            "user": invoker,
        }
        return payload

    def click(
        self,
        message: dict[str, Any],
        custom_id: str,
        *,
        user_id: str = "4100000000000000001",
        guild_id: str | None = None,
    ) -> dict[str, Any]:
        """A MESSAGE_COMPONENT interaction (type 3): ``user_id`` pressed the button
        ``custom_id`` under ``message`` (a message object, as Discord includes it), in its
        channel of ``guild_id`` or in a DM with the bot."""
        payload = self.slash_command(
            "", user_id=user_id, channel_id=str(message["channel_id"]), guild_id=guild_id
        )
        payload["type"] = 3
        payload["data"] = {"custom_id": custom_id, "component_type": 2}
        payload["message"] = message
        return payload
