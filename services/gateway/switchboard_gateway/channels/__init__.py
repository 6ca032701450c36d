"""Chat channels: one adapter module per platform behind :class:`ChannelAdapter`.

Each module has ``from_settings(settings) -> ChannelAdapter | None``: the adapter when the
channel's credentials are set, else ``None``; its ``PLATFORM`` (accounts.py) reads and builds
its accounts one by one, for a gateway that changes them while it runs (live.py).
``configured_adapters`` returns the configured ones by channel name; the gateway serves their
webhooks and delivers their ``OUTBOUND`` parts.
"""

from __future__ import annotations

from collections.abc import Collection
from importlib import import_module
from typing import Any

from pydantic import SecretStr

from ..config import GatewaySettings
from .accounts import Platform
from .base import ChannelAdapter

# Each platform's module and the settings that ask for it: the module (and its SDK: slack_sdk,
# the HTTP clients, PyNaCl...) is imported only when one of them is set; its ``PLATFORM``
# (accounts.py) then checks that they are complete.
_CHANNELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("slack", ("slack_bot_token", "slack_signing_secret", "slack_accounts")),
    ("discord", ("discord_bot_token", "discord_public_key", "discord_accounts")),
    ("telegram", ("telegram_bot_token", "telegram_accounts")),
    ("whatsapp", ("whatsapp_access_token", "whatsapp_app_secret", "whatsapp_accounts")),
)


def _is_set(settings: GatewaySettings, name: str) -> bool:
    value = getattr(settings, name)
    if isinstance(value, dict):  # named accounts
        return bool(value)
    text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    return bool(text.strip())


def platforms(settings: GatewaySettings, also: Collection[str] = ()) -> list[Platform[Any]]:
    """The built-in channels ``settings`` configure, and those named in ``also`` (served
    already, their accounts perhaps all removed now)."""
    found: list[Platform[Any]] = []
    for module, names in _CHANNELS:
        if module in also or any(_is_set(settings, name) for name in names):
            found.append(import_module(f"{__name__}.{module}").PLATFORM)
    return found


def configured_adapters(settings: GatewaySettings) -> dict[str, ChannelAdapter]:
    adapters: dict[str, ChannelAdapter] = {}
    for platform in platforms(settings):
        adapter = platform.adapter(settings)
        if adapter is not None:
            adapters[adapter.name] = adapter
    return adapters
