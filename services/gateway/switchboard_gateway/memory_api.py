"""Memory for operators (``/api/memory``), served by the memory service's gRPC ``Memory``:
ingest a document (the body, any size up to the gateway's request limit, streamed on to
``IngestDocument``), search, read lines of a document, forget a document.

``agent`` defaults to the default agent; ``user`` is the scope inside it ("" = the agent's own
memory; ``dm:<channel>:<peer>`` or ``group:<channel>:<id>`` for a person's or a group's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from fastapi import APIRouter, Query, Request

from switchboard.v1 import memory_pb2, memory_pb2_grpc

from .errors import MEMORY, backend_error

router = APIRouter(prefix="/api/memory")
TIMEOUT_S = 10.0
INGEST_TIMEOUT_S = 300.0  # embedding a long document on a laptop's CPU
PIECE = 64 * 1024


def _stub(request: Request) -> memory_pb2_grpc.MemoryStub:
    stub: memory_pb2_grpc.MemoryStub = request.app.state.memory
    return stub


def _scope(request: Request, agent: str, user: str) -> memory_pb2.MemoryScope:
    return memory_pb2.MemoryScope(
        agent=agent or request.app.state.settings.default_agent, user=user
    )


def hit_json(h: memory_pb2.SearchHit) -> dict[str, Any]:
    return {
        "id": h.id,
        "text": h.text,
        "score": round(h.score, 6),
        "source": h.source,
        "path": h.path,
        "start_line": h.start_line,
        "end_line": h.end_line,
        "session_key": h.session_key,
        "created_at_ms": h.created_at_ms,
    }


@router.post("/documents")
async def ingest(
    request: Request,
    path: str = Query(min_length=1, max_length=512),
    agent: str = "",
    user: str = "",
) -> dict[str, Any]:
    """The request body is the document; its Content-Type names its type (or the path's
    extension does: .md, .txt, .pdf, .html)."""
    mime = request.headers.get("content-type", "")
    if mime.startswith(("application/x-www-form-urlencoded", "multipart/")):
        mime = ""
    header = memory_pb2.DocumentHeader(scope=_scope(request, agent, user), path=path, mime=mime)

    async def pieces() -> AsyncIterator[memory_pb2.IngestChunk]:
        yield memory_pb2.IngestChunk(header=header)
        buffer = bytearray()
        async for data in request.stream():
            buffer.extend(data)
            while len(buffer) >= PIECE:
                yield memory_pb2.IngestChunk(data=bytes(buffer[:PIECE]))
                del buffer[:PIECE]
        if buffer:
            yield memory_pb2.IngestChunk(data=bytes(buffer))

    try:
        done = await _stub(request).IngestDocument(pieces(), timeout=INGEST_TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, MEMORY, "IngestDocument") from exc
    return {
        "path": done.path,
        "chunks": done.chunks,
        "characters": done.characters,
        "unchanged": done.unchanged,
        "degraded": done.degraded,
    }


@router.get("/search")
async def search(
    request: Request,
    q: str = Query(min_length=1, max_length=4000),
    agent: str = "",
    user: str = "",
    k: int = Query(default=10, ge=1, le=100),
    mode: str = "hybrid",
) -> dict[str, Any]:
    try:
        found = await _stub(request).Search(
            memory_pb2.SearchRequest(scope=_scope(request, agent, user), query=q, k=k, mode=mode),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, MEMORY, "Search") from exc
    return {
        "hits": [hit_json(h) for h in found.hits],
        "mode": found.mode,
        "degraded": found.degraded,
    }


@router.get("/documents/lines")
async def lines(
    request: Request,
    path: str = Query(min_length=1, max_length=512),
    agent: str = "",
    user: str = "",
    from_line: int = Query(default=1, ge=1, le=10_000_000),
    count: int = Query(default=0, ge=0, le=2000, alias="lines"),
) -> dict[str, Any]:
    try:
        got = await _stub(request).Get(
            memory_pb2.GetRequest(
                scope=_scope(request, agent, user), path=path, from_line=from_line, lines=count
            ),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, MEMORY, "Get") from exc
    return {
        "path": got.path,
        "text": got.text,
        "from_line": got.from_line,
        "to_line": got.to_line,
        "total_lines": got.total_lines,
    }


@router.delete("/documents")
async def forget(
    request: Request,
    path: str = Query(min_length=1, max_length=512),
    agent: str = "",
    user: str = "",
) -> dict[str, Any]:
    try:
        done = await _stub(request).Delete(
            memory_pb2.DeleteRequest(scope=_scope(request, agent, user), path=path),
            timeout=TIMEOUT_S,
        )
    except grpc.aio.AioRpcError as exc:
        raise backend_error(exc, MEMORY, "Delete") from exc
    return {"path": path, "deleted": done.deleted}
