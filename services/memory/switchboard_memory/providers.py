"""The embedding provider the settings choose (each imported only when chosen), and
:class:`NoEmbedder`, the provider of keyword-only memory (``SB_EMBEDDING_PROVIDER=none``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .config import EmbeddingProvider, MemorySettings
from .embeddings import Embedder
from .errors import NO_PROVIDER, EmbeddingUnavailable
from .lazy_model import LazyEmbedder
from .model_spec import describe

log = logging.getLogger(__name__)


class NoEmbedder:
    """No model and no SDK: entries keep their keyword vector only and searches run on keywords
    (embedded mode's default: docs/memory.md). Collections are still created with the local
    model's vector size, so that setting ``local`` later embeds what was stored meanwhile
    (:meth:`.memory.Memory.repair`) without recreating anything."""

    provider = "none"
    model = ""

    def __init__(self) -> None:
        self.dimension = describe().dimension

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        raise EmbeddingUnavailable(NO_PROVIDER)

    async def close(self) -> None:
        return None


async def build_embedder(settings: MemorySettings) -> Embedder:
    if settings.embedding_provider is EmbeddingProvider.NONE:
        return NoEmbedder()
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
