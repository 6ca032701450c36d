"""Errors of the scheduler; a refusal is a kind of :mod:`switchboard.errors`, whose kind alone
sets the gRPC status a caller gets (:mod:`switchboard.errors_map`)."""

from __future__ import annotations

from switchboard import errors
from switchboard.errors import SwitchboardError


class SchedulerError(SwitchboardError):
    """Base class of the scheduler's errors."""


class InvalidJob(SchedulerError, errors.InvalidArgument):
    """The job cannot be scheduled as given (INVALID_ARGUMENT); the message says why."""


class JobNotFound(SchedulerError, errors.NotFound):
    """No job has that name (NOT_FOUND)."""


class JobExists(SchedulerError, errors.AlreadyExists):
    """A job of that name exists already (ALREADY_EXISTS)."""


class ActionFailed(SchedulerError):
    """A fired job's action failed (a webhook's error, an unreadable watched file); recorded
    as the job's last error. The message is for the job's owner: no secrets, no internals."""


class BusUnavailable(SchedulerError, errors.Unavailable):
    """A fired job's event could not be published on NATS; the run stays due."""
