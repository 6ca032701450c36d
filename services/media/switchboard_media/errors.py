"""Errors of the media service; the servicer turns each into its gRPC status."""

from __future__ import annotations

from switchboard.errors import SwitchboardError


class MediaError(SwitchboardError):
    """Base class of the media service's errors."""


class InvalidMedia(MediaError, ValueError):
    """The input is refused (INVALID_ARGUMENT); the message says why."""


class TooLarge(MediaError):
    """The file is over the size cap (RESOURCE_EXHAUSTED)."""


class NotFound(MediaError, LookupError):
    """No such file, or it expired (NOT_FOUND)."""


class NotConfigured(MediaError):
    """The operation needs settings that are not set (FAILED_PRECONDITION)."""


class ProviderFailed(MediaError):
    """The transcription provider failed (UNAVAILABLE); the message has no secrets."""
