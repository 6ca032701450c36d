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

import ctypes
import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from switchboard_tools.output import OutputCallback
from switchboard_tools.sandbox.child import Child
from switchboard_tools.sandbox.launch import (
    Launch,
    attest,
    await_report,
    prepare_launch,
    read_report,
)
from switchboard_tools.sandbox.process import lower_limit, set_no_new_privs
from switchboard_tools.sandbox.profile import DEFAULT_PROFILE, SandboxProfile, SandboxUnavailable
from switchboard_tools.sandbox.runner import ProcessResult, spawn_and_collect, spawn_background

_MiB = 1024 * 1024
_NS_KINDS = ("user", "mnt", "pid", "ipc", "uts")
# How long a spawned process may take to report its measured isolation.
_REPORT_TIMEOUT_S = 10.0


def _ns_inode(kind: str) -> int:
    return os.stat(f"/proc/self/ns/{kind}").st_ino


@dataclass
class Layers:
    """What the start-up probe proved. ``status`` maps each optional layer to ``"ok"`` or
    ``"unavailable: <reason>"``; a layer is only used when its probe passed."""

    python: str | None = None
    bwrap: str | None = None
    seccomp: bool = False
    landlock_abi: int = 0
    status: dict[str, str] = field(default_factory=dict)


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
    ) -> None:
        """``uid``: the unprivileged uid/gid commands run as when the executor is root
        (``None``: keep the executor's uid, not recommended)."""
        self.drop_uid = uid if os.geteuid() == 0 else None
        self.fsize_bytes = fsize_bytes
        self.nofile = nofile
        self.nproc = nproc
        self.address_space_bytes = address_space_bytes
        self.tmp_size_bytes = tmp_size_bytes
        self.default_profile = default_profile
        self.exit_grace_s = exit_grace_s
        self.drain_limit_bytes = drain_limit_bytes
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
        layers = self.layers
        measured = layers.python is not None
        return {
            "process_group": True,
            "rlimits": True,
            "no_new_privs": measured,
            "uid": self.run_uid != 0,
            "seccomp": measured and layers.seccomp,
            "landlock": measured and layers.landlock_abi > 0,
            "namespaces": measured and layers.bwrap is not None,
        }

    def can_deny_network(self) -> bool:
        have = self.available()
        return have["namespaces"] or have["seccomp"] or self.layers.landlock_abi >= 4

    def missing(self, profile: SandboxProfile) -> list[str]:
        """Layers ``profile`` demands that this host cannot provide."""
        have = self.available()
        missing = sorted(layer for layer in profile.require if not have.get(layer))
        if not profile.network and not self.can_deny_network():
            missing.append("network_isolation")
        if self.layers.python is None:
            missing.append("measurement")
        return missing

    def attestation(self) -> dict[str, Any]:
        have = self.available()
        profile = self.default_profile
        return {
            "sandbox": "bwrap" if have["namespaces"] else "process",
            "measured": self.layers.python is not None,
            **have,
            "uid": self.run_uid,
            "landlock_abi": self.layers.landlock_abi,
            "network": profile.network or not self.can_deny_network(),
            "workspace_confined": have["namespaces"] or have["landlock"],
            "minimal_env": True,
            "rlimits_set": self.rlimit_names(),
            "probe": dict(self.layers.status),
            "profile": profile.describe(),
        }

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
    ) -> Launch:
        """Check ``profile`` against what is available and build the wrapped command line."""
        if not argv:
            raise ValueError("empty argv")
        profile = profile or self.default_profile
        use = {**self.available(), **(layers or {})}
        missing = self.missing(profile) if layers is None else []
        if missing:
            raise SandboxUnavailable(
                "Refused: this call's sandbox profile requires isolation this executor cannot "
                f"provide ({', '.join(missing)}); it was not run."
            )
        python = self.layers.python
        if python is None:
            raise SandboxUnavailable("Refused: the sandbox was not probed; nothing was run.")
        return prepare_launch(
            argv,
            cwd=cwd,
            workspace=workspace or cwd,
            timeout_s=timeout_s,
            env=env,
            profile=profile,
            python=python,
            bwrap=self.layers.bwrap if use["namespaces"] else None,
            seccomp=bool(use["seccomp"]),
            landlock=bool(use["landlock"]),
            uid=self.drop_uid,
            preexec=self.preexec,
            host_ns=self.host_ns,
            host_net=self.host_net,
            nproc=self.nproc,
            tmp_size_bytes=self.tmp_size_bytes,
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

    def preexec(self, cpu_seconds: int) -> None:
        # Between fork and exec, after the uid change: plain system calls only.
        lower_limit(resource.RLIMIT_CPU, cpu_seconds)
        lower_limit(resource.RLIMIT_FSIZE, self.fsize_bytes)
        lower_limit(resource.RLIMIT_NOFILE, self.nofile)
        lower_limit(resource.RLIMIT_CORE, 0)
        if self.address_space_bytes is not None:
            lower_limit(resource.RLIMIT_AS, self.address_space_bytes)
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
        finally:
            launch.close_fds()
            report = read_report(launch.report_r)
        isolation = self._attest(report, launch, result.output, result.timed_out)
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
        try:
            try:
                child = await spawn_background(
                    launch.command,
                    cwd=cwd,
                    env=launch.env,
                    lifetime_s=lifetime_s,
                    output_cap=output_cap,
                    options=launch.options,
                    exit_grace_s=self.exit_grace_s,
                )
            finally:
                launch.close_fds()
        except BaseException:
            os.close(launch.report_r)
            raise
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
