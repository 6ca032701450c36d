"""How a sandboxed child is started and stopped, apart from the child itself
(:mod:`.child`): the spawn options, the parent-death signal every child gets, the group kill,
and the error for a program that cannot be executed."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from switchboard_tools.errors import ToolError

_PR_SET_PDEATHSIG = 1


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(frozen=True)
class SpawnOptions:
    """How to start the child: ``preexec`` runs between fork and exec (after the uid change;
    without one and without ``user``, Python starts the child with ``vfork``, not a ``fork``
    of this whole process); ``pass_fds`` stay open in the child; ``user``/``group`` drop to
    that uid/gid (root only). ``sets_parent_death_signal``: the parent-death signal is set
    already, by the program started (the compiled wrapper's first stage) or by ``preexec``
    (:func:`~.process.outer_preexec`), see :func:`dying_with_parent`."""

    preexec: Callable[[], None] | None = None
    pass_fds: Sequence[int] = ()
    user: int | None = None
    group: int | None = None
    sets_parent_death_signal: bool = False


def dying_with_parent(options: SpawnOptions) -> SpawnOptions:
    """``options`` for a child killed if the executor dies: unchanged when the program (or
    ``preexec``) sets the parent-death signal itself, else with it set after ``preexec``."""
    if options.sets_parent_death_signal:
        return options
    return replace(options, preexec=with_parent_death_signal(options.preexec))


def with_parent_death_signal(preexec: Callable[[], None] | None) -> Callable[[], None]:
    """``preexec``, then ``PR_SET_PDEATHSIG(SIGKILL)``: the child is killed if the executor
    dies without cleaning up (set last, as a uid change would clear it); bubblewrap's
    ``--die-with-parent`` then takes the whole sandbox down with it. A parent already gone by
    then (the child was reparented) means nothing starts."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded before the fork
    parent = os.getpid()

    def run() -> None:
        if preexec is not None:
            preexec()
        if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            raise OSError(errno.ESRCH, "the executor is gone")

    return run


class LaunchFailed(ToolError):
    """The program itself could not be executed (not found / not executable)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
