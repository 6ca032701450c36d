"""A sandboxed call's child started by :class:`subprocess.Popen` and awaited through a pidfd.

Why not ``asyncio.create_subprocess_exec``: the services run on uvloop (``switchboard.loops``),
whose subprocesses libuv starts with ``fork()`` -- the whole executor's page tables copied for
every call, ``preexec_fn`` or not -- where ``subprocess.Popen`` without a ``preexec_fn`` uses
``vfork()``; and asyncio's own loop waits for every child in a thread of its own. Here the exit
is one more reader on whichever loop runs (a pidfd becomes readable once its process exited):
no fork of the executor, no thread (docs/footprint.md, "Sandboxed exec")."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


@functools.cache
def available() -> bool:
    """Linux 5.3 or later (and a Python that has ``os.pidfd_open``); asked once, at the first
    call's start."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


class PidfdProcess:
    """What :class:`~.child.Child` needs of its process (``pid``, ``returncode``,
    :meth:`wait`), as :class:`asyncio.subprocess.Process` has them: ``returncode`` ``-N`` when
    killed by signal N."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        loop = asyncio.get_running_loop()
        self._exit: asyncio.Future[int] = loop.create_future()
        self._pidfd = os.pidfd_open(popen.pid)
        try:
            loop.add_reader(self._pidfd, self._exited, loop)
        except BaseException:
            os.close(self._pidfd)
            raise

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def _exited(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        # It has exited: this reaps it without blocking.
        code = self._popen.wait()
        if not self._exit.done():
            self._exit.set_result(code)

    async def wait(self) -> int:
        """Its exit code once it has exited (and was reaped here). A cancelled waiter leaves
        the others waiting."""
        return await asyncio.shield(self._exit)


def start(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout: int,
    pass_fds: Sequence[int],
    extra: Mapping[str, Any],
) -> PidfdProcess:
    """Start ``argv`` in its own session, stdin from ``/dev/null``, stdout and stderr into
    ``stdout``; ``extra``: ``preexec_fn`` and ``user``/``group`` when there are (which make
    Python fork instead of vfork). Raises what :class:`subprocess.Popen` raises."""
    popen = subprocess.Popen(
        list(argv),
        cwd=str(cwd),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stdout,
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
        **extra,
    )
    try:
        return PidfdProcess(popen)
    except BaseException:
        # Not watched: it must not run unsupervised (it leads its own process group).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        raise
