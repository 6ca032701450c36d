"""``/mcp`` with the MCP SDK loaded on the first request (:mod:`.mcp_server` is the endpoint).

The ``mcp`` package and its generated protocol types cost about 23 MiB and a second of import;
most gateways never see an MCP client, so they should not pay for one at start. The first
request imports the endpoint (in a thread: the event loop keeps serving), starts its session
manager and is then served like every later one; concurrent first requests wait for one start.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from .mcp_server import McpEndpoint

PATH = "/mcp"
_ENDPOINT = f"{__package__}.mcp_server"


class LazyMcp:
    """The endpoint of a gateway app (``state``: its clients and settings), made on first use.
    It is the route's ASGI app itself; ``running()`` belongs in the app's lifespan: it stops
    the session manager, if one started."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.endpoint: McpEndpoint | None = None
        self._lock = asyncio.Lock()
        self._stack = AsyncExitStack()
        self._closed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An ASGI app (a Starlette ``Route`` calls an object as ASGI, a method as a handler)."""
        endpoint = self.endpoint or await self._start()
        await endpoint.asgi(scope, receive, send)

    async def _start(self) -> McpEndpoint:
        async with self._lock:
            if self.endpoint is None:
                if self._closed:  # a request that raced the shutdown
                    raise RuntimeError("the gateway is stopping")
                module = await asyncio.to_thread(importlib.import_module, _ENDPOINT)
                endpoint: McpEndpoint = module.McpEndpoint(self.state)
                await self._stack.enter_async_context(endpoint.running())
                self.endpoint = endpoint
            return self.endpoint

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            async with self._lock:
                self._closed = True
                await self._stack.aclose()
