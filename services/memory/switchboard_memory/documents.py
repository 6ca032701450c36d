"""Memory files and ingested documents: their text in Postgres (what ``Get`` reads, by line),
their chunks in the agent's collection. Ingesting a path again replaces its chunks; the same
content again changes nothing."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import asyncpg

from .chunking import split
from .entries import Filter
from .errors import InvalidRequest, NotFound
from .memory import Item, Memory, Scope
from .migrations import SCHEMA

MAX_GET_LINES = 2000
_PATH_BAD = ("\x00", "\n", "\r")


def check_path(path: str) -> str:
    clean = path.strip().lstrip("/")
    if not clean or len(clean) > 512 or any(c in clean for c in _PATH_BAD):
        raise InvalidRequest("path must be 1-512 characters on one line")
    if any(part in ("", ".", "..") for part in clean.split("/")):
        raise InvalidRequest(f"path {path!r} has an empty, '.' or '..' part")
    return clean


@dataclass(frozen=True)
class Ingested:
    path: str
    chunks: int
    characters: int
    unchanged: bool
    degraded: str = ""


@dataclass(frozen=True)
class Lines:
    path: str
    text: str
    from_line: int
    to_line: int
    total: int


class Documents:
    def __init__(self, pool: asyncpg.Pool, memory: Memory, chunk_chars: int, overlap: int) -> None:
        self.pool = pool
        self.memory = memory
        self.chunk_chars = chunk_chars
        self.overlap = overlap

    async def ingest(
        self, scope: Scope, path: str, source: str, body: str, metadata: dict[str, str]
    ) -> Ingested:
        if source not in ("document", "file"):
            raise InvalidRequest(f"source {source!r}: a document is 'document' or 'file'")
        if not body.strip():
            raise InvalidRequest(f"{path}: the document has no text")
        digest = hashlib.sha256(body.encode()).hexdigest()
        known = await self.pool.fetchrow(
            f"SELECT digest, chunks FROM {SCHEMA}.documents"
            " WHERE agent = $1 AND scope_user = $2 AND path = $3",
            scope.agent,
            scope.user,
            path,
        )
        if known is not None and known["digest"] == digest:
            return Ingested(path, known["chunks"], len(body), unchanged=True)
        chunks = split(body, self.chunk_chars, self.overlap)
        if known is not None and await self.memory.store.exists(scope.agent):
            await self.memory.store.delete(
                scope.agent, scope.user, (), Filter(scope.user, path_prefix=path)
            )
        items = [
            Item(
                text=c.text,
                source=source,
                id=f"{path}#{n}",
                path=path,
                start_line=c.start_line,
                end_line=c.end_line,
                metadata=metadata,
            )
            for n, c in enumerate(chunks)
        ]
        degraded = ""
        for start in range(0, len(items), 256):
            _, why = await self.memory.upsert(scope, items[start : start + 256])
            degraded = degraded or why
        await self.pool.execute(
            f"INSERT INTO {SCHEMA}.documents"
            " (agent, scope_user, path, source, digest, body, chunks)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7)"
            " ON CONFLICT (agent, scope_user, path) DO UPDATE SET source = $4, digest = $5,"
            " body = $6, chunks = $7, updated_at = now()",
            scope.agent,
            scope.user,
            path,
            source,
            digest,
            body,
            len(chunks),
        )
        return Ingested(path, len(chunks), len(body), unchanged=False, degraded=degraded)

    async def lines(self, scope: Scope, path: str, from_line: int, count: int) -> Lines:
        if from_line < 0 or count < 0:
            raise InvalidRequest("from_line and lines must not be negative")
        body = await self.pool.fetchval(
            f"SELECT body FROM {SCHEMA}.documents"
            " WHERE agent = $1 AND scope_user = $2 AND path = $3",
            scope.agent,
            scope.user,
            path,
        )
        if body is None:
            raise NotFound(f"no memory file or document {path!r}")
        all_lines = body.splitlines()
        first = max(from_line, 1)
        n = min(count or MAX_GET_LINES, MAX_GET_LINES)
        chosen = all_lines[first - 1 : first - 1 + n]
        return Lines(path, "\n".join(chosen), first, first + len(chosen) - 1, len(all_lines))

    async def forget(self, scope: Scope, path: str) -> int:
        """Delete a document and its chunks; how many chunks went."""
        await self.pool.execute(
            f"DELETE FROM {SCHEMA}.documents WHERE agent = $1 AND scope_user = $2 AND path = $3",
            scope.agent,
            scope.user,
            path,
        )
        if not await self.memory.store.exists(scope.agent):
            return 0
        return await self.memory.store.delete(
            scope.agent, scope.user, (), Filter(scope.user, path_prefix=path)
        )
