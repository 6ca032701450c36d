"""What the embedded servers share (switchboard.embedded for NATS, switchboard.embedded_pg for
PostgreSQL): their error, the tail of a server's log for that error, and waiting for processes
to be gone. A module of its own so both import it without importing each other."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import psutil

__all__ = ["ServerError", "log_tail", "wait_gone"]


class ServerError(RuntimeError):
    """A server did not start or stop; the message says why and where its log is."""


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a server's log, for an error message (its reason is usually there)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def wait_gone(procs: Sequence[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited; the ones still running after ``timeout``.

    A zombie counts as exited: orphans (such as the postmaster, whose parent pg_ctl is gone) are
    reaped by pid 1, which in some containers takes a second or more.
    """
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in procs if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
