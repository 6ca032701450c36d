"""The gateway's side of plugins (:mod:`switchboard.plugins`): **channels**.

The gateway reads the same ``SB_PLUGINS`` / ``SB_PLUGINS_CONFIG`` as the agent and sets up the
enabled plugins whose manifest provides ``channels`` (the others are the agent's: not set up
here, not in this ``/readyz``). ``setup(api)`` gets a :class:`GatewayPluginApi`; its
``register_channel(name, adapter)`` adds a chat channel served exactly like the built-in ones:
webhooks at ``POST /channels/<name>/<account>`` (``verify`` then ``parse``), reply parts
from ``OUTBOUND`` delivered by ``format`` and ``send``, typing indicators, the router's DM and
group policies (``SB_<NAME>_DM_POLICY``...). The adapter follows
:class:`~.channels.base.ChannelAdapter`; a plugin imports what it needs from
:mod:`switchboard_gateway.plugin_api`. The agent's kinds (tools, hooks, providers) registered
by the same plugin are ignored here.

A plugin is all or nothing, like in the agent: a channel name that is a built-in one, an
authenticated one (``api``, ``webchat``...) or another plugin's, an adapter lacking a method,
a setup that raises or overruns, or a ``start`` that raises skip the plugin (logged, reported
in ``/readyz``). At run time, a ``verify``/``parse`` that raises something other than a
:class:`~.channels.base.ChannelError` refuses the call (401/400, nothing leaks); ``send``
failures are retried then dead-lettered by :mod:`.delivery` as for any channel."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from switchboard.errors import PluginError
from switchboard.plugins import (
    EntryPoints,
    LoadedPlugin,
    PluginReport,
    PluginSettings,
    discover,
    failed,
    installed,
    run_setup,
)
from switchboard.runtime import ServiceRuntime

from .channels.base import BadPayload, ChannelAdapter, ChannelError, InboundRequest, Unauthorized

log = logging.getLogger(__name__)

NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")  # a NATS subject token and an env variable part
# Channels a plugin may not take: the built-in chat channels and the authenticated ones
# (the router's DM policy does not apply to those).
RESERVED = frozenset(
    {"telegram", "slack", "discord", "whatsapp", "api", "openai", "webchat", "hooks", "cron", "a2a"}
)
METHODS = ("start", "close", "typing", "verify", "parse", "format", "send")


class GatewayPluginApi:
    """Given to a plugin's ``setup`` in the gateway: its configuration and
    ``register_channel``; the agent's ``register_*`` are accepted and ignored."""

    def __init__(self, loaded: LoadedPlugin) -> None:
        self.name = loaded.manifest.name
        self.config: dict[str, Any] = loaded.config
        self.log = logging.getLogger(f"switchboard.plugin.{self.name}")
        self.channels: dict[str, ChannelAdapter] = {}

    def register_channel(self, name: str, adapter: ChannelAdapter) -> None:
        """A chat channel ``name`` (1-32 of a-z 0-9 _, starting with a letter; not a built-in
        or authenticated channel's name) served by ``adapter`` (``adapter.name == name``)."""
        if not NAME.fullmatch(name) or name in RESERVED:
            raise PluginError(
                f"the channel name {name!r} is not allowed (1-32 of a-z 0-9 _, not a "
                "built-in channel's)"
            )
        missing = [m for m in METHODS if not callable(getattr(adapter, m, None))]
        if getattr(adapter, "name", None) != name or missing:
            raise PluginError(f"the channel {name}'s adapter is not a ChannelAdapter")
        self.channels[name] = adapter

    def register_tool(self, tool: Any) -> None:
        """The agent's: ignored in the gateway."""

    def register_hook(self, event: str, hook: Any) -> None:
        """The agent's: ignored in the gateway."""

    def register_provider(self, name: str, factory: Any) -> None:
        """The agent's: ignored in the gateway."""


@dataclass
class GatewayPlugins:
    channels: dict[str, PluginChannel] = field(default_factory=dict)
    reports: list[PluginReport] = field(default_factory=list)

    def details(self) -> dict[str, Any]:
        return {r.name: r.as_dict() for r in self.reports}

    def failed(self, name: str, detail: str) -> None:
        self.reports = failed(self.reports, name, detail)


async def load_channel_plugins(
    settings: PluginSettings, taken: Collection[str], found: EntryPoints = installed
) -> tuple[GatewayPlugins, dict[str, str]]:
    """Set up the enabled plugins that provide channels; their adapters (wrapped, not started)
    and which plugin each channel is. ``taken``: the configured built-in channels."""
    loaded, reports = discover(settings, found, ("channels",))
    out = GatewayPlugins(reports=reports)
    owner: dict[str, str] = {}
    for plugin in loaded:
        name = plugin.manifest.name
        api = GatewayPluginApi(plugin)
        try:
            await run_setup(plugin.plugin, api, name)
            clash = next((c for c in api.channels if c in taken or c in out.channels), None)
            if clash is not None:
                raise PluginError(f"its channel {clash!r} is another channel's")
        except PluginError as exc:
            out.failed(name, str(exc))
            continue
        for channel, adapter in api.channels.items():
            out.channels[channel] = PluginChannel(name, adapter)
            owner[channel] = name
        log.info("plugin %s loaded", name, extra={"plugin": name, "channels": list(api.channels)})
    return out, owner


async def start_channel(
    plugins: GatewayPlugins, owner: dict[str, str], adapter: ChannelAdapter, rt: ServiceRuntime
) -> bool:
    """Start a plugin's channel; False (the plugin reported failed) when its ``start`` raises."""
    try:
        await adapter.start(rt)
    except Exception as exc:  # a plugin's failure must not stop the gateway
        log.error("the channel %s failed to start", adapter.name, exc_info=exc)
        plugins.failed(owner[adapter.name], f"its channel {adapter.name} failed to start")
        return False
    return True


class PluginChannel:
    """A plugin's adapter whose unexpected ``verify``/``parse`` errors refuse the call."""

    def __init__(self, plugin: str, adapter: ChannelAdapter) -> None:
        self.plugin = plugin
        self.adapter = adapter
        self.name = adapter.name

    def __getattr__(self, attr: str) -> Any:  # start, close, typing, format, send, extras
        return getattr(self.adapter, attr)

    def verify(self, request: InboundRequest) -> None:
        try:
            self.adapter.verify(request)
        except ChannelError:
            raise
        except Exception as exc:
            log.error("the channel %s failed to verify a call", self.name, exc_info=exc)
            raise Unauthorized("The call could not be verified.") from None

    def parse(self, request: InboundRequest) -> Any:
        try:
            return self.adapter.parse(request)
        except ChannelError:
            raise
        except Exception as exc:
            log.error("the channel %s failed to parse a call", self.name, exc_info=exc)
            raise BadPayload("The call could not be read.") from None
