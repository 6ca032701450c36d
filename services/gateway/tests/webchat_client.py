"""WebChat over a real socket: the gateway app of :mod:`gateway_harness` served by uvicorn in
this process (same event loop as its NATS connection) on a free loopback port, and a protocol
client built on ``websockets``.

``async with webchat_gateway(nats_url, home, **settings) as wg`` gives the :class:`Gateway`
(``wg.gw``) and ``wg.open()`` a connected-but-not-authenticated :class:`ChatClient`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from websockets.asyncio.client import ClientConnection, connect

from .gateway_harness import Gateway, started

WAIT_S = 10.0  # generous bound on anything the gateway should send


async def eventually(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll ``check`` until it holds: a bound on waiting, not a timing assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """``app`` over HTTP/WebSocket on a free port (its lifespan is run by the harness)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually(lambda: server.started, "uvicorn started")
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


class ChatClient:
    """One WebChat socket: requests by id, events kept in arrival order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self._next = 0

    async def frame(self) -> dict[str, Any]:
        async with asyncio.timeout(WAIT_S):
            raw = await self.ws.recv()
        data: dict[str, Any] = json.loads(raw)
        return data

    async def send_raw(self, data: str | bytes) -> None:
        await self.ws.send(data)

    async def response(self, request_id: Any) -> dict[str, Any]:
        """The response to ``request_id``; events that come first are kept."""
        while True:
            data = await self.frame()
            if data["type"] == "event":
                self.events.append(data)
            elif data.get("id") == request_id:
                return data
            else:
                raise AssertionError(f"unexpected frame {data}")

    async def request(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        request_id = f"t{self._next}"
        frame = {"type": "req", "id": request_id, "method": method, "params": params}
        await self.ws.send(json.dumps(frame))
        return await self.response(request_id)

    async def connect(self, token: str, **params: Any) -> dict[str, Any]:
        res = await self.request("connect", token=token, **params)
        assert res["ok"], res
        payload: dict[str, Any] = res["payload"]
        return payload

    async def event(self) -> dict[str, Any]:
        """The next event (kept ones first)."""
        if self.events:
            return self.events.pop(0)
        data = await self.frame()
        assert data["type"] == "event", data
        return data

    async def closed(self) -> int | None:
        """Wait for the server to close the socket; its close code."""
        async with asyncio.timeout(WAIT_S):
            await self.ws.wait_closed()
        return self.ws.close_code


@dataclass
class WebChatGateway:
    gw: Gateway
    address: str

    @property
    def token(self) -> str:
        return self.gw.token

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ChatClient]:
        async with connect(f"ws://{self.address}/webchat/ws", max_size=None) as ws:
            yield ChatClient(ws)

    @asynccontextmanager
    async def connected(self, **params: Any) -> AsyncIterator[tuple[ChatClient, dict[str, Any]]]:
        async with self.open() as client:
            yield client, await client.connect(self.token, **params)


@asynccontextmanager
async def webchat_gateway(
    nats_url: str, home: Path, **overrides: Any
) -> AsyncIterator[WebChatGateway]:
    async with started(nats_url, home, **overrides) as gw, serving(gw.app) as address:
        yield WebChatGateway(gw, address)
