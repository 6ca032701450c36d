"""The layered sandbox: every isolation layer this host really has, proved per call.

Outer layers are set up by the executor when it starts the child: own session / process group
(killed as a whole), rlimits, a dedicated unprivileged uid when the executor is root,
``no_new_privs``, a minimal environment, output cap and wall-clock timeout, and bubblewrap
namespaces when ``bwrap`` works here (no network unless granted, read-only system directories,
private ``/proc``, ``/dev`` and ``/tmp``, only the workspace bind-mounted read-write, all
capabilities dropped). Inside, :mod:`switchboard_tools.sandbox.inner` applies Landlock and a
seccomp denylist, measures what is in force and only then execs the command. Which layers exist
is decided by :func:`switchboard_tools.sandbox.probe.probe_sandbox`, which runs a trivial command
under each; which of them a call uses is decided here, and its command line is built by
:mod:`switchboard_tools.sandbox.launch`.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import subprocess
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from switchboard_tools.output import OutputCallback
from switchboard_tools.sandbox.cgroups import CallCgroup, CgroupLimits
from switchboard_tools.sandbox.child import Child, forget_piped, kill_group, start_piped
from switchboard_tools.sandbox.launch import (
    Launch,
    attest,
    await_report,
    prepare_launch,
    read_report,
    release_when_finished,
)
from switchboard_tools.sandbox.layers import Layers, refusal
from switchboard_tools.sandbox.process import OuterLimits, outer_preexec
from switchboard_tools.sandbox.profile import DEFAULT_PROFILE, SandboxProfile, SandboxUnavailable
from switchboard_tools.sandbox.runner import ProcessResult, spawn_and_collect, spawn_background

_MiB = 1024 * 1024
_NS_KINDS = ("user", "mnt", "pid", "ipc", "uts")
# How long a spawned process may take to report its measured isolation.
_REPORT_TIMEOUT_S = 10.0
T = TypeVar("T")


def _ns_inode(kind: str) -> int:
    return os.stat(f"/proc/self/ns/{kind}").st_ino


_NOT_STARTED = (
    "Refused: the sandbox could not prepare the command's process (its cgroup, limits or "
    "uid); it was not run."
)


class LayeredSandbox:
    """See the module docstring. Construct, then ``await probe_sandbox(...)`` (or set
    ``layers`` by hand in tests); until probed, only the outer process layers are used and
    every call is refused because nothing was measured."""

    def __init__(
        self,
        *,
        uid: int | None = 65534,
        fsize_bytes: int = 64 * _MiB,
        nofile: int = 256,
        nproc: int = 64,
        address_space_bytes: int | None = 1024 * _MiB,
        tmp_size_bytes: int = 64 * _MiB,
        default_profile: SandboxProfile = DEFAULT_PROFILE,
        exit_grace_s: float = 0.5,
        drain_limit_bytes: int = 64 * _MiB,
        cgroup_limits: CgroupLimits | None = None,
        cgroup_parent: str = "",
    ) -> None:
        """``uid``: the unprivileged uid/gid commands run as when the executor is root
        (``None``: keep the executor's uid, not recommended). ``cgroup_limits``: the memory
        and process limits of each call's cgroup, made under ``cgroup_parent`` (a cgroup path;
        ``""``: the executor's own cgroup) when the probe finds cgroups writable."""
        self.drop_uid = uid if os.geteuid() == 0 else None
        self.fsize_bytes = fsize_bytes
        self.nofile = nofile
        self.nproc = nproc
        self.address_space_bytes = address_space_bytes
        self.tmp_size_bytes = tmp_size_bytes
        self.default_profile = default_profile
        self.exit_grace_s = exit_grace_s
        self.drain_limit_bytes = drain_limit_bytes
        self.cgroup_limits = cgroup_limits or CgroupLimits()
        self.cgroup_parent = cgroup_parent
        self.layers = Layers()
        self.host_ns = {kind: _ns_inode(kind) for kind in _NS_KINDS}
        self.host_net = _ns_inode("net")
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl

    # -- what is available -------------------------------------------------------------

    @property
    def run_uid(self) -> int:
        return self.drop_uid if self.drop_uid is not None else os.geteuid()

    def available(self) -> dict[str, bool]:
        return self.layers.available(self.run_uid)

    def can_deny_network(self) -> bool:
        return self.layers.can_deny_network(self.run_uid)

    def missing(self, profile: SandboxProfile) -> list[str]:
        """Requirements of ``profile`` this host cannot provide (``a|b``: neither of them)."""
        return self.layers.missing(profile, self.run_uid)

    def attestation(self) -> dict[str, Any]:
        return self.layers.attestation(
            self.run_uid, self.default_profile, self.rlimit_names(), self.cgroup_limits
        )

    def rlimit_names(self) -> list[str]:
        names = ["cpu", "fsize", "nofile", "core", "nproc"]
        return [*names, "as"] if self.address_space_bytes is not None else names

    # -- running (the command line is built in switchboard_tools.sandbox.launch) -------

    def _prepare(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        env: Mapping[str, str] | None,
        profile: SandboxProfile | None,
        workspace: Path | None,
        layers: Mapping[str, bool] | None,
        read_paths: Sequence[str] = (),
    ) -> Launch:
        """Check ``profile`` against what is available and build the wrapped command line
        (every call's child is killed if the executor dies, see :func:`.launch.prepare_launch`)."""
        if not argv:
            raise ValueError("empty argv")
        profile = profile or self.default_profile
        use = {**self.available(), **(layers or {})}
        missing = self.missing(profile) if layers is None else []
        if missing:
            raise SandboxUnavailable(refusal(missing, self.layers.status))
        python, native = self.layers.python, self.layers.native
        if python is None and native is None:
            raise SandboxUnavailable("Refused: the sandbox was not probed; nothing was run.")
        return prepare_launch(
            argv,
            cwd=cwd,
            workspace=workspace or cwd,
            timeout_s=timeout_s,
            env=env,
            profile=profile,
            python=python or "",
            native=native,
            bwrap=self.layers.bwrap if use["namespaces"] else None,
            seccomp=bool(use["seccomp"]),
            landlock=bool(use["landlock"]),
            outer=self.outer_limits(),
            preexec=self.preexec,
            cgroups=self.layers.cgroups if use["cgroup"] else None,
            host_ns=self.host_ns,
            host_net=self.host_net,
            nproc=self.nproc,
            tmp_size_bytes=self.tmp_size_bytes,
            read_paths=read_paths,
        )

    def _attest(
        self, report: dict[str, Any] | None, launch: Launch, output: str, timed_out: bool
    ) -> dict[str, Any]:
        return attest(
            report,
            launch,
            output,
            timed_out,
            rlimits_set=self.rlimit_names(),
            host_uid=self.run_uid,
        )

    def outer_limits(self) -> OuterLimits:
        """The rlimits and uid every call gets before its first program runs."""
        return OuterLimits(
            fsize_bytes=self.fsize_bytes,
            nofile=self.nofile,
            address_space_bytes=self.address_space_bytes,
            uid=self.drop_uid,
        )

    def preexec(
        self, cpu_seconds: int, cgroup: CallCgroup | None = None, parent_pid: int | None = None
    ) -> None:
        # Between fork and exec (the Python wrapper's calls only; the compiled wrapper's first
        # stage does the same): see switchboard_tools.sandbox.process.outer_preexec.
        outer_preexec(
            cpu_seconds,
            cgroup=cgroup,
            limits=self.outer_limits(),
            prctl=self._prctl,
            parent_pid=parent_pid,
        )

    async def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        profile: SandboxProfile | None = None,
        workspace: Path | None = None,
        layers: Mapping[str, bool] | None = None,
    ) -> ProcessResult:
        """Run ``argv`` under every available layer. Raises :class:`SandboxUnavailable` when
        ``profile`` (default: the sandbox's) demands a layer that is missing or was not measured
        in force. ``workspace`` (default ``cwd``) is the only writable directory. ``layers``
        switches layers off (the probe uses it; tools never do). ``on_output`` receives output
        as it arrives (see :func:`~switchboard_tools.sandbox.runner.spawn_and_collect`)."""
        launch = self._prepare(
            argv,
            cwd=cwd,
            timeout_s=timeout_s,
            env=env,
            profile=profile,
            workspace=workspace,
            layers=layers,
        )
        try:
            result = await spawn_and_collect(
                launch.command,
                cwd=cwd,
                env=launch.env,
                timeout_s=timeout_s,
                output_cap=output_cap,
                options=launch.options,
                exit_grace_s=self.exit_grace_s,
                drain_limit_bytes=self.drain_limit_bytes,
                on_output=on_output,
            )
        except subprocess.SubprocessError as exc:
            raise SandboxUnavailable(_NOT_STARTED) from exc
        finally:
            launch.close_fds()
            report = read_report(launch.report_r)
            events = launch.release_cgroup()
        isolation = self._attest(report, launch, result.output, result.timed_out)
        if events is not None:
            isolation["cgroup_events"] = events
        return replace(result, isolation=isolation)

    async def spawn(
        self,
        argv: list[str],
        *,
        cwd: Path,
        lifetime_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
        profile: SandboxProfile | None = None,
        workspace: Path | None = None,
    ) -> Child:
        """Start ``argv`` under every available layer and leave it running (see
        :func:`~switchboard_tools.sandbox.runner.spawn_background`); returns once its isolation was
        measured in force (``Child.isolation``), else kills it and raises
        :class:`SandboxUnavailable`."""
        launch = self._prepare(
            argv,
            cwd=cwd,
            timeout_s=lifetime_s,
            env=env,
            profile=profile,
            workspace=workspace,
            layers=None,
        )
        child = await _start(
            launch,
            spawn_background(
                launch.command,
                cwd=cwd,
                env=launch.env,
                lifetime_s=lifetime_s,
                output_cap=output_cap,
                options=launch.options,
                exit_grace_s=self.exit_grace_s,
            ),
        )
        release_when_finished(child, launch)
        try:
            report = await await_report(launch.report_r, _REPORT_TIMEOUT_S)
            if report is None or not report.get("ok"):
                child.kill()
                await child.finish()
            output = bytes(child.sink.data).decode("utf-8", errors="replace")
            child.isolation = self._attest(report, launch, output, child.timed_out)
        except BaseException:
            child.kill()
            await child.finish()
            raise
        return child

    async def spawn_piped(
        self,
        argv: list[str],
        *,
        cwd: Path,
        cpu_seconds: float,
        env: Mapping[str, str] | None = None,
        profile: SandboxProfile | None = None,
        read_paths: Sequence[str] = (),
    ) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
        """Start a long-running server ``argv`` under every available layer with its stdin,
        stdout and stderr as pipes (an MCP stdio server speaks over them): returns the process
        (it leads its own process group, dies with the executor) and its measured isolation,
        once measured in force, else kills it and raises :class:`SandboxUnavailable`. ``cwd``
        is its only writable directory; ``read_paths`` are further paths it may read.
        ``cpu_seconds``: its CPU-time limit. The caller kills its group when done with it."""
        launch = self._prepare(
            argv,
            cwd=cwd,
            timeout_s=cpu_seconds,
            env=env,
            profile=profile,
            workspace=cwd,
            layers=None,
            read_paths=read_paths,
        )
        proc = await _start(
            launch, start_piped(launch.command, cwd=cwd, env=launch.env, options=launch.options)
        )
        try:
            report = await await_report(launch.report_r, _REPORT_TIMEOUT_S)
            isolation = self._attest(report, launch, "", False)
        except BaseException:
            kill_group(proc.pid)
            raise
        finally:
            _release_on_exit(proc, launch)
        return proc, isolation


async def _start(launch: Launch, starting: Awaitable[T]) -> T:
    """Await the start of ``launch``'s process (``starting``), then close the launch's fds the
    child inherited. If it did not start, the report pipe and the cgroup go too, and a failed
    spawn is :class:`SandboxUnavailable`."""
    try:
        try:
            return await starting
        finally:
            launch.close_fds()
    except BaseException as exc:
        os.close(launch.report_r)
        launch.release_cgroup()
        if isinstance(exc, subprocess.SubprocessError):
            raise SandboxUnavailable(_NOT_STARTED) from exc
        raise


def _release_on_exit(proc: asyncio.subprocess.Process, launch: Launch) -> None:
    """Remove ``launch``'s cgroup once ``proc`` has exited."""

    async def release() -> None:
        try:
            await proc.wait()
        finally:
            forget_piped(proc.pid)
            launch.release_cgroup()

    task = asyncio.create_task(release())
    _PIPED_RELEASES.add(task)
    task.add_done_callback(_PIPED_RELEASES.discard)


_PIPED_RELEASES: set[asyncio.Task[None]] = set()
