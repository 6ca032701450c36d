"""Errors of the media service; each is a kind of :mod:`switchboard.errors`, whose kind alone
sets the gRPC status a caller gets (:mod:`switchboard.errors_map`)."""

from __future__ import annotations

from switchboard import errors
from switchboard.errors import SwitchboardError


class MediaError(SwitchboardError):
    """Base class of the media service's errors."""


class InvalidMedia(MediaError, errors.InvalidArgument):
    """The input is refused (INVALID_ARGUMENT); the message says why."""


class TooLarge(MediaError, errors.ResourceExhausted):
    """The file is over the size cap (RESOURCE_EXHAUSTED)."""


class NotFound(MediaError, errors.NotFound):
    """No such file, or it expired (NOT_FOUND)."""


class NotConfigured(MediaError, errors.FailedPrecondition):
    """The operation needs settings that are not set (FAILED_PRECONDITION)."""


class ProviderFailed(MediaError, errors.Unavailable):
    """The transcription provider failed (UNAVAILABLE); the message has no secrets."""
