"""What the stores keep and how they are asked: an entry, a hit, the filter of a search (always
its scope's user first), stable ids; and :class:`Store`, what both Qdrant engines offer (the
qdrant-client store for a server or client local mode, :mod:`.store`; Qdrant Edge in-process,
:mod:`.edge_store`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .sparse import SparseVector

DENSE = "dense"
SPARSE = "bm25"
RRF_K = 2  # Qdrant's default rank constant, given explicitly so both engines agree
_IDS = uuid.UUID("6f0b1c9e-53a4-4e7e-9b0e-5b2f3c1d7a10")
KEYWORD_FIELDS = ("user", "source", "path_prefixes", "session_key", "dense")


@dataclass(frozen=True)
class Entry:
    """One entry as stored (``dense`` None: stored while the embedding provider was down)."""

    id: str
    text: str
    source: str
    user: str
    sparse: SparseVector
    dense: list[float] | None = None
    path: str = ""
    start_line: int = 0
    end_line: int = 0
    session_key: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at_ms: int = 0

    def payload(self) -> dict[str, object]:
        return {
            "text": self.text,
            "source": self.source,
            "user": self.user,
            "path": self.path,
            "path_prefixes": path_prefixes(self.path),
            "start_line": self.start_line,
            "end_line": self.end_line,
            "session_key": self.session_key,
            "metadata": self.metadata,
            "created_at_ms": self.created_at_ms,
            # A string, not a bool: Qdrant Edge's Python binding cannot match booleans.
            "dense": "yes" if self.dense is not None else "no",
        }


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    payload: dict[str, object]


def entry_id(agent: str, user: str, source: str, where: str, key: str) -> str:
    """A stable id: the same entry stored twice is one entry."""
    return str(uuid.uuid5(_IDS, "\x00".join((agent, user, source, where, key))))


def path_prefixes(path: str) -> list[str]:
    """``a/b/c.md`` -> ``["a/", "a/b/", "a/b/c.md"]``: what a path-prefix filter matches."""
    if not path:
        return []
    parts = path.split("/")
    return [*("/".join(parts[: i + 1]) + "/" for i in range(len(parts) - 1)), path]


@dataclass(frozen=True)
class Filter:
    user: str
    sources: Sequence[str] = ()
    path_prefix: str = ""
    session_key: str = ""
    after_ms: int = 0
    before_ms: int = 0
    metadata: dict[str, str] = field(default_factory=dict)


class Store(Protocol):
    """One collection (or shard) per agent; every read and delete filters on a scope."""

    async def exists(self, agent: str) -> bool: ...

    async def require(self, agent: str) -> str:
        """The collection's name; :class:`NotFound` when the agent has none."""
        ...

    async def upsert(self, agent: str, dimension: int, entries: Sequence[Entry]) -> None: ...

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
        """Hybrid when both vectors are given (fused by RRF, weighted by ``weights`` for the
        dense and sparse sides when given), else the one given."""
        ...

    async def delete(
        self, agent: str, user: str, ids: Sequence[str], where: Filter | None
    ) -> int: ...

    async def without_dense(self, agent: str, limit: int) -> list[Hit]: ...

    async def set_dense(self, agent: str, vectors: dict[str, list[float]]) -> None: ...

    async def agents(self) -> list[str]: ...

    async def reachable(self) -> bool: ...

    async def close(self) -> None: ...
