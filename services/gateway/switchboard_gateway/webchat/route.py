"""``WS /webchat/ws``'s route, apart from the code that serves it: :mod:`.connection` (with the
protocol's frame models, the feeds and the methods) is imported by the first socket, not at the
gateway's start: 1.4 % of a start's import work, about 30 ms of CPU that the first socket pays
instead (docs/startup.md, third round). The sockets' gauge is here so that /metrics shows it
from the start."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket
from prometheus_client import Gauge

router = APIRouter()
SOCKETS = Gauge("sb_gateway_webchat_sockets", "WebChat sockets connected")


@router.websocket("/webchat/ws")
async def webchat_socket(websocket: WebSocket) -> None:
    from .connection import Connection

    await Connection(websocket).run()
