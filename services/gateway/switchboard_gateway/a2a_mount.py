"""The A2A routes with the SDK loaded on first use (:mod:`.a2a_server` is the endpoint).

The a2a SDK (its protocol buffers, server routes, event queues) costs about 9 MiB and nearly
half a second of import, which a gateway that no A2A client calls need not pay at start. The
card's and the JSON-RPC endpoint's paths are routed from the start, to an app holding the SDK's
routes that the first request to either (or to the OpenAPI schema, which lists them) builds;
concurrent first requests wait for one build.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .config import GatewaySettings
from .conversations import Conversations

CARD_PATH = "/.well-known/agent-card.json"  # the SDK's AGENT_CARD_WELL_KNOWN_PATH; public
RPC_PATH = "/a2a"
_ENDPOINT = f"{__package__}.a2a_server"


class LazyA2A:
    """The ASGI app of :data:`CARD_PATH` and :data:`RPC_PATH` (authentication, body limits
    and tracing are the gateway's middleware, which ran before)."""

    def __init__(self, settings: GatewaySettings, conversations: Conversations) -> None:
        self.settings = settings
        self.conversations = conversations
        self.app: FastAPI | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.app or await self.load()
        await app(scope, receive, send)

    async def load(self) -> FastAPI:
        async with self._lock:
            if self.app is None:
                module = await asyncio.to_thread(importlib.import_module, _ENDPOINT)
                app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
                module.mount(app, self.settings, self.conversations)
                self.app = app
            return self.app

    async def openapi(self) -> dict[str, Any]:
        """The SDK routes' part of the OpenAPI schema: ``paths`` and ``components``."""
        app = await self.load()
        return app.openapi()

    def routes(self) -> list[Route]:
        return [
            Route(CARD_PATH, self, methods=["GET"]),
            Route(RPC_PATH, self, methods=["POST"]),
        ]


def merge_openapi(schema: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``part``'s paths and component schemas added (the gateway's own win)."""
    paths = schema.setdefault("paths", {})
    for path, ops in part.get("paths", {}).items():
        paths.setdefault(path, ops)
    theirs = part.get("components", {}).get("schemas", {})
    ours = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, sub in theirs.items():
        ours.setdefault(name, sub)
    return schema
