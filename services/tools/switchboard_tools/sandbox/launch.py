"""The command line of one :class:`~switchboard_tools.sandbox.layered.LayeredSandbox` call: the
inner wrapper (:mod:`switchboard_tools.sandbox.inner`), bubblewrap when namespaces are in use, the
descriptors the child inherits and the pipe its measured isolation report comes back on; the
reading of that report and its check (:func:`attest`). Which layers a call uses is decided by the
sandbox; this module builds the call from that decision."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from switchboard_tools.sandbox.bootstrap import inner_source
from switchboard_tools.sandbox.bwrap import bwrap_argv
from switchboard_tools.sandbox.cgroups import CallCgroup, Cgroups, discard
from switchboard_tools.sandbox.child import Child, SpawnOptions
from switchboard_tools.sandbox.process import OuterLimits, minimal_env
from switchboard_tools.sandbox.profile import SandboxProfile, SandboxUnavailable

INNER_SOURCE = inner_source()
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/proc", "/dev")
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
INNER_LAYERS = frozenset({"seccomp", "landlock", "namespaces", "no_new_privs", "cgroup"})


@dataclass
class Launch:
    """A prepared call: the wrapped command line and what to close once it has started."""

    command: list[str]
    env: dict[str, str]
    options: SpawnOptions
    fds: list[int]
    report_r: int
    profile: SandboxProfile
    use_ns: bool
    cgroup: CallCgroup | None = None
    wrapper: str = "python"  # which wrapper measured it: "python" or "native" (compiled)
    cgroup_limits: dict[str, int | None] | None = None

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.cgroup is not None:
            self.cgroup.close_fds()

    def release_cgroup(self) -> dict[str, int] | None:
        """Once the call is over: how often its cgroup's limits acted, and its removal
        (``None``: the call had no cgroup). Idempotent."""
        cgroup, self.cgroup = self.cgroup, None
        if cgroup is None:
            return None
        events = cgroup.events()
        discard(cgroup)
        return events


_RELEASES: set[asyncio.Task[None]] = set()


def release_when_finished(child: Child, launch: Launch) -> None:
    """Release ``launch``'s cgroup once the (background) ``child`` has finished."""

    async def release() -> None:
        await child.finished.wait()
        launch.release_cgroup()

    task = asyncio.create_task(release())
    _RELEASES.add(task)
    task.add_done_callback(_RELEASES.discard)


def prepare_launch(
    argv: list[str],
    *,
    cwd: Path,
    workspace: Path,
    timeout_s: float,
    env: Mapping[str, str] | None,
    profile: SandboxProfile,
    python: str,
    bwrap: str | None,
    seccomp: bool,
    landlock: bool,
    outer: OuterLimits,
    preexec: Callable[[int, CallCgroup | None, int], None],
    cgroups: Cgroups | None,
    host_ns: dict[str, int],
    host_net: int,
    nproc: int,
    tmp_size_bytes: int,
    read_paths: Sequence[str] = (),
    native: str | None = None,
) -> Launch:
    """Build the wrapped command line of one call under the layers the sandbox chose: ``python``
    runs the inner wrapper -- or ``native``, the compiled one, does the same from the same
    configuration -- ``bwrap`` (``None``: no namespaces) the namespaces, ``seccomp`` and
    ``landlock`` say whether the wrapper applies them, ``cgroups`` (``None``: none) where the
    call's cgroup is made. ``outer``: the rlimits and the uid the command runs as, set with the
    cgroup entry, ``no_new_privs`` and the parent-death signal before the first program runs: by
    ``preexec(cpu_seconds, cgroup, executor_pid)`` between fork and exec under the Python
    wrapper, by the compiled wrapper's first stage under ``native`` (no ``preexec_fn``: the
    executor is not forked, see :mod:`.native`). Every call gets the parent-death signal, not
    only long-running ones: a ``run`` still going when the executor is SIGKILLed must not
    outlive it (issue 25).
    ``host_ns``/``host_net``: the executor's namespace inodes, ``nproc``: its process limit, both
    handed to the wrapper's measurement; ``tmp_size_bytes``: the size of the private ``/tmp``;
    ``read_paths``: further paths the command may read (bound read-only, allowed by Landlock)."""
    use_ns = bwrap is not None
    executor = os.getpid()  # in the child, the parent it must die with
    hand_workspace_over(workspace, outer.uid, use_ns)
    cpu_seconds = max(1, math.ceil(timeout_s) + 1)
    report_r, report_w = os.pipe()
    launch = Launch([], {}, SpawnOptions(), [report_w], report_r, profile, use_ns)
    launch.wrapper = "python" if native is None else "native"
    try:
        if cgroups is not None:
            try:
                launch.cgroup = cgroups.create()
                launch.cgroup_limits = cgroups.limits.describe()
            except OSError as exc:
                raise SandboxUnavailable(
                    f"Refused: the call's cgroup could not be created ({exc.strerror}); "
                    "the command was not run."
                ) from exc
        ws_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        launch.fds.append(ws_fd)
        cfg: dict[str, Any] = {
            "report_fd": report_w,
            "seccomp": seccomp,
            "landlock": landlock,
            "network": profile.network,
            "ro": [*SYSTEM_RO, *read_paths],
            "rw": [ws_fd, "/tmp"] if use_ns else [ws_fd],
            "dev": list(DEV_FILES),
            "require": sorted(profile.require & INNER_LAYERS),
            "require_any": [sorted(g) for g in profile.require_any if g <= INNER_LAYERS],
            "cgroup": launch.cgroup.view if launch.cgroup is not None else {},
            "host_cgroupns": os.stat("/proc/self/ns/cgroup").st_ino,
            "host_ns": host_ns if use_ns else {},
            "host_net": host_net,
            "nproc": nproc,
        }
        if native is not None:
            # Imported here: `python -m switchboard_tools.sandbox.native` (make install) must
            # not find the module imported already by this package's __init__.
            from switchboard_tools.sandbox.native import outer_args, wrapper_args

            command = [native, *wrapper_args(cfg, argv)]
        else:
            command = [python, "-I", "-S", "-c", INNER_SOURCE, json.dumps(cfg), *argv]
        if bwrap is not None:
            bw_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            launch.fds.append(bw_fd)
            prefix = bwrap_argv(
                bwrap,
                ws_fd=bw_fd,
                workspace=workspace,
                cwd=cwd,
                network=profile.network,
                # The compiled wrapper needs no interpreter's prefix bound, only itself (bound
                # read-only at its own path, after the private /tmp that could hide it).
                python=python if native is None else "/usr/bin/true",
                tmp_size_bytes=tmp_size_bytes,
                read_paths=read_paths if native is None else [*read_paths, native],
            )
            command = prefix + command
        if native is not None:
            cgroup_fds = launch.cgroup.fds if launch.cgroup is not None else []
            first = outer_args(
                outer.rlimits(cpu_seconds),
                cgroup_fds=cgroup_fds,
                uid=outer.uid,
                parent_pid=executor,
            )
            command = [native, *first, "--", *command]
            launch.options = SpawnOptions(
                pass_fds=(*launch.fds, *cgroup_fds), sets_parent_death_signal=True
            )
    except BaseException:
        launch.close_fds()
        launch.release_cgroup()
        os.close(report_r)
        raise
    launch.command = command
    cgroup = launch.cgroup
    if native is None:
        # The uid is dropped by preexec itself, after the cgroup is entered (not by
        # subprocess, which would drop it before preexec runs).
        launch.options = SpawnOptions(
            preexec=lambda: preexec(cpu_seconds, cgroup, executor),
            pass_fds=tuple(launch.fds),
            sets_parent_death_signal=True,
        )
    extra_env = {"TMPDIR": "/tmp"} if use_ns else {}
    launch.env = minimal_env(cwd, {**extra_env, **(env or {})})
    return launch


