"""Embedding providers: a small interface and :class:`CachedEmbedder`, which serves what the
Postgres cache holds and sends the rest to the provider in batches.

The providers live in their own modules, imported only when chosen (the ``openai`` SDK alone
takes 0.8 s to import): the OpenAI-compatible one in :mod:`.openai_embedder`, the local model
in :mod:`.lazy_model` (loading it) and :mod:`.local_model` (running it)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from .cache import EmbeddingCache, text_digest
from .metrics import EMBED_SECONDS, EMBEDDED

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dimension`` floats."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        """One vector per text; raises :class:`EmbeddingUnavailable` when the provider fails."""
        ...

    async def close(self) -> None:
        """Release what the provider holds (connections, a loaded model)."""
        ...


class CachedEmbedder:
    """``inner`` behind the Postgres cache, in batches of ``batch`` texts."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None, batch: int) -> None:
        self.inner = inner
        self.cache = cache
        self.batch = batch
        self.last_cached = 0

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        digests = [text_digest(t, query) for t in texts]
        found: dict[str, list[float]] = {}
        if self.cache is not None:
            found = await self.cache.get(self.provider, self.model, set(digests))
        missing: dict[str, str] = {}
        for digest, text in zip(digests, texts, strict=True):
            if digest not in found:
                missing.setdefault(digest, text)
        self.last_cached = len(texts) - sum(1 for d in digests if d not in found)
        pending = list(missing.items())
        for start in range(0, len(pending), self.batch):
            part = pending[start : start + self.batch]
            with EMBED_SECONDS.labels(self.provider).time():
                vectors = await self.inner.embed([text for _, text in part], query)
            EMBEDDED.labels(self.provider, "computed").inc(len(part))
            fresh = {digest: vec for (digest, _), vec in zip(part, vectors, strict=True)}
            found.update(fresh)
            if self.cache is not None:
                await self.cache.put(self.provider, self.model, fresh)
        EMBEDDED.labels(self.provider, "cached").inc(self.last_cached)
        return [found[d] for d in digests]

    async def close(self) -> None:
        await self.inner.close()
