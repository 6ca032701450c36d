"""Running commands for tools.

Tools only see the :class:`Sandbox` protocol, so a stronger implementation (bubblewrap
namespaces, seccomp, landlock, per-uid limits) can replace :class:`ProcessSandbox` without
touching them. Every implementation must report honestly, via :meth:`Sandbox.attestation`, which
isolation layers are actually in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import math
import os
import resource
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"

_MiB = 1024 * 1024
_READ_CHUNK = 64 * 1024
_PR_SET_NO_NEW_PRIVS = 38


@dataclass(frozen=True)
class ProcessResult:
    """The outcome of one command.

    ``exit_code`` is ``None`` when the command was killed because it timed out; a negative
    value ``-N`` means it was killed by signal ``N``. ``output`` is stdout and stderr merged,
    decoded as UTF-8 (invalid bytes replaced), at most ``output_cap`` bytes before decoding.
    """

    exit_code: int | None
    output: str
    truncated: bool
    timed_out: bool
    duration_ms: float


@runtime_checkable
class Sandbox(Protocol):
    """Runs a command in isolation. Implementations must never give the child the executor's
    own environment (it holds secrets) and must kill everything the command started once it
    finishes or times out."""

    async def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
    ) -> ProcessResult:
        """Run ``argv`` (no shell) in ``cwd``. ``env`` adds variables to the minimal
        environment. Output beyond ``output_cap`` bytes is dropped and reported as truncated."""
        ...

    def attestation(self) -> dict[str, Any]:
        """The isolation layers actually in force (JSON-serialisable), for ``/readyz`` and for
        the ``isolation_json`` of tool results."""
        ...


def minimal_env(cwd: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a sandboxed command gets: never inherited from the executor."""
    env = {"PATH": SANDBOX_PATH, "HOME": str(cwd), "LANG": "C.UTF-8"}
    if extra:
        env.update(extra)
    return env


def _set_limit(which: int, soft: int, hard: int | None = None) -> None:
    """Lower a resource limit (never above the current hard limit, which we could not raise)."""
    _, cur_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if cur_hard != resource.RLIM_INFINITY:
        soft = min(soft, cur_hard)
        hard = min(hard, cur_hard)
    resource.setrlimit(which, (soft, hard))


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


class _Output:
    """Keeps the first ``cap`` bytes, counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.data = bytearray()
        self.total = 0

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


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
        self._prctl = _load_prctl() if no_new_privs else None

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
        _set_limit(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
        _set_limit(resource.RLIMIT_FSIZE, self.fsize_bytes)
        _set_limit(resource.RLIMIT_NOFILE, self.nofile)
        _set_limit(resource.RLIMIT_CORE, 0)
        if self.address_space_bytes is not None:
            _set_limit(resource.RLIMIT_AS, self.address_space_bytes)
        if self._prctl is not None and self._prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")

    async def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
    ) -> ProcessResult:
        if not argv:
            raise ValueError("empty argv")
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        deadline = started + max(0.0, timeout_s)
        cpu_seconds = max(1, math.ceil(timeout_s) + 1)

        def elapsed_ms() -> float:
            return (time.monotonic() - started) * 1000.0

        # Our own pipe rather than stdout=PIPE: asyncio's Process.wait() would otherwise wait
        # for the pipe to close, which a leftover grandchild can delay forever.
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=str(cwd),
                env=minimal_env(cwd, env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                close_fds=True,
                preexec_fn=lambda: self._preexec(cpu_seconds),
            )
        except OSError as exc:
            os.close(read_fd)
            if exc.filename == str(cwd) or exc.errno not in (errno.ENOENT, errno.EACCES):
                raise  # a bad cwd or something unexpected: not the command's fault
            if exc.errno == errno.ENOENT:
                message, code = "command not found", 127
            else:
                message, code = "permission denied", 126
            return ProcessResult(code, f"{argv[0]}: {message}\n", False, False, elapsed_ms())
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)

        pgid = proc.pid  # start_new_session: the child leads its own process group
        output = _Output(output_cap)
        stream = asyncio.StreamReader()
        transport: asyncio.BaseTransport | None = None
        pump: asyncio.Task[None] | None = None
        waiter: asyncio.Task[int] = asyncio.create_task(proc.wait())
        timed_out = False
        try:
            pipe = os.fdopen(read_fd, "rb", buffering=0)
        except BaseException:
            os.close(read_fd)
            _kill_group(pgid)
            raise
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stream), pipe
            )

            async def read_all() -> None:
                while chunk := await stream.read(_READ_CHUNK):
                    output.feed(chunk)
                    if output.total > max(self.drain_limit_bytes, output.cap):
                        _kill_group(pgid)
                        return

            pump = asyncio.create_task(read_all())
            done, _ = await asyncio.wait({waiter}, timeout=max(0.0, deadline - time.monotonic()))
            if waiter in done:
                # Exited: let the pipe drain; leftovers still holding it get killed below.
                grace = min(self.exit_grace_s, max(0.0, deadline - time.monotonic()))
                await asyncio.wait({pump}, timeout=grace)
            else:
                timed_out = True
        finally:
            _kill_group(pgid)
            try:
                await asyncio.wait({waiter}, timeout=5.0)
                if pump is not None:
                    # Everything in the group is dead; a process that left the group could
                    # still hold the pipe, so do not wait long for EOF.
                    await asyncio.wait({pump}, timeout=0.5)
            finally:
                if pump is not None:
                    pump.cancel()
                if transport is not None:
                    transport.close()
                else:
                    pipe.close()
                if not waiter.done():
                    waiter.cancel()

        finished = waiter.done() and not waiter.cancelled()
        exit_code = waiter.result() if finished and not timed_out else None
        return ProcessResult(
            exit_code=exit_code,
            output=bytes(output.data).decode("utf-8", errors="replace"),
            truncated=output.truncated,
            timed_out=timed_out,
            duration_ms=elapsed_ms(),
        )
