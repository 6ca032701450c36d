"""One sandboxed child: launched in its own session / process group with stdout+stderr merged
into a pipe we own, its output pumped into a buffer, and the whole group killed when it ends,
times out, is killed, or the caller is cancelled. The reaping of the orphans the sandboxes leave
behind (this process is their subreaper) is in :mod:`.orphans`."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from switchboard_tools.output import Output, RingOutput
from switchboard_tools.sandbox import pidfd
from switchboard_tools.sandbox.coalesce import call_coalesced
from switchboard_tools.sandbox.orphans import ACTIVE as _ACTIVE
from switchboard_tools.sandbox.orphans import (
    LAUNCHING,
    boot_ticks,
    reap_orphans,
    reap_until_settled,
)
from switchboard_tools.sandbox.spawn import (
    LaunchFailed,
    SpawnOptions,
    dying_with_parent,
    kill_group,
    with_parent_death_signal,
)

__all__ = [
    "Child",
    "LaunchFailed",
    "SpawnOptions",
    "dying_with_parent",
    "forget_piped",
    "kill_group",
    "start_piped",
    "with_parent_death_signal",
]

_READ_CHUNK = 64 * 1024
_FORGETTING: set[asyncio.Task[None]] = set()  # see _forget_when_reaped
# When orphans are reaped again after a call finishes, whatever :func:`reap_until_settled`
# judges still to be dying.
_REAP_DELAYS_S = (0.2, 1.0, 3.0, 6.0, 10.0)


class _Process(Protocol):
    """A started child as :class:`Child` uses it (an asyncio one, or a :mod:`.pidfd` one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


async def _launch(
    argv: list[str], cwd: Path, env: Mapping[str, str], options: SpawnOptions
) -> tuple[_Process, int]:
    """Start ``argv`` writing stdout+stderr into a pipe; return the process and the read end.
    Started by :mod:`.pidfd` where pidfds work (no fork of this process, no thread per child),
    else by asyncio."""
    # Our own pipe rather than stdout=PIPE: asyncio's Process.wait() would otherwise wait
    # for the pipe to close, which a leftover grandchild can delay forever.
    read_fd, write_fd = os.pipe()
    extra: dict[str, Any] = {"preexec_fn": options.preexec}
    if options.user is not None:
        extra.update(user=options.user, group=options.group, extra_groups=[])
    LAUNCHING.count += 1
    proc: _Process
    try:
        if pidfd.available():
            proc = pidfd.start(
                argv, cwd=cwd, env=env, stdout=write_fd, pass_fds=options.pass_fds, extra=extra
            )
        else:
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
                **extra,
            )
    except OSError as exc:
        os.close(read_fd)
        if exc.filename == str(cwd) or exc.errno not in (errno.ENOENT, errno.EACCES):
            raise  # a bad cwd or something unexpected: not the command's fault
        if exc.errno == errno.ENOENT:
            raise LaunchFailed(f"{argv[0]}: command not found", 127) from exc
        raise LaunchFailed(f"{argv[0]}: permission denied", 126) from exc
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
        LAUNCHING.count -= 1
    _ACTIVE.add(proc.pid)  # before any await: from here on reap_orphans leaves it alone
    return proc, read_fd


async def start_piped(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], options: SpawnOptions
) -> asyncio.subprocess.Process:
    """Start ``argv`` with stdin, stdout and stderr as pipes, in its own session, killed if the
    executor dies (for servers that talk over their stdio, see
    :meth:`~switchboard_tools.sandbox.layered.LayeredSandbox.spawn_piped`). Lines up to
    16 MiB can be read from its stdout."""
    LAUNCHING.count += 1
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(options.pass_fds),
            preexec_fn=dying_with_parent(options).preexec,
            limit=16 * 1024 * 1024,
        )
    finally:
        LAUNCHING.count -= 1
    _ACTIVE.add(proc.pid)  # asyncio reaps it; reap_orphans must not
    return proc


def _forget_when_reaped(proc: _Process) -> None:
    """Take ``proc``'s pid out of :data:`_ACTIVE` once it has been reaped (by asyncio's
    watcher or :mod:`.pidfd`)."""

    async def wait() -> None:
        with contextlib.suppress(Exception):
            await proc.wait()
        _ACTIVE.discard(proc.pid)

    task = asyncio.create_task(wait())
    _FORGETTING.add(task)
    task.add_done_callback(_FORGETTING.discard)


def forget_piped(pid: int) -> None:
    """A process of :func:`start_piped` was reaped: orphan reaping may consider the pid again."""
    _ACTIVE.discard(pid)


