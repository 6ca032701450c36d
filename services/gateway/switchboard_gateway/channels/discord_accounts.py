"""Several Discord applications on one gateway (issue 27): ``SB_DISCORD_ACCOUNTS`` names them;
each is its own :class:`~.discord.DiscordAdapter` (interactions at
``/channels/discord/<name>`` verified with its own public key, its gateway connection under
the lease ``discord.<name>``), served together by :class:`~.accounts.Accounts`. The
single-application settings (``SB_DISCORD_BOT_TOKEN``...) stay the account ``default``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from switchboard.errors import ConfigError

from ..accounts_config import DEFAULT
from ..config import GatewaySettings
from .discord_interactions import SNOWFLAKE

_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class App:
    """One account's application as the adapter is built with it, checked."""

    account: str
    token: str = field(repr=False)
    public_key: str
    application_id: str
    gateway: bool
    api_base: str


def configured_apps(settings: GatewaySettings) -> list[App]:
    """The ``default`` application of the single-account settings and the named ones."""
    apps: list[App] = []
    token = settings.discord_bot_token.get_secret_value()
    key = settings.discord_public_key.strip()
    if token or key:
        if not token or not key:
            given, missing = (
                ("SB_DISCORD_BOT_TOKEN", "SB_DISCORD_PUBLIC_KEY")
                if token
                else ("SB_DISCORD_PUBLIC_KEY", "SB_DISCORD_BOT_TOKEN")
            )
            raise ConfigError(
                f"{given} is set but {missing} is not: Discord needs both (or neither, to not "
                "serve it)."
            )
        apps.append(
            App(
                DEFAULT,
                token,
                key,
                settings.discord_application_id.strip(),
                settings.discord_gateway,
                settings.discord_api_base,
            )
        )
    for name, account in settings.discord_accounts.items():  # names checked (config.py)
        apps.append(
            App(
                name,
                account.bot_token.get_secret_value(),
                account.public_key.strip(),
                account.application_id.strip(),
                account.gateway,
                account.api_base or settings.discord_api_base,
            )
        )
    for app in apps:
        _check(app)
    return apps


def _where(account: str, key: str) -> str:
    if account == DEFAULT:
        return f"SB_DISCORD_{key.upper()}"
    return f"SB_DISCORD_ACCOUNTS {account!r} {key}"


def _check(app: App) -> None:
    if not app.token.strip():
        raise ConfigError(f"{_where(app.account, 'bot_token')} is empty")
    if not _HEX_KEY.fullmatch(app.public_key):
        raise ConfigError(
            f"{_where(app.account, 'public_key')} must be the application's public key: 64 hex "
            "digits (Developer Portal, General Information)."
        )
    if app.application_id and not SNOWFLAKE.fullmatch(app.application_id):
        raise ConfigError(
            f"{_where(app.account, 'application_id')} must be the application's numeric id."
        )
