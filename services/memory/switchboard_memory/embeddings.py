"""Embedding providers: a small interface, the OpenAI-compatible ``/v1/embeddings`` provider
(any base URL, through the ``openai`` SDK) and :class:`CachedEmbedder`, which serves what the
Postgres cache holds and sends the rest to the provider in batches.

The local model lives in :mod:`.local_model`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import openai

from .cache import EmbeddingCache, text_digest
from .errors import EmbeddingUnavailable
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


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint. ``dimension`` 0: learnt from the first
    answer (:meth:`probe` asks for it at start when the provider is up)."""

    DEFAULT_MODEL = "text-embedding-3-small"

    def __init__(
        self, base_url: str, api_key: str, model: str, dimension: int, timeout_s: float
    ) -> None:
        self._client = openai.AsyncOpenAI(
            base_url=base_url or None,
            api_key=api_key or "unset",
            timeout=timeout_s,
            max_retries=1,
        )
        self._model = model or self.DEFAULT_MODEL
        self._dimension = dimension

    @property
    def provider(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    async def probe(self) -> None:
        """Learn the dimension if it is not configured (raises when the provider is down)."""
        if not self._dimension:
            await self.embed(["dimension probe"])

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        if not texts:
            return []
        try:
            answer = await self._client.embeddings.create(model=self._model, input=list(texts))
        except openai.APIStatusError as exc:
            raise EmbeddingUnavailable(
                f"embedding provider answered HTTP {exc.status_code}"
            ) from exc
        except openai.APIError as exc:
            raise EmbeddingUnavailable(
                f"embedding provider unreachable ({type(exc).__name__})"
            ) from exc
        rows = sorted(answer.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbeddingUnavailable(
                f"embedding provider returned {len(rows)} vectors for {len(texts)} texts"
            )
        vectors = [_unit(list(r.embedding)) for r in rows]
        size = len(vectors[0])
        if self._dimension and size != self._dimension:
            raise EmbeddingUnavailable(
                f"embedding provider returned {size} dimensions, configured {self._dimension}"
            )
        self._dimension = size
        return vectors

    async def close(self) -> None:
        await self._client.close()


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else vector


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
