"""The plain process sandbox (:class:`ProcessSandbox`) and the outer-layer helpers every
sandbox uses: the minimal environment, rlimits and ``no_new_privs``."""

from __future__ import annotations

import ctypes
import errno
import math
import os
import resource
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from switchboard_tools.output import OutputCallback
from switchboard_tools.sandbox.child import Child, SpawnOptions
from switchboard_tools.sandbox.runner import ProcessResult, spawn_and_collect, spawn_background

__all__ = [
    "SANDBOX_PATH",
    "OuterLimits",
    "ProcessSandbox",
    "drop_privileges",
    "load_prctl",
    "lower_limit",
    "minimal_env",
    "outer_preexec",
    "set_no_new_privs",
    "set_parent_death_signal",
]

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"

_MiB = 1024 * 1024
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1


def minimal_env(cwd: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a sandboxed command gets: never inherited from the executor."""
    env = {"PATH": SANDBOX_PATH, "HOME": str(cwd), "LANG": "C.UTF-8"}
    if extra:
        env.update(extra)
    return env


def lower_limit(which: int, soft: int, hard: int | None = None) -> None:
    """Lower a resource limit (never above the current hard limit, which we could not raise)."""
    _, cur_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if cur_hard != resource.RLIM_INFINITY:
        soft = min(soft, cur_hard)
        hard = min(hard, cur_hard)
    resource.setrlimit(which, (soft, hard))


def set_no_new_privs(prctl: Any) -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS)``, between fork and exec (``prctl`` loaded before)."""
    if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def set_parent_death_signal(prctl: Any, parent_pid: int) -> None:
    """``PR_SET_PDEATHSIG(SIGKILL)`` between fork and exec (``prctl`` loaded before); a parent
    other than ``parent_pid`` means it died before the signal was set: nothing may start then
    (the compiled wrapper's first stage checks the same)."""
    if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        raise OSError(errno.ESRCH, "the executor is gone")


def drop_privileges(uid: int) -> None:
    """Become ``uid`` (and gid ``uid``, no supplementary groups) for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


class _Enterable(Protocol):
    def enter(self) -> None: ...


@dataclass(frozen=True)
class OuterLimits:
    """The limits and uid a sandboxed call gets before its first program runs: set by
    :func:`outer_preexec` (Python wrapper) or by the compiled wrapper's first stage, from the
    same :meth:`rlimits`."""

    fsize_bytes: int
    nofile: int
    address_space_bytes: int | None
    uid: int | None  # None: keep the executor's

    def rlimits(self, cpu_seconds: int) -> list[tuple[str, int, int]]:
        """``(name, resource, value)`` in the order they are lowered."""
        limits = [
            ("cpu", resource.RLIMIT_CPU, cpu_seconds),
            ("fsize", resource.RLIMIT_FSIZE, self.fsize_bytes),
            ("nofile", resource.RLIMIT_NOFILE, self.nofile),
            ("core", resource.RLIMIT_CORE, 0),
        ]
        if self.address_space_bytes is not None:
            limits.append(("as", resource.RLIMIT_AS, self.address_space_bytes))
        return limits


def outer_preexec(
    cpu_seconds: int,
    *,
    cgroup: _Enterable | None,
    limits: OuterLimits,
    prctl: Any,
    parent_pid: int | None = None,
) -> None:
    """The outer layers a child sets on itself between fork and exec (plain system calls
    only): its cgroup (entered while still root: the sandbox uid may not write cgroup files),
    rlimits, the uid drop, ``no_new_privs``, then -- with ``parent_pid``, the executor's pid --
    the parent-death signal (last: a change of credentials clears it)."""
    if cgroup is not None:
        cgroup.enter()
    for _, which, value in limits.rlimits(cpu_seconds):
        lower_limit(which, value)
    if limits.uid is not None:
        drop_privileges(limits.uid)
    set_no_new_privs(prctl)
    if parent_pid is not None:
        set_parent_death_signal(prctl, parent_pid)


def load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


class ProcessSandbox:
    """Baseline isolation: a plain child process in its own session / process group.

    In force: minimal environment, stdin from ``/dev/null``, own process group killed as a
    whole on timeout and after the command ends, rlimits (CPU time, file size, open files, no
    core dumps, optionally address space), ``no_new_privs`` on Linux, output cap and timeout.
    Not in force: namespaces, seccomp, landlock, network isolation, filesystem confinement (the
    command can open whatever the executor's uid can; the working directory is in the workspace
    and tools check path arguments, but that is not a sandbox boundary).
    """

    def __init__(
        self,
        *,
        fsize_bytes: int = 64 * _MiB,
        nofile: int = 256,
        address_space_bytes: int | None = None,
        no_new_privs: bool = True,
        exit_grace_s: float = 0.5,
        drain_limit_bytes: int = 64 * _MiB,
    ) -> None:
        """``exit_grace_s``: once the command exits, how long leftover processes holding its
        output open may keep it open before the group is killed. ``drain_limit_bytes``: output
        past the cap is read and discarded up to this many bytes in total, then the group is
        killed (so ``yes`` cannot burn CPU for the whole timeout)."""
        self.fsize_bytes = fsize_bytes
        self.nofile = nofile
        self.address_space_bytes = address_space_bytes
        self.exit_grace_s = exit_grace_s
        self.drain_limit_bytes = drain_limit_bytes
        self._prctl = load_prctl() if no_new_privs else None

    def attestation(self) -> dict[str, Any]:
        rlimits = ["cpu", "fsize", "nofile", "core"]
        if self.address_space_bytes is not None:
            rlimits.append("as")
        return {
            "sandbox": "process",
            "process_group": True,
            "rlimits": rlimits,
            "no_new_privs": self._prctl is not None,
            "namespaces": False,
            "seccomp": False,
            "landlock": False,
            "network": True,
            "workspace_confined": False,
            "cwd_in_workspace": True,
            "minimal_env": True,
            "uid": os.getuid(),
        }

    def _preexec(self, cpu_seconds: int) -> None:
        # Runs in the child between fork and exec: keep it to plain system calls.
        lower_limit(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
        lower_limit(resource.RLIMIT_FSIZE, self.fsize_bytes)
        lower_limit(resource.RLIMIT_NOFILE, self.nofile)
        lower_limit(resource.RLIMIT_CORE, 0)
        if self.address_space_bytes is not None:
            lower_limit(resource.RLIMIT_AS, self.address_space_bytes)
        if self._prctl is not None:
            set_no_new_privs(self._prctl)

    async def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ProcessResult:
        cpu_seconds = max(1, math.ceil(timeout_s) + 1)
        return await spawn_and_collect(
            argv,
            cwd=cwd,
            env=minimal_env(cwd, env),
            timeout_s=timeout_s,
            output_cap=output_cap,
            options=SpawnOptions(preexec=lambda: self._preexec(cpu_seconds)),
            exit_grace_s=self.exit_grace_s,
            drain_limit_bytes=self.drain_limit_bytes,
            on_output=on_output,
        )

    async def spawn(
        self,
        argv: list[str],
        *,
        cwd: Path,
        lifetime_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
    ) -> Child:
        cpu_seconds = max(1, math.ceil(lifetime_s) + 1)
        return await spawn_background(
            argv,
            cwd=cwd,
            env=minimal_env(cwd, env),
            lifetime_s=lifetime_s,
            output_cap=output_cap,
            options=SpawnOptions(preexec=lambda: self._preexec(cpu_seconds)),
            exit_grace_s=self.exit_grace_s,
        )
