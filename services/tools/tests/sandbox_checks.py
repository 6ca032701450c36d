"""What the tools tests share so they can fail for the reason they name: skipping (locally) or
failing (under CI) when the host cannot show what a test is about, the processes a sandbox left
in a workspace as psutil sees them, temporary attack targets the sandbox uid could reach, and the
grace the sandbox has to kill a command after its timeout."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import psutil
import pytest

from switchboard_tools.sandbox import LayeredSandbox, child
from tests.support.workers import sandbox_uid

# The dedicated uid sandboxed commands run as when the executor is root (LayeredSandbox): this
# test worker's own (SB_EXEC_SANDBOX_UID; see tests/support/workers.py).
SANDBOX_UID = sandbox_uid()
# After its timeout the sandbox kills the command's group, then waits at most 5 s for the reap
# and 0.5 s for the output pipe (Child.finish): what a reported duration_ms may exceed the
# timeout by. A command that was not killed runs for its whole 30-60 s instead.
KILL_GRACE_MS = 5_500.0


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip with ``reason`` on a developer machine; fail under ``CI=true``, where the host is
    set up to show everything (root, bubblewrap, seccomp, Landlock) and a skip would hide a
    regression."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: this must run here, not be skipped)", pytrace=False)
    pytest.skip(reason)


def need_confinement(layered: LayeredSandbox) -> None:
    """The default profile runs commands only under filesystem confinement (Landlock or
    namespaces): without either, this host cannot run a command in the sandbox at all."""
    have = layered.available()
    if not (have.get("landlock") or have.get("namespaces")):
        skip_or_fail("host lacks filesystem confinement (neither Landlock nor namespaces)")


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        skip_or_fail(
            f"{what}: the suite does not run as root, so the sandbox keeps the suite's own uid "
            f"(it only switches to {SANDBOX_UID} when the executor is root)"
        )


def _home(proc: psutil.Process) -> str | None:
    try:
        return proc.environ().get("HOME")
    except (psutil.Error, OSError):
        return None


# When each test's workspace was made (boot-clock seconds, see :func:`moment`), by path: a
# zombie of the sandbox uid born before it is not that test's survivor.
_WORKSPACE_BORN: dict[str, float] = {}


def moment() -> float:
    """Now, on the clock of ``psutil.Process.create_time`` (boot time + uptime), so that it
    compares with a process's start without the wall clock's drift against it."""
    with open("/proc/uptime") as f:
        return psutil.boot_time() + float(f.read().split()[0])


def workspace_born(workspace: Path) -> None:
    """Note that ``workspace`` was just made for a test (the ``workspace`` fixture)."""
    _WORKSPACE_BORN[str(workspace)] = moment()


def sandbox_processes(workspace: Path, uid: int | None = None) -> list[psutil.Process]:
    """Processes a sandbox started in ``workspace`` that still exist. Running ones are found by
    their environment (every sandboxed process starts with ``HOME=<workspace>``, and the
    workspace is a fresh temporary directory, so other tests' processes never match); with
    ``uid``, children of this process of that uid count too, zombies included (they still
    count against the uid's process limit), if they started after the workspace was made: this
    process is the subreaper of every orphan below it, and an orphan of an earlier test's
    killed stack or executor (the same uid: it is this test worker's) may end, and wait for
    reaping, at any time."""
    me = os.getpid()
    born = _WORKSPACE_BORN.get(str(workspace), 0.0)
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            # A child of ours of that uid, zombie or not: an orphan reparented to us, also
            # while it exits (its environment is gone by then, and it is no zombie yet).
            if (
                uid is not None
                and proc.ppid() == me
                and proc.uids().real == uid
                and proc.create_time() >= born - 0.05  # the clock's 10 ms ticks
            ):
                found.append(proc)
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        if _home(proc) == str(workspace):
            found.append(proc)
    return found


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]], timeout: float = 15.0, step: float = 0.05
) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes; whether it held. A bounded
    wait for an event, not a statement about how long it takes."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if not isinstance(value, bool):
            value = await value
        if value:
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(step)


async def assert_all_gone(workspace: Path, uid: int | None = None) -> None:
    """Every process the sandbox started in ``workspace`` is killed (and reaped) eventually."""
    await wait_until(lambda: not sandbox_processes(workspace, uid))
    left = [(p.pid, _describe(p)) for p in sandbox_processes(workspace, uid)]
    assert left == [], f"sandboxed processes survived: {left}"


def sandbox_commands(workspace: Path) -> list[list[str]]:
    """The command lines of the processes running in ``workspace``'s sandbox."""
    found = []
    for proc in sandbox_processes(workspace):
        try:
            found.append(proc.cmdline())
        except psutil.Error:
            continue
    return found


def _describe(proc: psutil.Process) -> str:
    """Enough to tell whose a survivor is: a zombie has no command line, but its name, parent,
    uid and whether this process still awaits it as a child of its own (child._ACTIVE)."""
    try:
        with proc.oneshot():
            what = f"{proc.status()} {proc.name()!r} ppid={proc.ppid()} uid={proc.uids().real}"
    except psutil.Error as exc:
        return f"gone ({type(exc).__name__})"
    if proc.pid in child._ACTIVE:
        what += " awaited"
    try:
        return f"{what} {proc.cmdline()}"
    except psutil.Error:
        return what


@dataclass(frozen=True)
class HostTargets:
    """Files outside any workspace that the sandbox uid could read and write if confinement
    broke: a 0755 directory holding a 0644 file, and a 0777 directory holding a 0666 file.
    Everything lives in a fresh directory under /tmp (never a real system file)."""

    root: Path
    readable: Path  # 0644, content READABLE_TEXT
    writable_dir: Path  # 0777
    writable: Path  # 0666 in writable_dir, content WRITABLE_TEXT

    READABLE_TEXT = "host secret 5c1e"
    WRITABLE_TEXT = "original content\n"

    def untouched(self) -> bool:
        return (
            self.readable.read_text() == self.READABLE_TEXT
            and self.writable.read_text() == self.WRITABLE_TEXT
            and sorted(p.name for p in self.writable_dir.iterdir()) == [self.writable.name]
        )


@contextmanager
def host_targets() -> Iterator[HostTargets]:
    # Not pytest's tmp_path: its parents are private to root, so the sandbox uid could never
    # reach a target there whatever the confinement, and the test would prove nothing.
    root = Path(tempfile.mkdtemp(prefix="sb-host-"))
    try:
        root.chmod(0o755)
        readable = root / "readable.txt"
        readable.write_text(HostTargets.READABLE_TEXT)
        readable.chmod(0o644)
        writable_dir = root / "open"
        writable_dir.mkdir()
        writable_dir.chmod(0o777)
        writable = writable_dir / "existing.txt"
        writable.write_text(HostTargets.WRITABLE_TEXT)
        writable.chmod(0o666)
        yield HostTargets(root, readable, writable_dir, writable)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class RootOnlyTargets:
    """A 0600 file and a 0755 directory of root's in a fresh 0755 directory under /tmp: what
    only the sandbox's uid drop keeps a command from."""

    root: Path
    private: Path  # 0600, content PRIVATE_TEXT
    closed: Path  # 0755

    PRIVATE_TEXT = "root only 9d2b"


@contextmanager
def root_only_targets() -> Iterator[RootOnlyTargets]:
    root = Path(tempfile.mkdtemp(prefix="sb-host-root-"))
    try:
        root.chmod(0o755)
        private = root / "private.txt"
        private.write_text(RootOnlyTargets.PRIVATE_TEXT)
        private.chmod(0o600)
        closed = root / "closed"
        closed.mkdir()
        closed.chmod(0o755)
        yield RootOnlyTargets(root, private, closed)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def environ_of(pid: int) -> bytes:
    """The environment process ``pid`` was started with, as the kernel shows it."""
    return Path(f"/proc/{pid}/environ").read_bytes()
