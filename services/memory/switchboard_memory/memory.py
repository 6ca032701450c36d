"""What the service does, apart from gRPC: validate, embed, store, search, forget.

Embeddings can fail (an OpenAI-compatible provider down, a bad key): then entries are stored
with their keyword vector only and embedded later (:meth:`Memory.repair`), and searches run on
keywords, each answer saying why (``degraded``). Nothing is lost and no caller waits for the
provider to come back. With no provider at all (``SB_EMBEDDING_PROVIDER=none``, embedded mode's
default) the same happens by choice: keyword vectors only, searches on keywords, nothing
degraded, and the entries are embedded once a provider is set."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace

from switchboard.sessions import is_agent_id

from .embeddings import Embedder
from .entries import Entry, Filter, Hit, Store, entry_id
from .errors import NO_PROVIDER, EmbeddingUnavailable, InvalidRequest
from .metrics import DEGRADED, SEARCH_SECONDS, SEARCHES, UPSERTED
from .recall import compose_query
from .sparse import Bm25Encoder

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.memory")
SOURCES = ("note", "file", "session", "document")
MODES = ("hybrid", "vector", "keyword")
MAX_K = 100
_META_KEY = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_USER = re.compile(r"^[^\x00-\x1f]{0,300}$")


@dataclass(frozen=True)
class Scope:
    agent: str
    user: str = ""


@dataclass(frozen=True)
class Item:
    text: str
    source: str = "note"
    id: str = ""
    path: str = ""
    start_line: int = 0
    end_line: int = 0
    session_key: str = ""
    metadata: dict[str, str] | None = None
    created_at_ms: int = 0


@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    mode: str
    degraded: str = ""


def check_scope(agent: str, user: str) -> Scope:
    if not is_agent_id(agent):
        raise InvalidRequest(f"scope.agent {agent!r} is not an agent id (1-64 of a-z 0-9 _ -)")
    if not _USER.match(user):
        raise InvalidRequest("scope.user must be at most 300 printable characters")
    return Scope(agent, user)


def check_metadata(metadata: dict[str, str], what: str) -> dict[str, str]:
    if len(metadata) > 32:
        raise InvalidRequest(f"{what}: at most 32 entries")
    for key, value in metadata.items():
        if not _META_KEY.match(key):
            raise InvalidRequest(f"{what}: key {key!r} is not 1-64 of A-Z a-z 0-9 _ -")
        if len(value) > 1000:
            raise InvalidRequest(f"{what}[{key!r}]: at most 1000 characters")
    return dict(metadata)


class Memory:
    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        max_text_chars: int,
        weights: tuple[float, float] | None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        # "none": keyword-only memory by configuration, not a failure (providers.NoEmbedder).
        self.dense = embedder.provider != "none"
        self.sparse = Bm25Encoder()
        self.max_text_chars = max_text_chars
        self.weights = weights

    def check_text(self, text: str, what: str) -> str:
        if not text.strip():
            raise InvalidRequest(f"{what} is empty")
        if len(text) > self.max_text_chars:
            raise InvalidRequest(
                f"{what} has {len(text)} characters; at most {self.max_text_chars}"
            )
        return text

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        return await self.embedder.embed(texts, query)

    async def upsert(self, scope: Scope, items: Sequence[Item]) -> tuple[list[str], str]:
        """Store ``items``; their ids, and why they lack dense vectors ("" when they do not)."""
        for n, item in enumerate(items):
            self.check_text(item.text, f"items[{n}].text")
            if item.source not in SOURCES:
                raise InvalidRequest(
                    f"items[{n}].source {item.source!r} is not one of {', '.join(SOURCES)}"
                )
            check_metadata(item.metadata or {}, f"items[{n}].metadata")
        with tracer.start_as_current_span("memory.upsert") as span:
            span.set_attribute("sb.agent", scope.agent)
            span.set_attribute("sb.memory.items", len(items))
            degraded = ""
            dense: list[list[float]] | None = None
            try:
                if self.dense:
                    dense = await self.embedder.embed([i.text for i in items])
            except EmbeddingUnavailable as exc:
                dense, degraded = None, f"stored without embeddings: {exc}"
                DEGRADED.labels("upsert").inc()
                log.warning("memory upsert without embeddings: %s", exc)
            now = int(time.time() * 1000)
            entries = []
            for n, item in enumerate(items):
                where = item.path or item.session_key
                key = item.id or item.text
                entries.append(
                    Entry(
                        id=entry_id(scope.agent, scope.user, item.source, where, key),
                        text=item.text,
                        source=item.source,
                        user=scope.user,
                        sparse=self.sparse.document(item.text),
                        dense=dense[n] if dense is not None else None,
                        path=item.path,
                        start_line=item.start_line,
                        end_line=item.end_line,
                        session_key=item.session_key,
                        metadata=dict(item.metadata or {}),
                        created_at_ms=item.created_at_ms or now,
                    )
                )
            await self.store.upsert(scope.agent, self.embedder.dimension, entries)
            for item in items:
                UPSERTED.labels(item.source).inc()
            return [e.id for e in entries], degraded

    async def search(
        self, scope: Scope, query: str, k: int, mode: str, min_score: float, where: Filter
    ) -> Found:
        self.check_text(query, "query")
        if not 1 <= k <= MAX_K:
            raise InvalidRequest(f"k must be between 1 and {MAX_K} (given {k})")
        if mode not in MODES:
            raise InvalidRequest(f"mode {mode!r} is not one of {', '.join(MODES)}")
        with tracer.start_as_current_span("memory.search") as span, SEARCH_SECONDS.time():
            span.set_attribute("sb.agent", scope.agent)
            span.set_attribute("sb.memory.mode", mode)
            await self.store.require(scope.agent)
            text = compose_query(query)
            dense: list[float] | None = None
            degraded = ""
            if mode != "keyword" and not self.dense:
                if mode == "vector":  # asked for explicitly: say why it is not one
                    degraded = f"keyword search only: {NO_PROVIDER}"
            elif mode != "keyword":
                try:
                    [dense] = await self.embedder.embed([text], query=True)
                except EmbeddingUnavailable as exc:
                    DEGRADED.labels("search").inc()
                    degraded = f"keyword search only: {exc}"
            ran = mode if dense is not None or mode == "keyword" else "keyword"
            sparse = self.sparse.query(text) if ran != "vector" else None
            if ran == "hybrid" and sparse is not None and not sparse.indices:
                sparse = None  # only stop words: the dense side alone
            hits = await self.store.search(
                scope.agent,
                where,
                k,
                dense if ran != "keyword" else None,
                sparse,
                self.weights,
                prefetch_limit=max(4 * k, 50),
            )
            hits = [h for h in hits if h.score >= min_score]
            span.set_attribute("sb.memory.hits", len(hits))
            SEARCHES.labels(ran, "degraded" if degraded else "ok").inc()
            return Found(hits, ran, degraded)

    async def repair(self, batch: int = 64) -> int:
        """Embed entries stored while the provider was down (or while none was configured);
        how many were embedded."""
        done = 0
        if not self.dense:
            return done
        for agent in await self.store.agents():
            while True:
                pending = await self.store.without_dense(agent, batch)
                if not pending:
                    break
                vectors = await self.embedder.embed(
                    [str(h.payload.get("text", "")) for h in pending]
                )
                await self.store.set_dense(
                    agent, {h.id: v for h, v in zip(pending, vectors, strict=True)}
                )
                done += len(pending)
        return done
