"""Errors of the memory service; the servicer turns each into its gRPC status."""

from __future__ import annotations

from switchboard.errors import SwitchboardError


class MemoryServiceError(SwitchboardError):
    """Base class of the memory service's errors."""


class InvalidRequest(MemoryServiceError, ValueError):
    """The request cannot be served as asked (INVALID_ARGUMENT); the message says why."""


class NotFound(MemoryServiceError, LookupError):
    """What the request names does not exist (NOT_FOUND)."""


class EmbeddingUnavailable(MemoryServiceError):
    """The embedding provider failed; the message says why, without secrets."""


class StoreUnavailable(MemoryServiceError):
    """The vector store (a Qdrant server, qdrant-client's local mode) failed (UNAVAILABLE); the
    message names the failure's type only."""
