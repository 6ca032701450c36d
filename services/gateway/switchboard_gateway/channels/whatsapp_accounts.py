"""WhatsApp business numbers (Cloud API) on one gateway: ``SB_WHATSAPP_ACCESS_TOKEN``,
``SB_WHATSAPP_APP_SECRET``, ``SB_WHATSAPP_VERIFY_TOKEN`` and ``SB_WHATSAPP_PHONE_NUMBER_ID``
are the account ``default``; ``SB_WHATSAPP_ACCOUNTS`` names more, each its own
:class:`~.whatsapp.WhatsAppAdapter` (webhook at ``/channels/whatsapp/<name>``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from switchboard.errors import ConfigError

from ..accounts_config import DEFAULT
from ..config import GatewaySettings

_PHONE_NUMBER_ID = re.compile(r"[0-9]{1,32}")


@dataclass(frozen=True)
class Number:
    """One account's business number as the adapter is built with it, checked."""

    account: str
    token: str = field(repr=False)
    app_secret: str = field(repr=False)
    verify_token: str = field(repr=False)
    phone_number_id: str
    api_base: str


def _check(where: str, number: Number) -> Number:
    missing = [
        name
        for name, value in (
            ("access token", number.token),
            ("app secret", number.app_secret),
            ("verify token", number.verify_token),
        )
        if not value.strip()
    ]
    if missing:
        raise ConfigError(f"{where} needs its {', '.join(missing)} (WhatsApp needs all three)")
    if not _PHONE_NUMBER_ID.fullmatch(number.phone_number_id):
        raise ConfigError(f"{where} needs its phone number id (digits, from Meta's console)")
    return number


def configured_numbers(settings: GatewaySettings) -> list[Number]:
    """The ``default`` number of the single-account settings and the named ones."""
    numbers: list[Number] = []
    token = settings.whatsapp_access_token.get_secret_value()
    secret = settings.whatsapp_app_secret.get_secret_value()
    if token or secret:
        number = Number(
            DEFAULT,
            token,
            secret,
            settings.whatsapp_verify_token.get_secret_value(),
            settings.whatsapp_phone_number_id.strip(),
            settings.whatsapp_api_base,
        )
        numbers.append(_check("SB_WHATSAPP_ACCESS_TOKEN and its neighbours", number))
    for name, account in settings.whatsapp_accounts.items():  # names checked (config.py)
        number = Number(
            name,
            account.access_token.get_secret_value(),
            account.app_secret.get_secret_value(),
            account.verify_token.get_secret_value(),
            account.phone_number_id.strip(),
            account.api_base or settings.whatsapp_api_base,
        )
        numbers.append(_check(f"SB_WHATSAPP_ACCOUNTS {name!r}", number))
    return numbers