def hand_workspace_over(workspace: Path, uid: int | None, namespaces: bool) -> None:
    """Make ``workspace`` usable by the sandbox's dedicated ``uid`` (``None``: no uid change).

    The dedicated uid must be able to write its workspace (the executor, as root, keeps
    access) and bubblewrap, running as that uid, must be able to reach it.
    """
    if uid is None:
        return
    st = workspace.stat()
    if st.st_uid != uid:
        # First use by the sandbox: hand over what the executor created so far; later
        # files created by the executor's tools get the owner too (WorkspaceFS.give). Walked
        # by directory descriptors, never by name: a directory swapped for a symlink meanwhile
        # cannot send the change of owner outside the workspace.
        for _, dirs, files, dir_fd in os.fwalk(workspace, follow_symlinks=False):
            for name in dirs + files:
                with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                    os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)
        os.chown(workspace, uid, uid, follow_symlinks=False)
    if not namespaces:
        return  # the child enters its cwd before dropping the uid
    for parent in workspace.parents:
        st = parent.stat()
        if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
            raise SandboxUnavailable(
                f"Refused: the sandbox uid {uid} cannot reach the workspace ({parent} is "
                "not searchable by it; the operator must give it o+x). Nothing was run."
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
    return _parse_report(data)


async def await_report(fd: int, timeout_s: float) -> dict[str, Any] | None:
    """Read the sandbox wrapper's JSON report while the command keeps running: until EOF or
    until what was read is a complete JSON object (whichever comes first), within
    ``timeout_s``. Closes ``fd``."""
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader()
    try:
        pipe = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), pipe)
    data = b""
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await stream.read(65536):
                data += chunk
                report = _parse_report(data)
                if report is not None:
                    return report
    except TimeoutError:
        return None
    finally:
        transport.close()
    return _parse_report(data)


def _parse_report(data: bytes) -> dict[str, Any] | None:
    try:
        report = json.loads(data)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def attest(
    report: dict[str, Any] | None,
    launch: Launch,
    output: str,
    timed_out: bool,
    *,
    rlimits_set: list[str],
    host_uid: int,
) -> dict[str, Any]:
    """The call's measured isolation, or :class:`SandboxUnavailable` if it was not in force.
    ``rlimits_set`` and ``host_uid``: the rlimits and the uid the sandbox started it with."""
    if report is None:
        if timed_out:
            detail = "it timed out before its isolation could be measured"
        else:
            detail = f"the sandbox failed to start: {output.strip()[-300:]}"
        raise SandboxUnavailable(f"Refused: {detail}. The command was not run.")
    isolation = {
        "sandbox": "bwrap" if launch.use_ns else "process",
        "wrapper": launch.wrapper,
        "process_group": True,
        "rlimits_set": rlimits_set,
        "host_uid": host_uid,
        "minimal_env": True,
        "profile": launch.profile.describe(),
        **report,
    }
    isolation["workspace_confined"] = bool(report.get("namespaces") or report.get("landlock"))
    if launch.cgroup_limits is not None:
        isolation["cgroup_limits"] = launch.cgroup_limits
    if not report.get("ok"):
        missing = ", ".join(report.get("missing", [])) or "unknown"
        raise SandboxUnavailable(
            f"Refused: required isolation was not in force when measured ({missing}); "
            "the command was not run."
        )
    return isolation
