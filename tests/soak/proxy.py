"""A TCP proxy on loopback whose live connections the chaos driver can cut at once: the
clients' connections to the gateway, and the agents' connections to the model, dropped mid
request as a flaky network or a restarted load balancer drops them."""

from __future__ import annotations

import asyncio
import contextlib

from switchboard.embedded import free_port


class Proxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.dropped = 0  # connections cut by drop_all
        self._server: asyncio.Server | None = None
        self._live: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.port = free_port()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop_all(count=False)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def drop_all(self, count: bool = True) -> int:
        """Abort every live connection (both sides get a reset); how many were cut."""
        live = list(self._live)
        for writer in live:
            writer.transport.abort()
        if count:
            self.dropped += len(live) // 2
        return len(live) // 2

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._live.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._live.discard(writer)
            self._live.discard(up_writer)
            for w in (writer, up_writer):
                w.transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if not writer.transport.is_closing():
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write_eof()
