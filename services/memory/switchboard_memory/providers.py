"""The embedding provider the settings choose."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from .config import EmbeddingProvider, MemorySettings
from .embeddings import Embedder, OpenAIEmbedder
from .errors import EmbeddingUnavailable

log = logging.getLogger(__name__)


async def build_embedder(settings: MemorySettings) -> Embedder:
    if settings.embedding_provider is EmbeddingProvider.OPENAI:
        embedder = OpenAIEmbedder(
            settings.embedding_base_url,
            settings.embedding_key(),
            settings.embedding_model,
            settings.embedding_dimension,
            settings.embedding_timeout_s,
        )
        try:
            await embedder.probe()
        except EmbeddingUnavailable as exc:
            # Not fatal: searches run on keywords and say so until the provider answers.
            log.warning("embedding provider not available at start: %s", exc)
        return embedder
    return LazyEmbedder(settings.embedding_model)


class LazyEmbedder:
    """The local model, loaded in a thread in the background: the service answers (keyword
    searches, health) while it loads, and the first embedding waits for it."""

    def __init__(self, model: str) -> None:
        from .local_model import LocalEmbedder  # imports the runtime: only when chosen

        self._spec = LocalEmbedder.describe(model)
        self._loading = asyncio.ensure_future(asyncio.to_thread(LocalEmbedder.load, model))

    @property
    def provider(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self._spec.name

    @property
    def dimension(self) -> int:
        return self._spec.dimension

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        try:
            model = await asyncio.shield(self._loading)
        except OSError as exc:
            raise EmbeddingUnavailable(f"the local model failed to load ({exc})") from exc
        return await model.embed(texts, query)
