"""Errors of the memory service; each is a kind of :mod:`switchboard.errors`, whose kind
alone sets the gRPC status a caller gets (:mod:`switchboard.errors_map`)."""

from __future__ import annotations

from switchboard import errors
from switchboard.errors import SwitchboardError

NO_PROVIDER = "no embedding provider is configured (SB_EMBEDDING_PROVIDER=none)"


class MemoryServiceError(SwitchboardError):
    """Base class of the memory service's errors."""


class InvalidRequest(MemoryServiceError, errors.InvalidArgument):
    """The request cannot be served as asked (INVALID_ARGUMENT); the message says why."""


class NotFound(MemoryServiceError, errors.NotFound):
    """What the request names does not exist (NOT_FOUND)."""


class EmbeddingUnavailable(MemoryServiceError, errors.Unavailable):
    """The embedding provider failed; the message says why, without secrets."""


class StoreUnavailable(MemoryServiceError, errors.Unavailable):
    """The vector store (a Qdrant server, qdrant-client's local mode) failed (UNAVAILABLE); the
    message names the failure's type only and goes to the log; the caller gets ``public``."""

    public = "the vector store is unavailable"
