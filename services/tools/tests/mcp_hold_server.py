"""An MCP server over streamable HTTP served by uvicorn in the test's own event loop, whose tool
``hold`` answers only when the test releases it: a call the test knows to be going on.
Tools: ``echo`` (text in, text out) and ``hold`` (waits for :meth:`HoldServer.release`)."""

from __future__ import annotations

import asyncio

import uvicorn
from mcp.server.mcpserver import MCPServer

from switchboard.embedded import free_port

from .sandbox_checks import wait_until


class HoldServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.holding = asyncio.Event()  # a hold call arrived
        self._released = asyncio.Event()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def build(self) -> MCPServer:
        server = MCPServer("switchboard-test-hold")

        @server.tool(description="Echo the text back.")
        def echo(text: str) -> str:
            return f"echo: {text}"

        @server.tool(description="Answer once the test releases the call.")
        async def hold() -> str:
            self.holding.set()
            await self._released.wait()
            return "released"

        return server

    def release(self) -> None:
        self._released.set()

    async def start(self) -> None:
        config = uvicorn.Config(
            self.build().streamable_http_app(),
            host="127.0.0.1",
            port=self.port,
            log_level="critical",
        )
        server = self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(server.serve())
        assert await wait_until(lambda: server.started, timeout=60)

    async def stop(self) -> None:
        self.release()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
