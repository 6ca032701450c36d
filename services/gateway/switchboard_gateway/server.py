"""Gateway: the HTTP edge. Serves the API on SB_HTTP_PORT until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import sys

import uvicorn

from switchboard.ops import EmbeddedServer
from switchboard.runtime import ServiceRuntime

from .app import create_app
from .config import GatewaySettings

log = logging.getLogger(__name__)


async def serve(settings: GatewaySettings) -> None:
    async with ServiceRuntime("gateway", settings, ops_server=False) as rt:
        app = create_app(settings, rt)
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
        stop = asyncio.create_task(rt.wait_stopped())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        await task
        stop.cancel()


def main() -> None:
    settings = GatewaySettings()
    if not settings.gateway_token:
        sys.exit("SB_GATEWAY_TOKEN is not set: the gateway refuses to serve without a token.")
    asyncio.run(serve(settings))
