"""Errors of guarded fetches. Their messages are written for whoever asked for the URL (a model,
an API caller): they name the URL's host and the reason, never secrets or local details."""

from __future__ import annotations

from switchboard.errors import SwitchboardError


class FetchError(SwitchboardError):
    """A fetch failed (no such host, no connection, a bad response); the message says why."""


class Refused(FetchError):
    """The guard or a cap refused the fetch; the message starts with ``refused:``."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"refused: {reason}")
        self.reason = reason


class TooLarge(Refused):
    """The body is larger than the caller's cap."""