class Child:
    """A started child: its process group (it leads it), the pump feeding its output into
    ``sink``, and its exit. ``activity`` is set whenever output arrives or it finishes."""

    def __init__(
        self,
        proc: _Process,
        sink: Output | RingOutput,
        started: float,
        born: int,
        on_chunk: Callable[[bytes], None] | None,
        drain_limit_bytes: int | None,
    ) -> None:
        self.pgid = proc.pid  # start_new_session: the child leads its own process group
        self._proc = proc
        _ACTIVE.add(self.pgid)
        self.born = born  # boot ticks just before the launch: its processes start after
        self.sink = sink
        self.started = started
        self.ended: float | None = None
        self.on_chunk = on_chunk
        self.drain_limit_bytes = drain_limit_bytes
        self.waiter: asyncio.Task[int] = asyncio.create_task(proc.wait())
        self.timed_out = False
        self.killed = False
        self.activity = asyncio.Event()
        self.finished = asyncio.Event()
        self.supervisor: asyncio.Task[None] | None = None
        self.isolation: dict[str, Any] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._pipe: Any = None
        self._finishing = False

    @classmethod
    async def start(
        cls,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        options: SpawnOptions,
        sink: Output | RingOutput,
        on_chunk: Callable[[bytes], None] | None = None,
        drain_limit_bytes: int | None = None,
    ) -> Child:
        """Launch and start reading. Raises :class:`LaunchFailed` when the program cannot be
        executed. ``drain_limit_bytes``: once this much output (and at least the sink's cap) was
        read, the group is killed (so ``yes`` cannot burn CPU for the whole timeout)."""
        if not argv:
            raise ValueError("empty argv")
        started, born = time.monotonic(), boot_ticks()
        proc, read_fd = await _launch(argv, cwd, env, options)
        child = cls(proc, sink, started, born, on_chunk, drain_limit_bytes)
        try:
            child._pipe = os.fdopen(read_fd, "rb", buffering=0)
        except BaseException:
            os.close(read_fd)
            await child.finish()
            raise
        try:
            stream = asyncio.StreamReader()
            child._transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stream), child._pipe
            )
            child._pump = asyncio.create_task(child._read(stream))
        except BaseException:
            await child.finish()
            raise
        return child

    async def _read(self, stream: asyncio.StreamReader) -> None:
        cap = self.sink.cap
        while chunk := await stream.read(_READ_CHUNK):
            kept = self.sink.feed(chunk)
            if kept and self.on_chunk is not None:
                self.on_chunk(kept)
            self.activity.set()
            limit = self.drain_limit_bytes
            if limit is not None and self.sink.total > max(limit, cap):
                kill_group(self.pgid)
                return

    @property
    def exit_code(self) -> int | None:
        """``None`` while running or when killed for its timeout; ``-N``: killed by signal N."""
        waiter = self.waiter
        if waiter.done() and not waiter.cancelled() and not self.timed_out:
            return waiter.result()
        return None

    def duration_ms(self) -> float:
        end = self.ended if self.ended is not None else time.monotonic()
        return (end - self.started) * 1000.0

    def kill(self) -> None:
        """Kill the whole group now (the supervisor then cleans up)."""
        if not self.finished.is_set():
            self.killed = self.killed or not self.waiter.done()  # else it had exited already
            kill_group(self.pgid)

    async def supervise(self, timeout_s: float, exit_grace_s: float) -> None:
        """Wait for the exit or ``timeout_s`` from the start, then kill the group and clean up.
        ``exit_grace_s``: once the command exits, how long leftover processes holding its
        output open may keep it open before the group is killed."""
        deadline = self.started + max(0.0, timeout_s)
        try:
            remaining = max(0.0, deadline - time.monotonic())
            done, _ = await asyncio.wait({self.waiter}, timeout=remaining)
            if self.waiter in done:
                # Exited: let the pipe drain; leftovers still holding it get killed below.
                if self._pump is not None:
                    grace = min(exit_grace_s, max(0.0, deadline - time.monotonic()))
                    await asyncio.wait({self._pump}, timeout=grace)
            else:
                self.timed_out = True
        finally:
            await self.finish()

    async def finish(self) -> None:
        """Kill the group, reap, release the pipe (idempotent; a second caller waits for the
        first, whose waits are bounded)."""
        if self._finishing:
            await self.finished.wait()
            return
        self._finishing = True
        kill_group(self.pgid)
        try:
            await asyncio.wait({self.waiter}, timeout=5.0)
            if self._pump is not None:
                # Everything in the group is dead; a process that left the group could
                # still hold the pipe, so do not wait long for EOF.
                await asyncio.wait({self._pump}, timeout=0.5)
        finally:
            if self._pump is not None:
                self._pump.cancel()
            if self._transport is not None:
                self._transport.close()
            elif self._pipe is not None:
                self._pipe.close()
            if not self.waiter.done():
                self.waiter.cancel()  # still dying after the kill: its pid leaves _ACTIVE
                _forget_when_reaped(self._proc)  # once it has been reaped
            else:
                _ACTIVE.discard(self.pgid)
            # Killed leftovers become zombies a moment later, later still on a loaded host
            # (a reap skipped while another launch is in flight is caught by the next one):
            # reaped now, again while any of them is still dying, and at fixed delays (merged
            # with the reaps other calls asked for at about the same time: each scans /proc).
            reap_until_settled(self.born, self.pgid)
            for delay in _REAP_DELAYS_S:
                call_coalesced(delay, reap_orphans)
            self.ended = time.monotonic()
            self.finished.set()
            self.activity.set()
