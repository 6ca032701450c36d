"""Spawning one sandboxed child and collecting its output: the mechanics every sandbox shares.

The child leads its own session / process group, gets only the environment it is given, stdin
from ``/dev/null`` and stdout+stderr merged into a pipe we own. The whole group is killed when
the command ends, times out or the caller is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_READ_CHUNK = 64 * 1024
_PR_SET_CHILD_SUBREAPER = 36
# Children this module started and still waits for (asyncio's watcher reaps those).
_ACTIVE: set[int] = set()


def become_subreaper() -> bool:
    """Make this process the reaper of orphans its sandboxes leave (bubblewrap's pid-1 helper,
    processes of a killed group), so they are reaped by :func:`reap_orphans` instead of piling
    up as zombies that count against the sandbox uid's process limit."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans() -> int:
    """Reap zombie children that are not ours to await (orphans reparented to us)."""
    me = os.getpid()
    reaped = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit() or int(entry) in _ACTIVE:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z" and int(fields[1]) == me:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), os.WNOHANG)
                reaped += 1
    return reaped


@dataclass(frozen=True)
class ProcessResult:
    """The outcome of one command.

    ``exit_code`` is ``None`` when the command was killed because it timed out; a negative
    value ``-N`` means it was killed by signal ``N``. ``output`` is stdout and stderr merged,
    decoded as UTF-8 (invalid bytes replaced), at most ``output_cap`` bytes before decoding.
    ``isolation`` is the attestation measured for this very call, when the sandbox measures.
    """

    exit_code: int | None
    output: str
    truncated: bool
    timed_out: bool
    duration_ms: float
    isolation: dict[str, Any] | None = field(default=None, compare=False)


class Output:
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

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(frozen=True)
class SpawnOptions:
    """How to start the child: ``preexec`` runs between fork and exec (after the uid change);
    ``pass_fds`` stay open in the child; ``user``/``group`` drop to that uid/gid (root only)."""

    preexec: Callable[[], None] | None = None
    pass_fds: Sequence[int] = ()
    user: int | None = None
    group: int | None = None


async def spawn_and_collect(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    output_cap: int,
    options: SpawnOptions,
    exit_grace_s: float,
    drain_limit_bytes: int,
) -> ProcessResult:
    """Run ``argv`` and collect its output. ``exit_grace_s``: once the command exits, how long
    leftover processes holding its output open may keep it open before the group is killed.
    Output past the cap is read and discarded up to ``drain_limit_bytes``, then the group is
    killed (so ``yes`` cannot burn CPU for the whole timeout)."""
    if not argv:
        raise ValueError("empty argv")
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    deadline = started + max(0.0, timeout_s)

    def elapsed_ms() -> float:
        return (time.monotonic() - started) * 1000.0

    # Our own pipe rather than stdout=PIPE: asyncio's Process.wait() would otherwise wait
    # for the pipe to close, which a leftover grandchild can delay forever.
    read_fd, write_fd = os.pipe()
    extra: dict[str, Any] = {}
    if options.user is not None:
        extra.update(user=options.user, group=options.group, extra_groups=[])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(options.pass_fds),
            preexec_fn=options.preexec,
            **extra,
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
    _ACTIVE.add(pgid)
    output = Output(output_cap)
    stream = asyncio.StreamReader()
    transport: asyncio.BaseTransport | None = None
    pump: asyncio.Task[None] | None = None
    waiter: asyncio.Task[int] = asyncio.create_task(proc.wait())
    timed_out = False
    try:
        pipe = os.fdopen(read_fd, "rb", buffering=0)
    except BaseException:
        os.close(read_fd)
        kill_group(pgid)
        raise
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), pipe
        )

        async def read_all() -> None:
            while chunk := await stream.read(_READ_CHUNK):
                output.feed(chunk)
                if output.total > max(drain_limit_bytes, output.cap):
                    kill_group(pgid)
                    return

        pump = asyncio.create_task(read_all())
        done, _ = await asyncio.wait({waiter}, timeout=max(0.0, deadline - time.monotonic()))
        if waiter in done:
            # Exited: let the pipe drain; leftovers still holding it get killed below.
            grace = min(exit_grace_s, max(0.0, deadline - time.monotonic()))
            await asyncio.wait({pump}, timeout=grace)
        else:
            timed_out = True
    finally:
        kill_group(pgid)
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
            else:
                _ACTIVE.discard(pgid)
            # Killed leftovers become zombies a moment later.
            reap_orphans()
            for delay in (0.2, 1.0, 3.0):
                loop.call_later(delay, reap_orphans)

    finished = waiter.done() and not waiter.cancelled()
    exit_code = waiter.result() if finished and not timed_out else None
    return ProcessResult(
        exit_code=exit_code,
        output=output.text(),
        truncated=output.truncated,
        timed_out=timed_out,
        duration_ms=elapsed_ms(),
    )


def read_report(fd: int) -> dict[str, Any] | None:
    """The sandbox wrapper's JSON report (written before exec; the pipe is closed by now or
    holds everything it will ever hold)."""
    try:
        os.set_blocking(fd, False)
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 65536):
                data += chunk
    finally:
        os.close(fd)
    try:
        report = json.loads(data)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None
