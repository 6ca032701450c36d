"""The embedding cache in Postgres, keyed by (provider, model, sha256 of the text): a text
embedded once (a memory file re-indexed, a turn synced again, a query asked twice) is not sent
to the provider again, and survives restarts."""

from __future__ import annotations

import hashlib
import struct

import asyncpg

from .migrations import SCHEMA


def text_digest(text: str, query: bool = False) -> str:
    """sha256 of the text; queries are marked, since some models embed them differently."""
    marked = f"query\x00{text}" if query else text
    return hashlib.sha256(marked.encode()).hexdigest()


def _pack(vector: list[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))


class EmbeddingCache:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def get(self, provider: str, model: str, digests: set[str]) -> dict[str, list[float]]:
        if not digests:
            return {}
        rows = await self.pool.fetch(
            f"SELECT digest, vector FROM {SCHEMA}.embedding_cache"
            " WHERE provider = $1 AND model = $2 AND digest = ANY($3::text[])",
            provider,
            model,
            list(digests),
        )
        return {r["digest"]: _unpack(r["vector"]) for r in rows}

    async def put(self, provider: str, model: str, vectors: dict[str, list[float]]) -> None:
        if not vectors:
            return
        await self.pool.executemany(
            f"INSERT INTO {SCHEMA}.embedding_cache (provider, model, digest, vector)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            [(provider, model, d, _pack(v)) for d, v in vectors.items()],
        )
