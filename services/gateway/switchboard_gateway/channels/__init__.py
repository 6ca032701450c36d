"""Chat channels: one adapter module per platform behind :class:`ChannelAdapter`.

Each module has ``from_settings(settings) -> ChannelAdapter | None``: the adapter when the
channel's credentials are set, else ``None``. ``configured_adapters`` returns the configured
ones by channel name; the gateway serves their webhooks and delivers their ``OUTBOUND`` parts.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from pydantic import SecretStr

from ..config import GatewaySettings
from .base import ChannelAdapter

Factory = Callable[[GatewaySettings], ChannelAdapter | None]

# Each platform's module and the settings that ask for it: the module (and its SDK: slack_sdk,
# the HTTP clients, PyNaCl...) is imported only when one of them is set; its ``from_settings``
# then checks that they are complete.
_CHANNELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("slack", ("slack_bot_token", "slack_signing_secret", "slack_accounts")),
    ("discord", ("discord_bot_token", "discord_public_key", "discord_accounts")),
    ("telegram", ("telegram_bot_token", "telegram_accounts")),
)


def _is_set(settings: GatewaySettings, name: str) -> bool:
    value = getattr(settings, name)
    if isinstance(value, dict):  # named accounts
        return bool(value)
    text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    return bool(text.strip())


def _factories(settings: GatewaySettings) -> list[Factory]:
    factories: list[Factory] = []
    for module, names in _CHANNELS:
        if any(_is_set(settings, name) for name in names):
            factories.append(import_module(f"{__name__}.{module}").from_settings)
    return factories


def configured_adapters(settings: GatewaySettings) -> dict[str, ChannelAdapter]:
    adapters: dict[str, ChannelAdapter] = {}
    for factory in _factories(settings):
        adapter = factory(settings)
        if adapter is not None:
            adapters[adapter.name] = adapter
    return adapters
