"""Chat channels: one adapter file per platform behind :class:`ChannelAdapter`.

``configured_adapters`` returns the adapters whose settings are present. None is built yet
(Telegram, Slack, Discord, WebChat and webhooks are the next step; see the README's status
table): until then no channel route is served and nothing consumes ``OUTBOUND``.
"""

from __future__ import annotations

from ..config import GatewaySettings
from .base import ChannelAdapter


def configured_adapters(settings: GatewaySettings) -> dict[str, ChannelAdapter]:
    return {}
