"""Memory: serves gRPC ``Memory`` (embeddings, hybrid search over an agent's memory) on
Qdrant (local mode under ``$SB_HOME`` or a server) and Postgres (embedding cache, documents)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from switchboard import registry, rpc
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import memory_pb2_grpc

from .cache import EmbeddingCache
from .config import Fusion, MemorySettings
from .documents import Documents
from .edge_store import EdgeStore
from .embeddings import CachedEmbedder
from .entries import Store
from .errors import EmbeddingUnavailable
from .memory import Memory
from .migrations import MIGRATIONS, SCHEMA
from .providers import build_embedder
from .service import MemoryService

log = logging.getLogger(__name__)


def open_store(settings: MemorySettings) -> Store:
    """The Qdrant server of ``SB_QDRANT_URL``, else the local engine in a directory.
    qdrant-client is imported only for the server and its local mode: Qdrant Edge does not
    need it, and it weighs (docs/memory.md)."""
    prefix = settings.collection_prefix
    if not settings.qdrant_url and settings.qdrant_local_engine == "edge":
        return EdgeStore(_local_dir(settings), prefix)
    from qdrant_client import AsyncQdrantClient

    from .store import QdrantStore

    if settings.qdrant_url:
        key = settings.qdrant_api_key.get_secret_value() or None
        return QdrantStore(
            AsyncQdrantClient(url=settings.qdrant_url, api_key=key, timeout=10), prefix
        )
    return QdrantStore(AsyncQdrantClient(path=str(_local_dir(settings))), prefix, indexes=False)


def _local_dir(settings: MemorySettings) -> Path:
    path = settings.qdrant_location()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # $SB_HOME/memory: ours only
    path.mkdir(mode=0o700, exist_ok=True)
    return path


async def _repair_loop(memory: Memory, stop: asyncio.Event, every_s: float) -> None:
    """Embed what was stored while the embedding provider was down, once it is back."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
            return
        try:
            if done := await memory.repair():
                log.info("embedded %d entries stored without embeddings", done)
        except EmbeddingUnavailable as exc:
            log.info("entries still wait for embeddings: %s", exc)


async def serve(settings: MemorySettings, stop: asyncio.Event) -> None:
    async with ServiceRuntime(registry.get("memory"), settings, stop) as rt:
        embedding = asyncio.create_task(build_embedder(settings))  # openai: probed meanwhile
        pool = await rt.database(SCHEMA, MIGRATIONS)
        store = open_store(settings)
        rt.stack.push_async_callback(store.close)
        rt.readiness.add("qdrant", store.reachable)
        embedder = CachedEmbedder(await embedding, EmbeddingCache(pool), settings.embedding_batch)
        rt.stack.push_async_callback(embedder.close)
        weights = (
            (settings.vector_weight, 1.0 - settings.vector_weight)
            if settings.fusion is Fusion.WEIGHTED
            else None
        )
        memory = Memory(store, embedder, settings.max_text_chars, weights)
        documents = Documents(pool, memory, settings.chunk_chars, settings.chunk_overlap)
        service = MemoryService(
            memory, documents, settings.max_items_per_call, settings.max_document_bytes
        )
        await rt.serve_grpc(
            settings.memory_grpc_host,
            settings.memory_grpc_port,
            rpc.Servicer(memory_pb2_grpc.add_MemoryServicer_to_server, service),
        )
        if memory.dense:  # nothing to repair in keyword-only memory
            repair = asyncio.create_task(
                _repair_loop(memory, rt.stopping, settings.repair_interval_s)
            )
            rt.stack.push_async_callback(_cancel, repair)
        else:
            log.info(
                "memory searches by keywords only (SB_EMBEDDING_PROVIDER=none); "
                "SB_EMBEDDING_PROVIDER=local adds semantic search (docs/memory.md)"
            )
        log.info(
            "memory ready",
            extra={
                "qdrant": settings.qdrant_url or settings.qdrant_local_engine,
                "embedding": f"{embedder.provider}:{embedder.model}",
            },
        )
        await rt.wait_stopped()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
