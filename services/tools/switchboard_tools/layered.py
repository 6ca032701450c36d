"""The layered sandbox: every isolation layer this host really has, proved per call.

Outer layers are set up by the executor when it starts the child: own session / process group
(killed as a whole), rlimits, a dedicated unprivileged uid when the executor is root,
``no_new_privs``, a minimal environment, output cap and wall-clock timeout, and bubblewrap
namespaces when ``bwrap`` works here (no network unless granted, read-only system directories,
private ``/proc``, ``/dev`` and ``/tmp``, only the workspace bind-mounted read-write, all
capabilities dropped). Inside, :mod:`switchboard_tools.inner` applies Landlock and a seccomp
denylist, measures what is in force and only then execs the command. Which layers exist is
decided by :func:`switchboard_tools.probe.probe_sandbox`, which runs a trivial command under each.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchboard_tools import inner
from switchboard_tools.bwrap import bwrap_argv
from switchboard_tools.profile import DEFAULT_PROFILE, SandboxProfile, SandboxUnavailable
from switchboard_tools.runner import ProcessResult, SpawnOptions, read_report, spawn_and_collect
from switchboard_tools.sandbox import minimal_env

_MiB = 1024 * 1024
_PR_SET_NO_NEW_PRIVS = 38
INNER_SOURCE = Path(inner.__file__).read_text(encoding="utf-8")
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/proc", "/dev")
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
_NS_KINDS = ("user", "mnt", "pid", "ipc", "uts")
INNER_LAYERS = frozenset({"seccomp", "landlock", "namespaces", "no_new_privs"})


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
        self._host_ns = {kind: _ns_inode(kind) for kind in _NS_KINDS}
        self._host_net = _ns_inode("net")
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
            "rlimits_set": self._rlimit_names(),
            "probe": dict(self.layers.status),
            "profile": profile.describe(),
        }

    def _rlimit_names(self) -> list[str]:
        names = ["cpu", "fsize", "nofile", "core", "nproc"]
        return [*names, "as"] if self.address_space_bytes is not None else names

    # -- running -------------------------------------------------------------------------

    def _preexec(self, cpu_seconds: int) -> None:
        # Between fork and exec, after the uid change: plain system calls only.
        def lower(which: int, value: int) -> None:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))

        lower(resource.RLIMIT_CPU, cpu_seconds)
        lower(resource.RLIMIT_FSIZE, self.fsize_bytes)
        lower(resource.RLIMIT_NOFILE, self.nofile)
        lower(resource.RLIMIT_CORE, 0)
        if self.address_space_bytes is not None:
            lower(resource.RLIMIT_AS, self.address_space_bytes)
        if self._prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")

    def _hand_workspace_over(self, workspace: Path, namespaces: bool) -> None:
        """The dedicated uid must be able to write its workspace (the executor, as root,
        keeps access) and bubblewrap, running as that uid, must be able to reach it."""
        uid = self.drop_uid
        if uid is None:
            return
        st = workspace.stat()
        if st.st_uid != uid:
            # First use by the sandbox: hand over what the executor created so far; later
            # files created by the executor's tools inherit the owner (inherit_owner).
            for top, dirs, files in os.walk(workspace):
                for name in dirs + files:
                    os.lchown(os.path.join(top, name), uid, uid)
            os.chown(workspace, uid, uid)
        if not namespaces:
            return  # the child enters its cwd before dropping the uid
        for parent in workspace.parents:
            st = parent.stat()
            if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
                raise SandboxUnavailable(
                    f"Refused: the sandbox uid {uid} cannot reach the workspace ({parent} is "
                    "not searchable by it; the operator must give it o+x). Nothing was run."
                )

    async def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
        profile: SandboxProfile | None = None,
        workspace: Path | None = None,
        layers: Mapping[str, bool] | None = None,
    ) -> ProcessResult:
        """Run ``argv`` under every available layer. Raises :class:`SandboxUnavailable` when
        ``profile`` (default: the sandbox's) demands a layer that is missing or was not measured
        in force. ``workspace`` (default ``cwd``) is the only writable directory. ``layers``
        switches layers off (the probe uses it; tools never do)."""
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
        workspace = workspace or cwd
        use_ns = bool(use["namespaces"]) and self.layers.bwrap is not None
        self._hand_workspace_over(workspace, use_ns)
        report_r, report_w = os.pipe()
        fds: list[int] = [report_w]
        try:
            ws_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            fds.append(ws_fd)
            cfg: dict[str, Any] = {
                "report_fd": report_w,
                "seccomp": bool(use["seccomp"]),
                "landlock": bool(use["landlock"]),
                "network": profile.network,
                "ro": list(SYSTEM_RO),
                "rw": [ws_fd, "/tmp"] if use_ns else [ws_fd],
                "dev": list(DEV_FILES),
                "require": sorted(profile.require & INNER_LAYERS),
                "host_ns": self._host_ns if use_ns else {},
                "host_net": self._host_net,
                "nproc": self.nproc,
            }
            command = [python, "-I", "-S", "-c", INNER_SOURCE, json.dumps(cfg), *argv]
            if use_ns and self.layers.bwrap is not None:
                bw_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                fds.append(bw_fd)
                prefix = bwrap_argv(
                    self.layers.bwrap,
                    ws_fd=bw_fd,
                    workspace=workspace,
                    cwd=cwd,
                    network=profile.network,
                    python=python,
                    tmp_size_bytes=self.tmp_size_bytes,
                )
                command = prefix + command
            cpu_seconds = max(1, math.ceil(timeout_s) + 1)
            options = SpawnOptions(
                preexec=lambda: self._preexec(cpu_seconds),
                pass_fds=tuple(fds),
                user=self.drop_uid,
                group=self.drop_uid,
            )
            extra_env = {"TMPDIR": "/tmp"} if use_ns else {}
            result = await spawn_and_collect(
                command,
                cwd=cwd,
                env=minimal_env(cwd, {**extra_env, **(env or {})}),
                timeout_s=timeout_s,
                output_cap=output_cap,
                options=options,
                exit_grace_s=self.exit_grace_s,
                drain_limit_bytes=self.drain_limit_bytes,
            )
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            report = read_report(report_r)
        return self._attest(result, report, profile, use_ns)

    def _attest(
        self,
        result: ProcessResult,
        report: dict[str, Any] | None,
        profile: SandboxProfile,
        ns: bool,
    ) -> ProcessResult:
        if report is None:
            if result.timed_out:
                detail = "it timed out before its isolation could be measured"
            else:
                detail = f"the sandbox failed to start: {result.output.strip()[-300:]}"
            raise SandboxUnavailable(f"Refused: {detail}. The command was not run.")
        isolation = {
            "sandbox": "bwrap" if ns else "process",
            "process_group": True,
            "rlimits_set": self._rlimit_names(),
            "host_uid": self.run_uid,
            "minimal_env": True,
            "profile": profile.describe(),
            **report,
        }
        isolation["workspace_confined"] = bool(report.get("namespaces") or report.get("landlock"))
        if not report.get("ok"):
            missing = ", ".join(report.get("missing", [])) or "unknown"
            raise SandboxUnavailable(
                f"Refused: required isolation was not in force when measured ({missing}); "
                "the command was not run."
            )
        return ProcessResult(
            exit_code=result.exit_code,
            output=result.output,
            truncated=result.truncated,
            timed_out=result.timed_out,
            duration_ms=result.duration_ms,
            isolation=isolation,
        )
