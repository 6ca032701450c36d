"""Several Telegram bots on one gateway (issue 27): ``SB_TELEGRAM_ACCOUNTS`` names them; each is
its own :class:`~.telegram.TelegramAdapter` (webhook ``/channels/telegram/<name>``, polling
under the lease ``telegram.<name>``), served together by :class:`~.accounts.Accounts`.

The single-bot settings (``SB_TELEGRAM_BOT_TOKEN``...) stay the account ``default``; a named
account called ``default`` next to them is refused (config.py) rather than one silently winning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from switchboard import tokens
from switchboard.errors import ConfigError

from ..accounts_config import DEFAULT
from ..config import GatewaySettings

SETTING = "SB_TELEGRAM_ACCOUNTS"
_BOT_TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{1,200}")
_WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what setWebhook accepts


@dataclass(frozen=True)
class Bot:
    """One account's bot as the adapter is built with it, checked."""

    account: str
    token: str = field(repr=False)
    secret: str = field(repr=False)
    mode: str
    webhook_url: str
    api_base: str


def configured_bots(settings: GatewaySettings) -> list[Bot]:
    """The ``default`` bot of the single-bot settings and the named ones, each checked; one bot
    under two names is refused (they would poll against each other)."""
    bots: list[Bot] = []
    token = settings.telegram_bot_token.get_secret_value()
    if token:
        secret = settings.telegram_webhook_secret.get_secret_value()
        bots.append(
            Bot(
                DEFAULT,
                token,
                secret,
                settings.telegram_mode,
                settings.telegram_webhook_url,
                settings.telegram_api_base,
            )
        )
    for name, account in settings.telegram_accounts.items():  # names checked (config.py)
        bots.append(
            Bot(
                name,
                account.bot_token.get_secret_value(),
                account.webhook_secret.get_secret_value(),
                account.mode,
                account.webhook_url,
                account.api_base or settings.telegram_api_base,
            )
        )
    seen: dict[str, str] = {}
    for bot in bots:
        _check(bot)
        other = seen.setdefault(bot.token.partition(":")[0], bot.account)
        if other != bot.account:
            raise ConfigError(
                f"Telegram accounts {other!r} and {bot.account!r} have the same bot: "
                "each account needs its own bot token"
            )
    return bots


def _where(account: str, key: str) -> str:
    if account == DEFAULT:
        return f"SB_TELEGRAM_{key.upper()}"
    return f"{SETTING} {account!r} {key}"


def _check(bot: Bot) -> None:
    if not _BOT_TOKEN.fullmatch(bot.token):
        raise ConfigError(
            f"{_where(bot.account, 'bot_token')} is not a bot token: @BotFather gives one like "
            "123456:ABC-def..."
        )
    if bot.mode == "webhook" and not bot.secret:
        raise ConfigError(
            f"{_where(bot.account, 'webhook_secret')} must be set in webhook mode (the webhook "
            f"is never served without it); make one with: {tokens.HOW_TO_MAKE_ONE}"
        )
    if bot.secret:
        why = tokens.weakness(bot.secret)
        if why is None and not _WEBHOOK_SECRET.fullmatch(bot.secret):
            why = "Telegram takes only A-Z, a-z, 0-9, _ and - (up to 256 characters)"
        if why is not None:
            raise ConfigError(
                f"{_where(bot.account, 'webhook_secret')} is refused: {why}; make one with: "
                f"{tokens.HOW_TO_MAKE_ONE}"
            )
