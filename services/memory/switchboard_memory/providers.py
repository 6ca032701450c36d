"""The embedding provider the settings choose (each imported only when chosen)."""

from __future__ import annotations

import logging

from .config import EmbeddingProvider, MemorySettings
from .embeddings import Embedder
from .errors import EmbeddingUnavailable
from .lazy_model import LazyEmbedder

log = logging.getLogger(__name__)


async def build_embedder(settings: MemorySettings) -> Embedder:
    if settings.embedding_provider is EmbeddingProvider.OPENAI:
        from .openai_embedder import OpenAIEmbedder

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
    return LazyEmbedder(settings.embedding_model, settings.embedding_idle_unload_s)
