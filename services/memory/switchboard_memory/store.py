"""Memory entries in Qdrant through qdrant-client: one collection per agent holding a dense vector
(``dense``) and a BM25 sparse vector with Qdrant's IDF modifier (``bm25``) per entry; searched
with the Query API, both prefetches fused by (weighted) reciprocal rank fusion.

The same code serves a Qdrant server (``SB_QDRANT_URL``) and qdrant-client's local mode (a
directory, ``SB_QDRANT_LOCAL_ENGINE=client``): only the client's constructor differs. Every
entry carries its scope's user in the payload and every read filters on it, so a search never
sees another scope's entries.

The client's errors leave this module as :class:`.errors.StoreUnavailable`, so that nothing else
imports qdrant-client (Qdrant Edge, the embedded default, does not need it)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from .entries import DENSE, KEYWORD_FIELDS, RRF_K, SPARSE, Entry, Filter, Hit
from .errors import NotFound, StoreUnavailable
from .sparse import SparseVector

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def _translated(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """The client's failures as :class:`StoreUnavailable` (its type only: no server text)."""

    @functools.wraps(method)
    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except (UnexpectedResponse, ResponseHandlingException) as exc:
            raise StoreUnavailable(type(exc).__name__) from exc

    return wrapped


def client_filter(f: Filter) -> models.Filter:
    """``f`` in qdrant-client's models (its scope's user first)."""
    must: list[models.Condition] = [_match("user", f.user)]
    if f.sources:
        must.append(models.FieldCondition(key="source", match=models.MatchAny(any=list(f.sources))))
    if f.path_prefix:
        must.append(_match("path_prefixes", f.path_prefix))
    if f.session_key:
        must.append(_match("session_key", f.session_key))
    if f.after_ms or f.before_ms:
        must.append(
            models.FieldCondition(
                key="created_at_ms",
                range=models.Range(gte=f.after_ms or None, lt=f.before_ms or None),
            )
        )
    must.extend(_match(f"metadata.{k}", v) for k, v in sorted(f.metadata.items()))
    return models.Filter(must=must)


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


class QdrantStore:
    def __init__(self, client: AsyncQdrantClient, prefix: str, indexes: bool = True) -> None:
        """``indexes``: create payload indexes (a server uses them; local mode has none)."""
        self.client = client
        self.prefix = prefix
        self.indexes = indexes
        self._known: set[str] = set()

    def collection(self, agent: str) -> str:
        return f"{self.prefix}_{agent}"

    @_translated
    async def exists(self, agent: str) -> bool:
        name = self.collection(agent)
        if name in self._known:
            return True
        if await self.client.collection_exists(name):
            self._known.add(name)
            return True
        return False

    @_translated
    async def require(self, agent: str) -> str:
        if not await self.exists(agent):
            raise NotFound(f"no memory collection for agent {agent!r} (nothing stored yet)")
        return self.collection(agent)

    @_translated
    async def ensure(self, agent: str, dimension: int) -> str:
        name = self.collection(agent)
        if await self.exists(agent):
            return name
        await self.client.create_collection(
            name,
            vectors_config={
                DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
            },
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if self.indexes:
            for key in KEYWORD_FIELDS:
                await self.client.create_payload_index(name, key, models.PayloadSchemaType.KEYWORD)
            await self.client.create_payload_index(
                name, "created_at_ms", models.PayloadSchemaType.INTEGER
            )
        self._known.add(name)
        log.info("memory collection created", extra={"collection": name, "dimension": dimension})
        return name

    @_translated
    async def upsert(self, agent: str, dimension: int, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        name = await self.ensure(agent, dimension)
        points = []
        for e in entries:
            sparse = models.SparseVector(indices=e.sparse.indices, values=e.sparse.values)
            vector: dict[str, list[float] | models.SparseVector] = (
                {SPARSE: sparse} if e.dense is None else {SPARSE: sparse, DENSE: e.dense}
            )
            points.append(models.PointStruct(id=e.id, vector=dict(vector), payload=e.payload()))
        await self.client.upsert(name, points=points, wait=True)

    @_translated
    async def search(
        self,
        agent: str,
        where: Filter,
        limit: int,
        dense: list[float] | None,
        sparse: SparseVector | None,
        weights: tuple[float, float] | None,
        prefetch_limit: int,
    ) -> list[Hit]:
        """Hybrid when both vectors are given (fused with ``weights`` for dense and sparse,
        ``None``: plain RRF), else the one given."""
        name = await self.require(agent)
        flt = client_filter(where)
        if dense is not None and sparse is not None:
            answer = await self.client.query_points(
                name,
                prefetch=[
                    models.Prefetch(query=dense, using=DENSE, filter=flt, limit=prefetch_limit),
                    models.Prefetch(
                        query=_sparse(sparse), using=SPARSE, filter=flt, limit=prefetch_limit
                    ),
                ],
                query=models.RrfQuery(
                    rrf=models.Rrf(k=RRF_K, weights=list(weights) if weights else None)
                ),
                limit=limit,
                with_payload=True,
            )
        elif dense is not None:
            answer = await self.client.query_points(
                name, query=dense, using=DENSE, query_filter=flt, limit=limit, with_payload=True
            )
        elif sparse is not None:
            answer = await self.client.query_points(
                name,
                query=_sparse(sparse),
                using=SPARSE,
                query_filter=flt,
                limit=limit,
                with_payload=True,
            )
        else:
            return []
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in answer.points]

    @_translated
    async def delete(self, agent: str, user: str, ids: Sequence[str], where: Filter | None) -> int:
        """Delete the given ids (of ``user``'s scope only) or everything ``where`` matches;
        how many entries were deleted."""
        name = await self.require(agent)
        if ids:
            flt = models.Filter(
                must=[_match("user", user), models.HasIdCondition(has_id=list(ids))]
            )
        elif where is not None:
            flt = client_filter(where)
        else:
            return 0
        count = (await self.client.count(name, count_filter=flt, exact=True)).count
        if count:
            await self.client.delete(
                name, points_selector=models.FilterSelector(filter=flt), wait=True
            )
        return count

    @_translated
    async def without_dense(self, agent: str, limit: int) -> list[Hit]:
        """Entries stored while embeddings were unavailable (to embed them now)."""
        name = await self.require(agent)
        points, _ = await self.client.scroll(
            name,
            scroll_filter=models.Filter(must=[_match("dense", "no")]),
            limit=limit,
            with_payload=True,
        )
        return [Hit(str(p.id), 0.0, dict(p.payload or {})) for p in points]

    @_translated
    async def set_dense(self, agent: str, vectors: dict[str, list[float]]) -> None:
        name = await self.require(agent)
        await self.client.update_vectors(
            name,
            points=[models.PointVectors(id=i, vector={DENSE: v}) for i, v in vectors.items()],
            wait=True,
        )
        await self.client.set_payload(name, {"dense": "yes"}, points=list(vectors), wait=True)

    async def reachable(self) -> bool:
        try:
            await self.client.get_collections()
        except (OSError, UnexpectedResponse, ResponseHandlingException):
            return False
        return True

    @_translated
    async def agents(self) -> list[str]:
        found = (await self.client.get_collections()).collections
        start = f"{self.prefix}_"
        return [c.name[len(start) :] for c in found if c.name.startswith(start)]

    async def close(self) -> None:
        await self.client.close()


def _rrf(weights: tuple[float, float] | None) -> models.Rrf:
    return models.Rrf(k=RRF_K, weights=list(weights) if weights else None)


def _sparse(vector: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=vector.indices, values=vector.values)
