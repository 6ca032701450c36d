"""Gateway: the HTTP edge. Serves the API on SB_HTTP_PORT until the service is stopped."""

from __future__ import annotations

import asyncio
import logging

import uvicorn
from fastapi import FastAPI

from switchboard import registry, rpc
from switchboard.errors import ConfigError
from switchboard.media import MediaClient
from switchboard.ops import EmbeddedServer
from switchboard.runtime import ServiceRuntime

from .app import create_app
from .channels import routes as channel_routes
from .channels.accounts import Accounts
from .channels.base import ChannelAdapter
from .channels.live import LiveChannels
from .channels.typing import Typing
from .config import GatewaySettings
from .delivery import Delivery
from .plugin_host import load_channel_plugins, start_channel

log = logging.getLogger(__name__)


async def serve(settings: GatewaySettings, stop: asyncio.Event) -> None:
    if not settings.gateway_token.get_secret_value():
        raise ConfigError(
            "SB_GATEWAY_TOKEN is not set: the gateway refuses to serve without a token."
        )
    async with ServiceRuntime(registry.get("gateway"), settings, stop) as rt:
        typing = Typing(rt.nc, rt.subjects)
        media = rpc.channel(settings.media_addr, settings.service_token.get_secret_value())
        rt.stack.push_async_callback(media.close)
        # The built-in channels, their accounts changeable while running (channels/live.py).
        live = LiveChannels(rt, typing, MediaClient(media))
        rt.stack.push_async_callback(live.close)
        await live.start(settings)
        channels: dict[str, ChannelAdapter] = dict(live.channels)
        # Chat channels of plugins (SB_PLUGINS): a failing one is skipped and reported.
        plugins, owner = await load_channel_plugins(settings, channels)
        for name, plugged in plugins.channels.items():
            typing.follow(plugged.adapter)
            if await start_channel(plugins, owner, plugged, rt):
                rt.stack.push_async_callback(plugged.close)
                channels[name] = plugged
        rt.readiness.details["plugins"] = plugins.details()
        app = create_app(settings, rt, channels, typing)
        delivery = Delivery(
            channels,
            concurrency=settings.outbound_concurrency,
            max_attempts=settings.outbound_max_attempts,
        )
        await delivery.start(rt)
        reload_accounts(settings, rt, app, live, channels, typing)
        config = uvicorn.Config(
            app,
            host=settings.http_host,
            port=settings.http_port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=3,
        )
        server = EmbeddedServer(config)
        task = asyncio.create_task(server.serve())
        log.info("gateway listening", extra={"port": settings.http_port})
        stopped = asyncio.create_task(rt.wait_stopped())
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        await task
        stopped.cancel()


def reload_accounts(
    settings: GatewaySettings,
    rt: ServiceRuntime,
    app: FastAPI,
    live: LiveChannels,
    channels: dict[str, ChannelAdapter],
    typing: Typing,
) -> None:
    """Apply changed channel accounts (SB_TELEGRAM_ACCOUNTS..., configfile.reload.RELOADABLE)
    to the running gateway. A channel a reload serves for the first time gets what ``serve``
    gives the others at start: the webhook route (create_app adds it only when some channel
    is served), typing indicators and a delivery consumer."""

    async def first_served(name: str, channel: Accounts) -> None:
        if not channels:
            app.include_router(channel_routes.router)
        channels[name] = channel
        await typing.start()
        delivery = Delivery(
            {name: channel},
            concurrency=settings.outbound_concurrency,
            max_attempts=settings.outbound_max_attempts,
        )
        await delivery.start(rt)

    live.on_new = first_served
    rt.on_reload(live.reload)
