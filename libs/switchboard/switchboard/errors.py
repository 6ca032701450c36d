"""Errors shared by every Switchboard package."""

from __future__ import annotations


class SwitchboardError(Exception):
    """Base class of Switchboard errors."""


class ConfigError(SwitchboardError):
    """The configuration is invalid; the message says what to change."""


class DependencyUnavailable(SwitchboardError):
    """A dependency (NATS, PostgreSQL, another service) did not answer in time."""


class InvalidSessionKey(SwitchboardError, ValueError):
    """A session key is empty, too long or holds characters it may not."""
