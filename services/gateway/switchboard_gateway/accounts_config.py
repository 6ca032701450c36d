"""Named channel accounts (issue 27): ``SB_TELEGRAM_ACCOUNTS``, ``SB_SLACK_ACCOUNTS`` and
``SB_DISCORD_ACCOUNTS`` hold more bots, workspaces or applications besides the single-account
settings (the account ``default``).

Typed models rather than a JSON string, so the configuration file takes them as tables
(``[gateway.telegram_accounts.work]``), the schema checks their fields and every token stays a
``SecretStr`` (never in a log or an error). Whether a token looks right is checked by the
channel's adapter (channels/telegram_accounts.py, slack.py, discord_accounts.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr

DEFAULT = "default"
# A URL path segment (/channels/<channel>/<name>), a NATS subject token and a lease key as it is.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class TelegramAccount(BaseModel):
    """One more Telegram bot: what SB_TELEGRAM_BOT_TOKEN and its neighbours say for
    ``default``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: SecretStr
    webhook_secret: SecretStr = SecretStr("")
    mode: Literal["webhook", "polling"] = "webhook"
    webhook_url: str = ""
    api_base: str = ""  # empty: SB_TELEGRAM_API_BASE


class DiscordAccount(BaseModel):
    """One more Discord application (its bot token, public key and id)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: SecretStr
    public_key: str
    application_id: str = ""
    gateway: bool = False  # hold its gateway connection (DMs and mentions), as SB_DISCORD_GATEWAY
    api_base: str = ""  # empty: SB_DISCORD_API_BASE


class WhatsAppAccount(BaseModel):
    """One more WhatsApp business phone number (Cloud API): its access token, app secret,
    verify token and phone number id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    access_token: SecretStr
    app_secret: SecretStr
    verify_token: SecretStr
    phone_number_id: str
    api_base: str = ""  # empty: SB_WHATSAPP_API_BASE


class SlackAccount(BaseModel):
    """One more Slack workspace (its app's bot token and signing secret)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: SecretStr
    signing_secret: SecretStr
    api_base: str = ""  # empty: SB_SLACK_API_BASE


def check_names(
    variable: str, accounts: Mapping[str, BaseModel], single: str, single_set: bool
) -> None:
    """Refuse a name a URL could not carry, and ``default`` when the single-account settings
    (``single``) are set too: neither would silently win."""
    for name in accounts:
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"{variable}: the account name {name[:64]!r} may hold only A-Z, a-z, 0-9, _ "
                "and - (up to 64 characters)"
            )
    if DEFAULT in accounts and single_set:
        raise ValueError(
            f"{variable} names the account 'default', which {single} already is: rename it, or "
            "move the single-account settings into it"
        )
