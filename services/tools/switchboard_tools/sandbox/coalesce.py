"""Delayed calls that merge: ``call_coalesced(delay, fn)`` runs ``fn`` between ``delay`` and
``delay * (1 + SLACK)`` seconds from now, and one run serves every request for ``fn`` on the same
event loop whose window it falls in. A new run is scheduled at the late end of its window, so the
requests that follow within ``SLACK * delay`` join it.

Why: every finished sandboxed call asks for orphan reaps at fixed delays (0.2 s to 10 s). Each
reap read ``/proc/<pid>/stat`` of every process on the host then (2.6 ms of CPU measured per
scan with 82 processes; it reads only this process's children now, see :mod:`.orphans`), and at
several calls per second those timers -- five per call -- were most of the executor's own CPU
per call, while one reap a little later serves all the calls that finished close together. A
run never happens earlier than asked, at most ``SLACK`` of the delay later, so an orphan is
still reaped within a bound proportional to the delay it was asked at.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

SLACK = 0.25
# Per event loop: callback -> the loop times its scheduled runs are due at. Weak: a loop that is
# gone (tests make one per test) takes its timers, which will never run, with it.
_DUE: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Callable[[], object], set[float]]]
_DUE = weakref.WeakKeyDictionary()


def call_coalesced(delay: float, fn: Callable[[], object]) -> bool:
    """Have ``fn`` run on the running loop between ``delay`` and ``delay * (1 + SLACK)``
    seconds from now: by a run already due then, else by a new one at the late end. Returns
    whether a new run was scheduled."""
    loop = asyncio.get_running_loop()
    due = _DUE.setdefault(loop, {}).setdefault(fn, set())
    earliest = loop.time() + delay
    latest = earliest + SLACK * delay
    if any(earliest <= when <= latest for when in due):
        return False
    due.add(latest)
    loop.call_at(latest, _run, due, latest, fn)
    return True


def _run(due: set[float], at: float, fn: Callable[[], object]) -> None:
    due.discard(at)
    fn()
