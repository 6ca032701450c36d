"""WebChat: a chat page served by the gateway (``GET /webchat``, public: it holds no data) and
its WebSocket (``WS /webchat/ws``, authenticated by its first request) speaking the typed
protocol of docs/webchat-protocol.md. Set-up: docs/channels/webchat.md."""

from __future__ import annotations

from fastapi import APIRouter

from . import page, route
from .page import PUBLIC_PATHS

router = APIRouter()
router.include_router(page.router)
router.include_router(route.router)

__all__ = ["PUBLIC_PATHS", "router"]
