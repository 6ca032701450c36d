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


class InvalidAgentId(SwitchboardError, ValueError):
    """An agent id is not 1-64 characters of ``a-z 0-9 _ -``."""


class InvalidPayload(SwitchboardError, ValueError):
    """A message on the bus is not the protobuf message its subject carries."""


class InvalidSchedule(SwitchboardError, ValueError):
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
