"""The OpenAI-compatible embeddings provider (any ``/v1/embeddings`` base URL, through the
``openai`` SDK): its own module so the SDK is imported only when ``SB_EMBEDDING_PROVIDER`` is
``openai``."""

from __future__ import annotations

from collections.abc import Sequence

import openai

from .errors import EmbeddingUnavailable


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
