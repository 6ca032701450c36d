"""A lean HTTP/1.1 load client for the accepted-webhooks/s figure: pre-built requests written on
keep-alive connections, each response read by its Content-Length. httpx spends about 3 ms of
CPU per request here, more than the gateway itself, so on two cores it measured the client;
this one spends a fraction of that. Only what the gateway sends is understood: a status line,
headers with Content-Length, a body (no chunked encoding)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

Request = tuple[str, bytes, dict[str, str]]  # path, body, headers


def raw(host: str, port: int, request: Request) -> bytes:
    path, body, headers = request
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "content-length"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes) -> int:
    writer.write(payload)
    status_line = await reader.readline()
    status = int(status_line.split(b" ", 2)[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length:
        await reader.readexactly(length)
    return status


async def burst(
    host: str, port: int, requests: Sequence[Request], connections: int
) -> tuple[float, list[int]]:
    """Send every request over ``connections`` keep-alive connections; the seconds it took
    and the statuses other than 200."""
    payloads = [raw(host, port, r) for r in requests]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for p in payloads:
        queue.put_nowait(p)
    refused: list[int] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while not queue.empty():
                status = await _one(reader, writer, queue.get_nowait())
                if status != 200:
                    refused.append(status)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return time.perf_counter() - start, refused
