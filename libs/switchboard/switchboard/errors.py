"""Errors shared by every Switchboard package, and the domain error kinds.

A service's own errors subclass one kind (:class:`InvalidArgument`, :class:`NotFound`...):
the kind alone decides the gRPC and HTTP status a caller gets (one table, in
:mod:`switchboard.errors_map`), so no servicer or handler writes its own translation."""

from __future__ import annotations

import enum
from typing import ClassVar


class SwitchboardError(Exception):
    """Base class of Switchboard errors."""


class ErrorKind(enum.Enum):
    """What a refusal means for the caller; :data:`switchboard.errors_map.STATUSES` maps each
    to its gRPC and HTTP status."""

    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    FAILED_PRECONDITION = "failed_precondition"
    PERMISSION_DENIED = "permission_denied"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    UNAVAILABLE = "unavailable"
    UNIMPLEMENTED = "unimplemented"


class DomainError(SwitchboardError):
    """A refusal whose message we wrote for the caller (no secrets, no internals): it reaches
    the caller as it is, with the status of the class's ``kind``.

    ``public``, where a class sets it, is what the caller gets instead: for errors whose
    message names internals (a library's failure), which then go to the log only. ``code``, a
    short machine-readable tag (``policy_denied``), travels as ``sb-error`` trailing metadata
    for callers that tell refusals of one status apart."""

    kind: ClassVar[ErrorKind]
    public: ClassVar[str | None] = None

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class InvalidArgument(DomainError, ValueError):
    """The request cannot be served as asked; the message says why."""

    kind = ErrorKind.INVALID_ARGUMENT


class NotFound(DomainError, LookupError):
    """What the request names does not exist."""

    kind = ErrorKind.NOT_FOUND


class AlreadyExists(DomainError):
    """What the request would create exists already."""

    kind = ErrorKind.ALREADY_EXISTS


class FailedPrecondition(DomainError):
    """The request is valid but the state (a setting, a decision made) does not allow it."""

    kind = ErrorKind.FAILED_PRECONDITION


class PermissionDenied(DomainError):
    """A policy refuses the request."""

    kind = ErrorKind.PERMISSION_DENIED


class ResourceExhausted(DomainError):
    """The request is over a cap (a size)."""

    kind = ErrorKind.RESOURCE_EXHAUSTED


class Unavailable(DomainError):
    """Something the request needs did not answer; trying again later may succeed."""

    kind = ErrorKind.UNAVAILABLE


class Unimplemented(DomainError):
    """This server does not offer the operation."""

    kind = ErrorKind.UNIMPLEMENTED


class ConfigError(SwitchboardError):
    """The configuration is invalid; the message says what to change."""


class DependencyUnavailable(SwitchboardError):
    """A dependency (NATS, PostgreSQL, another service) did not answer in time."""


class InvalidSessionKey(InvalidArgument):
    """A session key is empty, too long or holds characters it may not."""


class InvalidAgentId(InvalidArgument):
    """An agent id is not 1-64 characters of ``a-z 0-9 _ -``."""


class InvalidPayload(SwitchboardError, ValueError):
    """A message on the bus is not the protobuf message its subject carries."""


class InvalidSchedule(InvalidArgument):
    """Not an interval (``30s``, ``1h30m``) or a time (ISO 8601, ``+10m``); the message says so."""


class PluginError(SwitchboardError):
    """A plugin cannot be used (not installed, fails to import, bad manifest or config); the
    message says why, fit for a report."""


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first.

    A library often wraps the error that matters (a timeout, a size limit) in its own, or
    raises a new one while handling it; callers that must tell those apart walk this chain.
    A cycle in the chain ends the walk instead of looping."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
