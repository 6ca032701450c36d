"""Chat channels: one adapter module per platform behind :class:`ChannelAdapter`.

Each module has ``from_settings(settings) -> ChannelAdapter | None``: the adapter when the
channel's credentials are set, else ``None``. ``configured_adapters`` returns the configured
ones by channel name; the gateway serves their webhooks and delivers their ``OUTBOUND`` parts.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import GatewaySettings
from .base import ChannelAdapter

Factory = Callable[[GatewaySettings], ChannelAdapter | None]


def _factories() -> list[Factory]:
    # Imported here: a platform's SDK loads only in a gateway that configures it.
    factories: list[Factory] = []
    from . import slack

    factories.append(slack.from_settings)
    from . import discord

    factories.append(discord.from_settings)
    from . import telegram

    factories.append(telegram.from_settings)
    return factories


def configured_adapters(settings: GatewaySettings) -> dict[str, ChannelAdapter]:
    adapters: dict[str, ChannelAdapter] = {}
    for factory in _factories():
        adapter = factory(settings)
        if adapter is not None:
            adapters[adapter.name] = adapter
    return adapters
