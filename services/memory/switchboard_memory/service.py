"""gRPC ``Memory``: requests checked and turned into calls of :class:`.Memory` and
:class:`.Documents`; their errors (kinds of :mod:`switchboard.errors`) become statuses a caller
can act on (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE) through :func:`.grpc_errors`, never a
stack trace or internal text."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from switchboard.errors_map import grpc_errors
from switchboard.v1 import memory_pb2, memory_pb2_grpc

from .chunking import extract_text, mime_of
from .documents import Documents, check_path
from .entries import Filter, Hit
from .errors import InvalidRequest
from .memory import Item, Memory, Scope, check_metadata, check_scope
from .recall import compose_turn

statuses = grpc_errors("the memory service failed")
MAX_TURNS = 64


def scope_of(message: memory_pb2.MemoryScope) -> Scope:
    return check_scope(message.agent, message.user)


def _hit(hit: Hit) -> memory_pb2.SearchHit:
    p = hit.payload
    return memory_pb2.SearchHit(
        id=hit.id,
        text=str(p.get("text", "")),
        score=hit.score,
        source=str(p.get("source", "")),
        path=str(p.get("path", "")),
        start_line=int(p.get("start_line", 0) or 0),  # type: ignore[call-overload]
        end_line=int(p.get("end_line", 0) or 0),  # type: ignore[call-overload]
        session_key=str(p.get("session_key", "")),
        metadata={str(k): str(v) for k, v in dict(p.get("metadata") or {}).items()},  # type: ignore[call-overload]
        created_at_ms=int(p.get("created_at_ms", 0) or 0),  # type: ignore[call-overload]
    )


class MemoryService(memory_pb2_grpc.MemoryServicer):
    def __init__(
        self, memory: Memory, documents: Documents, max_items: int, max_bytes: int
    ) -> None:
        self.memory = memory
        self.documents = documents
        self.max_items = max_items
        self.max_bytes = max_bytes

    def _count(self, n: int, what: str) -> None:
        if n == 0:
            raise InvalidRequest(f"no {what} given")
        if n > self.max_items:
            raise InvalidRequest(f"{n} {what}; at most {self.max_items} per call")

    @statuses
    async def Embed(
        self, request: memory_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.EmbedResponse:
        self._count(len(request.texts), "texts")
        for n, text in enumerate(request.texts):
            self.memory.check_text(text, f"texts[{n}]")
        vectors = await self.memory.embed(list(request.texts), request.query)
        embedder = self.memory.embedder
        return memory_pb2.EmbedResponse(
            vectors=[memory_pb2.Vector(values=v) for v in vectors],
            provider=embedder.provider,
            model=embedder.model,
            dimension=embedder.dimension,
            cached=int(getattr(embedder, "last_cached", 0)),
        )

    @statuses
    async def Upsert(
        self, request: memory_pb2.UpsertRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.UpsertResponse:
        scope = scope_of(request.scope)
        self._count(len(request.items), "items")
        items = [
            Item(
                text=i.text,
                source=i.source or "note",
                id=i.id,
                path=check_path(i.path) if i.path else "",
                start_line=i.start_line,
                end_line=i.end_line,
                session_key=i.session_key,
                metadata=dict(i.metadata),
                created_at_ms=i.created_at_ms,
            )
            for i in request.items
        ]
        ids, degraded = await self.memory.upsert(scope, items)
        return memory_pb2.UpsertResponse(ids=ids, degraded=degraded)

    @statuses
    async def Search(
        self, request: memory_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.SearchResponse:
        scope = scope_of(request.scope)
        f = request.filter
        if f.after_ms < 0 or f.before_ms < 0 or (f.before_ms and f.after_ms >= f.before_ms):
            raise InvalidRequest("filter: after_ms must be before before_ms, both >= 0")
        where = Filter(
            scope.user,
            sources=list(f.sources),
            path_prefix=f.path_prefix,
            session_key=f.session_key,
            after_ms=f.after_ms,
            before_ms=f.before_ms,
            metadata=check_metadata(dict(f.metadata), "filter.metadata"),
        )
        found = await self.memory.search(  # it checks the query, k and mode
            scope,
            request.query,
            request.k or 10,
            request.mode or "hybrid",
            request.min_score,
            where,
        )
        return memory_pb2.SearchResponse(
            hits=[_hit(h) for h in found.hits], mode=found.mode, degraded=found.degraded
        )

    @statuses
    async def Get(
        self, request: memory_pb2.GetRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.GetResponse:
        scope = scope_of(request.scope)
        got = await self.documents.lines(
            scope, check_path(request.path), request.from_line, request.lines
        )
        return memory_pb2.GetResponse(
            path=got.path,
            text=got.text,
            from_line=got.from_line,
            to_line=got.to_line,
            total_lines=got.total,
        )

    @statuses
    async def Delete(
        self, request: memory_pb2.DeleteRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.DeleteResponse:
        scope = scope_of(request.scope)
        chosen = sum(bool(x) for x in (request.ids, request.path, request.session_key))
        if chosen != 1:
            raise InvalidRequest("give exactly one of ids, path or session_key")
        if request.path:
            deleted = await self.documents.forget(scope, check_path(request.path))
        elif request.session_key:
            deleted = await self.memory.store.delete(
                scope.agent, scope.user, (), Filter(scope.user, session_key=request.session_key)
            )
        else:
            self._count(len(request.ids), "ids")
            deleted = await self.memory.store.delete(scope.agent, scope.user, request.ids, None)
        return memory_pb2.DeleteResponse(deleted=deleted)

    async def IngestDocument(
        self,
        request_iterator: AsyncIterator[memory_pb2.IngestChunk],
        context: grpc.aio.ServicerContext,
    ) -> memory_pb2.IngestResponse:
        return await self._ingest(request_iterator, context)

    @statuses
    async def _ingest(
        self,
        request_iterator: AsyncIterator[memory_pb2.IngestChunk],
        context: grpc.aio.ServicerContext,
    ) -> memory_pb2.IngestResponse:
        header: memory_pb2.DocumentHeader | None = None
        data = bytearray()
        async for chunk in request_iterator:
            if header is None:
                if not chunk.HasField("header"):
                    raise InvalidRequest("the first message must carry the document's header")
                header = chunk.header
            data.extend(chunk.data)
            if len(data) > self.max_bytes:
                raise InvalidRequest(f"the document is larger than {self.max_bytes} bytes")
        if header is None:
            raise InvalidRequest("no document sent")
        scope = scope_of(header.scope)
        path = check_path(header.path)
        text = extract_text(bytes(data), mime_of(path, header.mime))
        done = await self.documents.ingest(
            scope,
            path,
            header.source or "document",
            text,
            check_metadata(dict(header.metadata), "header.metadata"),
        )
        return memory_pb2.IngestResponse(
            path=done.path,
            chunks=done.chunks,
            characters=done.characters,
            unchanged=done.unchanged,
            degraded=done.degraded,
        )

    @statuses
    async def SyncSession(
        self, request: memory_pb2.SyncSessionRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.SyncSessionResponse:
        scope = scope_of(request.scope)
        if not request.session_key:
            raise InvalidRequest("session_key is empty")
        if len(request.turns) > MAX_TURNS:
            raise InvalidRequest(f"at most {MAX_TURNS} turns per call")
        items = []
        for n, turn in enumerate(request.turns):
            if not turn.turn_id:
                raise InvalidRequest(f"turns[{n}].turn_id is empty")
            text = compose_turn(turn.user_text, turn.assistant_text, turn.at_ms)
            if not text.strip():
                continue
            items.append(
                Item(
                    text=text[: self.memory.max_text_chars],
                    source="session",
                    id=turn.turn_id,
                    session_key=request.session_key,
                    created_at_ms=turn.at_ms,
                )
            )
        if not items:
            return memory_pb2.SyncSessionResponse(indexed=0)
        _, degraded = await self.memory.upsert(scope, items)
        return memory_pb2.SyncSessionResponse(indexed=len(items), degraded=degraded)
