"""Memory entries in Qdrant Edge (``qdrant-edge-py``): Qdrant's own engine inside the process, one
shard per agent under a directory; the embedded default. Same collection layout, filters and
fusion as :mod:`.store` (dense + BM25 sparse with IDF, weighted RRF of both prefetches), but
searches run in Qdrant's Rust engine instead of qdrant-client's pure-Python local mode, which
is what keeps a hybrid search within a few milliseconds (see the bench).

Shard calls are synchronous; each runs in a worker thread so the event loop stays free.

Writes are flushed together, at most once every ``flush_every_s`` (and at close), not after
each write: a flush syncs the write-ahead log and every segment (about 4.5 ms of CPU and
10 ms of wall time on the bench machine), and the agent syncs one session's turns per call,
so flushing each call was most of the memory service's CPU per turn. A written operation is in
the shard's write-ahead log before ``update`` returns, and a shard loaded after its process was
killed replays it (``test_edge_store.py`` kills one); only a crash of the machine itself can
lose the writes of the last ``flush_every_s``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import qdrant_edge as edge

from .entries import DENSE, KEYWORD_FIELDS, RRF_K, SPARSE, Entry, Filter, Hit
from .errors import NotFound
from .sparse import SparseVector

log = logging.getLogger(__name__)
_NAME = re.compile(r"^[a-z0-9_-]{1,100}$")


def edge_filter(f: Filter) -> edge.Filter:
    must: list[Any] = [_match("user", f.user)]
    if f.sources:
        must.append(edge.FieldCondition("source", match=edge.MatchAny(list(f.sources))))
    if f.path_prefix:
        must.append(_match("path_prefixes", f.path_prefix))
    if f.session_key:
        must.append(_match("session_key", f.session_key))
    if f.after_ms or f.before_ms:
        bounds = edge.RangeFloat(
            gte=float(f.after_ms) if f.after_ms else None,
            lt=float(f.before_ms) if f.before_ms else None,
        )
        must.append(edge.FieldCondition("created_at_ms", range=bounds))
    must.extend(_match(f"metadata.{k}", v) for k, v in sorted(f.metadata.items()))
    return edge.Filter(must=must)


def _match(key: str, value: str) -> edge.FieldCondition:
    return edge.FieldCondition(key, match=edge.MatchValue(value))


def _sparse(vector: SparseVector) -> edge.SparseVector:
    return edge.SparseVector(vector.indices, vector.values)


def _hits(points: Sequence[Any]) -> list[Hit]:
    return [Hit(str(p.id), float(getattr(p, "score", 0.0)), dict(p.payload or {})) for p in points]


def _new_shard(path: Path, dimension: int) -> edge.EdgeShard:
    if path.exists():  # a creation that died half-way: nothing in it to keep
        shutil.rmtree(path)
    sparse = edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)
    config = edge.EdgeConfig(
        vectors={DENSE: edge.EdgeVectorParams(dimension, edge.Distance.Cosine)},
        sparse_vectors={SPARSE: sparse},
    )
    shard = edge.EdgeShard.create(str(path), config)
    for key in KEYWORD_FIELDS:
        shard.update(edge.UpdateOperation.create_field_index(key, edge.PayloadSchemaType.Keyword))
    shard.update(
        edge.UpdateOperation.create_field_index("created_at_ms", edge.PayloadSchemaType.Integer)
    )
    log.info("memory shard created", extra={"shard": path.name, "dimension": dimension})
    return shard


FLUSH_EVERY_S = 1.0


class EdgeStore:
    def __init__(self, root: Path, prefix: str, flush_every_s: float = FLUSH_EVERY_S) -> None:
        self.root = root
        self.prefix = prefix
        self.flush_every_s = flush_every_s
        self._shards: dict[str, edge.EdgeShard] = {}
        self._lock = threading.Lock()  # opening and creating shards
        self._dirty: set[str] = set()  # agents whose shards have writes not flushed yet
        self._flusher: asyncio.Task[None] | None = None

    def collection(self, agent: str) -> str:
        return f"{self.prefix}_{agent}"

    def _path(self, agent: str) -> Path:
        name = self.collection(agent)
        if not _NAME.match(name):
            raise NotFound(f"no memory collection {name!r}")
        return self.root / name

    def _open(self, agent: str) -> edge.EdgeShard | None:
        with self._lock:
            shard = self._shards.get(agent)
            if shard is None and (self._path(agent) / "edge_config.json").exists():
                shard = self._shards[agent] = edge.EdgeShard.load(str(self._path(agent)))
            return shard

    def _create(self, agent: str, dimension: int) -> edge.EdgeShard:
        with self._lock:
            if agent not in self._shards:
                path = self._path(agent)
                if (path / "edge_config.json").exists():
                    self._shards[agent] = edge.EdgeShard.load(str(path))
                else:
                    self._shards[agent] = _new_shard(path, dimension)
            return self._shards[agent]

    async def _opened(self, agent: str) -> edge.EdgeShard | None:
        """The agent's shard, loaded in a thread the first time. Once it is open the lookup
        stays on the loop: each thread hop is a cross-thread wake-up of the loop, and a turn's
        upsert made two. A dict read needs no lock; a miss takes the locked path."""
        shard = self._shards.get(agent)
        return shard if shard is not None else await asyncio.to_thread(self._open, agent)

    async def exists(self, agent: str) -> bool:
        return await self._opened(agent) is not None

    async def require(self, agent: str) -> str:
        if not await self.exists(agent):
            raise NotFound(f"no memory collection for agent {agent!r} (nothing stored yet)")
        return self.collection(agent)

    async def _shard(self, agent: str) -> edge.EdgeShard:
        shard = await self._opened(agent)
        if shard is None:
            raise NotFound(f"no memory collection for agent {agent!r} (nothing stored yet)")
        return shard

    async def upsert(self, agent: str, dimension: int, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        shard = self._shards.get(agent)  # see _opened
        if shard is None:
            shard = await asyncio.to_thread(self._create, agent, dimension)
        points = []
        for e in entries:
            vector: dict[str, Any] = {SPARSE: _sparse(e.sparse)}
            if e.dense is not None:
                vector[DENSE] = e.dense
            points.append(edge.Point(e.id, vector, e.payload()))

        await asyncio.to_thread(shard.update, edge.UpdateOperation.upsert_points(points))
        self._written(agent)

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
        shard = await self._shard(agent)
        flt = edge_filter(where)
        if dense is not None and sparse is not None:
            request = edge.QueryRequest(
                limit,
                prefetches=[
                    edge.Prefetch(
                        prefetch_limit, query=edge.Query.Nearest(dense, using=DENSE), filter=flt
                    ),
                    edge.Prefetch(
                        prefetch_limit,
                        query=edge.Query.Nearest(_sparse(sparse), using=SPARSE),
                        filter=flt,
                    ),
                ],
                query=cast(Any, edge.Fusion.Rrf(RRF_K, list(weights) if weights else None)),
                with_payload=True,
            )
        elif dense is not None:
            request = edge.QueryRequest(
                limit, query=edge.Query.Nearest(dense, using=DENSE), filter=flt, with_payload=True
            )
        elif sparse is not None:
            request = edge.QueryRequest(
                limit,
                query=edge.Query.Nearest(_sparse(sparse), using=SPARSE),
                filter=flt,
                with_payload=True,
            )
        else:
            return []
        return _hits(await asyncio.to_thread(shard.query, request))

    async def delete(self, agent: str, user: str, ids: Sequence[str], where: Filter | None) -> int:
        shard = await self._shard(agent)
        if ids:
            flt = edge.Filter(must=[_match("user", user), edge.HasIdCondition(set(ids))])
        elif where is not None:
            flt = edge_filter(where)
        else:
            return 0

        def remove() -> int:
            count = shard.count(edge.CountRequest(exact=True, filter=flt))
            if count:
                shard.update(edge.UpdateOperation.delete_points_by_filter(flt))
            return int(count)

        removed = await asyncio.to_thread(remove)
        if removed:
            self._written(agent)
        return removed

    async def without_dense(self, agent: str, limit: int) -> list[Hit]:
        shard = await self._shard(agent)
        request = edge.ScrollRequest(
            limit=limit, filter=edge.Filter(must=[_match("dense", "no")]), with_payload=True
        )
        points, _ = await asyncio.to_thread(shard.scroll, request)
        return _hits(points)

    async def set_dense(self, agent: str, vectors: dict[str, list[float]]) -> None:
        shard = await self._shard(agent)

        def write() -> None:
            shard.update(
                edge.UpdateOperation.update_vectors(
                    [edge.PointVectors(i, {DENSE: v}) for i, v in vectors.items()]
                )
            )
            shard.update(edge.UpdateOperation.set_payload(list(vectors), {"dense": "yes"}))

        await asyncio.to_thread(write)
        self._written(agent)

    async def agents(self) -> list[str]:
        start = f"{self.prefix}_"
        if not self.root.is_dir():
            return []
        return sorted(
            p.name[len(start) :]
            for p in self.root.iterdir()
            if p.name.startswith(start) and (p / "edge_config.json").exists()
        )

    async def reachable(self) -> bool:
        return self.root.is_dir()

    def _written(self, agent: str) -> None:
        """``agent``'s shard has a write to flush: within ``flush_every_s``, with any others."""
        self._dirty.add(agent)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="memory-edge-flush")

    async def _flush_later(self) -> None:
        while True:  # until a flush leaves nothing (a write during one, or a failed one)
            await asyncio.sleep(self.flush_every_s)
            await self.flush()
            if not self._dirty:
                return

    async def flush(self) -> None:
        """Flush every shard written since the last flush (a failed one is tried again later)."""
        dirty, self._dirty = self._dirty, set()
        for agent in sorted(dirty):
            shard = self._shards.get(agent)
            if shard is None:
                continue
            try:
                await asyncio.to_thread(shard.flush)
            except Exception as exc:  # the writes stay in the WAL; flush again with the next
                log.warning("memory shard flush failed: %s", exc, extra={"shard": agent})
                self._dirty.add(agent)

    async def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()
        with self._lock:
            shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            await asyncio.to_thread(shard.close)
