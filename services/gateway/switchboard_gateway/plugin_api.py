"""What a channel plugin imports in the gateway (see :mod:`.plugin_host`, :mod:`.channels.base`)."""

from switchboard.plugins import Manifest
from switchboard.v1 import messages_pb2

from .channels.base import (
    BadPayload,
    ChannelAdapter,
    ChannelError,
    Inbound,
    InboundRequest,
    PlatformMessage,
    RetryLater,
    Unauthorized,
    Undeliverable,
)
from .plugin_host import GatewayPluginApi

__all__ = [
    "BadPayload",
    "ChannelAdapter",
    "ChannelError",
    "GatewayPluginApi",
    "Inbound",
    "InboundRequest",
    "Manifest",
    "PlatformMessage",
    "RetryLater",
    "Unauthorized",
    "Undeliverable",
    "messages_pb2",
]
