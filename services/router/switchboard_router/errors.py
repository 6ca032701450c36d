"""Errors of the router's operator API; each is a kind of :mod:`switchboard.errors`, whose kind
alone sets the gRPC status a caller gets (:mod:`switchboard.errors_map`)."""

from __future__ import annotations

from switchboard import errors


class PairingError(errors.InvalidArgument):
    """A pairing request that cannot be decided (INVALID_ARGUMENT); the text is safe to show
    the operator."""


class NotFound(PairingError):
    """No pending request has that code, or no approved sender that name (NOT_FOUND)."""

    kind = errors.ErrorKind.NOT_FOUND
