"""The reaping of the orphans sandboxed calls leave behind: this process is their subreaper
(bubblewrap's pid-1 helper, processes of a killed group are reparented to it), so they are
reaped here instead of piling up as zombies that count against the sandbox uid's process limit.

Only this process's own descendants are read, from ``/proc/<pid>/task/<tid>/children``, never
every process of the host: a scan of all of ``/proc`` cost 2.4-3 ms of CPU with ~280 processes
(more on a busier host) and, run at the end of every call and while its orphans die, it was most
of the executor's own CPU per sandboxed ``exec`` (docs/footprint.md, "Sandboxed exec"). The
kernel's child lists can miss a child that is created or reaped while they are read; a reap
runs again after every call and at fixed delays, so a zombie missed once is reaped by a later
one."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import time

_PR_SET_CHILD_SUBREAPER = 36
# Children this process started and still waits for (asyncio's watcher reaps those); a pid
# leaves once reaped (pids wrap: a stale one would hide a later zombie given the same pid).
ACTIVE: set[int] = set()
# How often orphans still dying are looked at again, and for how long at most.
_SETTLE_POLL_S = 0.5
_SETTLE_MAX_S = 120.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# A bound on the descendants read per scan (the sandbox's pids limits keep them far fewer).
_MAX_DESCENDANTS = 4096


class _Launches:
    """Launches in flight: their child exists before its pid is known, so no reaping meanwhile
    (a quick command could be a zombie already, and reaping it would steal asyncio's status)."""

    count = 0


LAUNCHING = _Launches()


def become_subreaper() -> bool:
    """Make this process the reaper of orphans its sandboxes leave, reaped by
    :func:`reap_orphans`."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/<pid>/stat gives a process's start in."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLOCK_TICKS)


def children_of(pid: int) -> list[int]:
    """The children of process ``pid`` (of each of its threads: an orphan is reparented to one
    of them); ``[]`` once it is gone."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += map(int, f.read().split())
        except OSError:
            continue  # the thread ended meanwhile
    return found


def _scan() -> dict[int, tuple[bytes, int, int]]:
    """This process's descendants: pid -> (state, parent pid, start in boot ticks)."""
    procs: dict[int, tuple[bytes, int, int]] = {}
    parents = [os.getpid()]
    while parents and len(procs) < _MAX_DESCENDANTS:
        parent = parents.pop()
        for pid in children_of(parent):
            if pid in procs:
                continue
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue  # reaped meanwhile
            procs[pid] = (fields[0], int(fields[1]), int(fields[19]))
            parents.append(pid)
    return procs


def reap_orphans() -> int:
    """Reap zombie children that are not ours to await (orphans reparented to us): a child
    nobody awaits is waited for without blocking, which reaps it only if it has exited."""
    if LAUNCHING.count:
        return 0  # a later call (they are scheduled after every finish) catches up
    reaped = 0
    for pid in children_of(os.getpid()):
        if pid not in ACTIVE:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped += 1
    return reaped


def _reap(procs: dict[int, tuple[bytes, int, int]]) -> int:
    if LAUNCHING.count:
        return 0  # as in reap_orphans
    me = os.getpid()
    reaped = 0
    for pid, (state, ppid, _) in procs.items():
        if state == b"Z" and ppid == me and pid not in ACTIVE:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
                reaped += 1
    return reaped


def _dying(procs: dict[int, tuple[bytes, int, int]], since: int, own: int) -> bool:
    """Is a process started at or after ``since`` still below this one, outside the children
    someone awaits? Such a process (say bubblewrap's pid-1 helper, tearing down its namespace
    after a kill) becomes a zombie of ours later: on a loaded host, many seconds later. A
    zombie counts too (one more look confirms it was reaped). ``own``: the call's own child,
    whose processes count even while it is awaited."""
    me = os.getpid()
    for pid, (_, ppid, start) in procs.items():
        if start < since or (pid in ACTIVE and pid != own):
            continue
        seen = 0
        while ppid not in (me, 0, 1) and (ppid == own or ppid not in ACTIVE) and seen < 64:
            ppid = procs[ppid][1] if ppid in procs else 0
            seen += 1
        if ppid == me:
            return True
    return False


def reap_until_settled(since: int, own: int, until: float | None = None) -> None:
    """Reap orphans now and again every :data:`_SETTLE_POLL_S` while processes started since
    ``since`` (a finished call's, whose child is ``own``) are still dying below us, for at
    most :data:`_SETTLE_MAX_S`."""
    procs = _scan()
    _reap(procs)
    loop = asyncio.get_running_loop()
    until = loop.time() + _SETTLE_MAX_S if until is None else until
    if loop.time() < until and (LAUNCHING.count or _dying(procs, since, own)):
        loop.call_later(_SETTLE_POLL_S, reap_until_settled, since, own, until)
