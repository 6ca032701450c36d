"""One way for a fake platform to serve its ASGI app over real HTTP: uvicorn on 127.0.0.1 (a
free port) in a daemon thread with its own event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable

import uvicorn
from starlette.types import ASGIApp


class ServerThread:
    """``start()`` returns the port; ``stop()`` ends the server. ``on_loop`` runs first in the
    server's loop (a fake that must reach that loop keeps it); ``force_exit`` stops without
    waiting for open requests (long polls, calls a test holds on purpose)."""

    def __init__(
        self,
        app: ASGIApp,
        name: str,
        *,
        on_loop: Callable[[], Awaitable[None]] | None = None,
        force_exit: bool = False,
        graceful_s: float = 2.0,
    ) -> None:
        self.app, self.name = app, name
        self.on_loop = on_loop
        self.force_exit = force_exit
        self.graceful_s = graceful_s
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            timeout_graceful_shutdown=int(self.graceful_s) or None,
        )
        server = self._server = uvicorn.Server(config)
        # IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets (see tests/fakes/llm.py).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]

        async def serve() -> None:
            if self.on_loop is not None:
                await self.on_loop()
            await server.serve(sockets=[sock])

        self._thread = threading.Thread(
            target=lambda: asyncio.run(serve()), name=self.name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} failed to start")
            time.sleep(0.005)
        return port

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = self.force_exit
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None
