"""Gateway: the HTTP edge. Serves the API on SB_HTTP_PORT until the service is stopped."""

from __future__ import annotations

import asyncio
import logging

import uvicorn

from switchboard import registry, rpc
from switchboard.errors import ConfigError
from switchboard.media import MediaClient
from switchboard.ops import EmbeddedServer
from switchboard.runtime import ServiceRuntime

from .app import create_app
from .channels import configured_adapters
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
        channels = configured_adapters(settings)
        typing = Typing(rt.nc, rt.subjects)
        media = rpc.channel(settings.media_addr, settings.service_token.get_secret_value())
        rt.stack.push_async_callback(media.close)
        for adapter in channels.values():
            if hasattr(adapter, "media"):  # its attachments go to the media service
                adapter.media = MediaClient(media)
            typing.follow(adapter)
            await adapter.start(rt)
            rt.stack.push_async_callback(adapter.close)
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
