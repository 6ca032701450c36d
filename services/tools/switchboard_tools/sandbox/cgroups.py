"""Per-call cgroups: a memory and a process-count limit on everything one sandboxed call starts.

Where cgroups are writable (the executor is root, or was delegated a subtree), every call gets
its own cgroup under a parent -- by default the executor's own cgroup -- with ``memory.max`` /
``memory.limit_in_bytes`` (swap included where it can be) and ``pids.max`` set. The command is
moved into it between fork and exec, before the uid drop, so everything it starts is in it (a
process cannot leave: the sandbox uid cannot write the cgroup files, and inside bubblewrap the
cgroup namespace's root is that cgroup). After the call whatever is left in it is killed and it
is removed. Both cgroup v2 (memory and pids in one hierarchy) and v1 (one hierarchy per
controller) are handled; which one is found in ``/proc/self/mountinfo``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from switchboard_tools.sandbox.cgroup_hierarchy import (
    CgroupUnavailable,
    Hierarchy,
    counter,
    find_hierarchies,
    procs_of,
    write,
)
from switchboard_tools.sandbox.orphans import reap_orphans

__all__ = ["CallCgroup", "CgroupLimits", "CgroupUnavailable", "Cgroups", "Hierarchy", "discard"]

_PREFIX = "sb-call-"
_RETRY_DELAYS_S = (0.2, 1.0, 3.0, 10.0, 30.0)
# Names of the cgroups this process made and has not removed yet (several sandboxes may live
# in one process: each must leave the others' cgroups alone).
_NUMBERS = itertools.count(1)
_LIVE: set[str] = set()
# Cgroups whose removal failed (their last processes were not reaped yet): retried later, and
# before every new cgroup is made.
_PENDING: list[CallCgroup] = []


@dataclass(frozen=True)
class CgroupLimits:
    """``None``: no limit of that kind (the cgroup still collects the call's processes)."""

    memory_max: int | None = 512 * 1024 * 1024
    pids_max: int | None = 128

    def describe(self) -> dict[str, int | None]:
        return {"memory_max": self.memory_max, "pids_max": self.pids_max}


class Cgroups:
    """Where this executor makes its per-call cgroups (see :meth:`find`) and with what limits."""

    def __init__(self, version: int, hierarchies: list[Hierarchy], limits: CgroupLimits) -> None:
        self.version = version
        self.hierarchies = hierarchies
        self.limits = limits

    @classmethod
    def find(cls, limits: CgroupLimits, parent: str = "") -> Cgroups:
        """The memory and pids hierarchies and, in each, the parent: ``parent`` (a cgroup path
        as ``/proc/self/cgroup`` shows them, created if missing) or the executor's own cgroup.
        Raises :class:`CgroupUnavailable` when per-call cgroups cannot be made there."""
        try:
            version, hierarchies = find_hierarchies(parent)
            found = cls(version, hierarchies, limits)
            found.clean_stale()
            probe = found.create()
            probe.close_fds()
            if not probe.remove():
                raise CgroupUnavailable(f"cannot remove the test cgroup {probe.dirs[0]}")
        except OSError as exc:
            raise CgroupUnavailable(f"cgroups are not writable here ({exc})") from exc
        return found

    def describe(self) -> dict[str, object]:
        return {
            "version": self.version,
            "parents": [str(h.parent) for h in self.hierarchies],
            **self.limits.describe(),
        }

    def clean_stale(self) -> None:
        """Remove per-call cgroups left by an executor that died (or by an earlier process
        with this pid: those this process did not make), killing what is still in them."""
        for hierarchy in self.hierarchies:
            with contextlib.suppress(OSError):
                for entry in hierarchy.parent.iterdir():
                    if not entry.name.startswith(_PREFIX):
                        continue
                    owner = entry.name[len(_PREFIX) :].split("-", 1)[0]
                    mine = owner == str(os.getpid())
                    if owner.isdigit() and (
                        (mine and entry.name not in _LIVE) or not os.path.exists(f"/proc/{owner}")
                    ):
                        CallCgroup(self, [entry], {}).remove()

    def create(self) -> CallCgroup:
        """A new cgroup with the limits set, ready for :meth:`CallCgroup.enter`."""
        _PENDING[:] = [pending for pending in _PENDING if not pending.remove()]
        call = CallCgroup(self, [], {})
        first = self.hierarchies[0].parent
        try:
            while True:
                name = f"{_PREFIX}{os.getpid()}-{next(_NUMBERS)}"
                try:
                    (first / name).mkdir(mode=0o755)
                    break
                except FileExistsError:
                    continue
            _LIVE.add(name)
            call.dirs.append(first / name)
            for hierarchy in self.hierarchies:
                directory = hierarchy.parent / name
                if directory not in call.dirs:
                    directory.mkdir(mode=0o755)
                    call.dirs.append(directory)
                self._limit(directory, hierarchy.keys)
                for key in hierarchy.keys:
                    call.view[key] = f"{hierarchy.view.rstrip('/')}/{name}"
            call.fds = [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in call.dirs]
        except BaseException:
            call.remove()
            raise
        return call

    def _limit(self, directory: Path, keys: frozenset[str]) -> None:
        memory, pids = self.limits.memory_max, self.limits.pids_max
        if self.version == 2:
            write(directory / "memory.max", str(memory) if memory is not None else "max")
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if (directory / name).exists():
                    write(directory / name, value)
            write(directory / "pids.max", str(pids) if pids is not None else "max")
            return
        if "memory" in keys and memory is not None:
            write(directory / "memory.limit_in_bytes", str(memory))
            if (directory / "memory.memsw.limit_in_bytes").exists():
                write(directory / "memory.memsw.limit_in_bytes", str(memory))
        if "pids" in keys:
            write(directory / "pids.max", str(pids) if pids is not None else "max")


class CallCgroup:
    """One call's cgroup (a directory per hierarchy). ``view``: what the call's
    ``/proc/self/cgroup`` must show once it is in it."""

    def __init__(self, owner: Cgroups, dirs: list[Path], view: dict[str, str]) -> None:
        self.owner = owner
        self.dirs = dirs
        self.view = view
        self.fds: list[int] = []

    def enter(self) -> None:
        """Move the calling process into this cgroup: in the child between fork and exec,
        before the uid drop (plain writes on descriptors opened by the executor)."""
        for fd in self.fds:
            os.write(fd, b"0")

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    def events(self) -> dict[str, int]:
        """How often the limits acted: processes OOM-killed, forks refused at ``pids.max``."""
        oom = pids = 0
        for directory in self.dirs:
            if self.owner.version == 2:
                oom += counter(directory / "memory.events", "oom_kill")
            else:
                oom += counter(directory / "memory.oom_control", "oom_kill")
            pids += counter(directory / "pids.events", "max")
        return {"oom_kill": oom, "pids_max": pids}

    def kill(self) -> None:
        """Kill everything still in the cgroup (even a process that left the call's group)."""
        for directory in self.dirs:
            if (directory / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    write(directory / "cgroup.kill", "1")
                continue
            for pid in procs_of(directory):
                with contextlib.suppress(OSError):
                    pidfd = os.pidfd_open(pid)
                    try:  # the pidfd pins the process: check it is (still) this cgroup's
                        if pid in procs_of(directory):
                            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    finally:
                        os.close(pidfd)

    def remove(self) -> bool:
        """Kill what is left and remove the cgroup; ``False`` while something still holds it
        (call again later: see :func:`discard`)."""
        self.close_fds()
        self.kill()
        if self._rmdir():
            return True
        # Zombies reparented to the executor hold the cgroup until reaped. Most often the end
        # of the call reaped them already, so /proc (every process of the host) is scanned for
        # them only when the first removal fails.
        reap_orphans()
        return self._rmdir()

    def _rmdir(self) -> bool:
        removed = True
        for directory in self.dirs:
            try:
                directory.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                removed = False
        if removed and self.dirs:
            _LIVE.discard(self.dirs[0].name)
        return removed


def discard(call: CallCgroup) -> None:
    """Remove ``call``'s cgroup now or, while its last processes are being reaped, a little
    later (from the running event loop, and before the next cgroup is made)."""
    if call.remove():
        return
    _PENDING.append(call)
    loop = asyncio.get_running_loop()

    def retry(remaining: tuple[float, ...]) -> None:
        if call not in _PENDING:
            return
        if call.remove():
            _PENDING.remove(call)
        elif remaining:
            loop.call_later(remaining[0], retry, remaining[1:])

    loop.call_later(_RETRY_DELAYS_S[0], retry, _RETRY_DELAYS_S[1:])


@atexit.register
def _remove_pending() -> None:
    """Last chance for cgroups still waiting for their removal (the rest is removed by the
    next executor with the same parent, see :meth:`Cgroups.clean_stale`)."""
    _PENDING[:] = [pending for pending in _PENDING if not pending.remove()]
