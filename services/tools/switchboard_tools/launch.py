"""The command line of one :class:`~switchboard_tools.layered.LayeredSandbox` call: the inner
wrapper (:mod:`switchboard_tools.inner`), bubblewrap when namespaces are in use, the descriptors
the child inherits and the pipe its measured isolation report comes back on; and the check of
that report (:func:`attest`)."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from switchboard_tools import inner
from switchboard_tools.bwrap import bwrap_argv
from switchboard_tools.profile import SandboxProfile, SandboxUnavailable
from switchboard_tools.runner import SpawnOptions
from switchboard_tools.sandbox import minimal_env
from switchboard_tools.workspace import hand_workspace_over

if TYPE_CHECKING:
    from switchboard_tools.layered import LayeredSandbox

INNER_SOURCE = Path(inner.__file__).read_text(encoding="utf-8")
SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/proc", "/dev")
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
INNER_LAYERS = frozenset({"seccomp", "landlock", "namespaces", "no_new_privs"})


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

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def prepare_launch(
    sandbox: LayeredSandbox,
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
    profile = profile or sandbox.default_profile
    use = {**sandbox.available(), **(layers or {})}
    missing = sandbox.missing(profile) if layers is None else []
    if missing:
        raise SandboxUnavailable(
            "Refused: this call's sandbox profile requires isolation this executor cannot "
            f"provide ({', '.join(missing)}); it was not run."
        )
    python = sandbox.layers.python
    if python is None:
        raise SandboxUnavailable("Refused: the sandbox was not probed; nothing was run.")
    workspace = workspace or cwd
    use_ns = bool(use["namespaces"]) and sandbox.layers.bwrap is not None
    hand_workspace_over(workspace, sandbox.drop_uid, use_ns)
    report_r, report_w = os.pipe()
    launch = Launch([], {}, SpawnOptions(), [report_w], report_r, profile, use_ns)
    try:
        ws_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        launch.fds.append(ws_fd)
        cfg: dict[str, Any] = {
            "report_fd": report_w,
            "seccomp": bool(use["seccomp"]),
            "landlock": bool(use["landlock"]),
            "network": profile.network,
            "ro": list(SYSTEM_RO),
            "rw": [ws_fd, "/tmp"] if use_ns else [ws_fd],
            "dev": list(DEV_FILES),
            "require": sorted(profile.require & INNER_LAYERS),
            "host_ns": sandbox.host_ns if use_ns else {},
            "host_net": sandbox.host_net,
            "nproc": sandbox.nproc,
        }
        command = [python, "-I", "-S", "-c", INNER_SOURCE, json.dumps(cfg), *argv]
        if use_ns and sandbox.layers.bwrap is not None:
            bw_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            launch.fds.append(bw_fd)
            prefix = bwrap_argv(
                sandbox.layers.bwrap,
                ws_fd=bw_fd,
                workspace=workspace,
                cwd=cwd,
                network=profile.network,
                python=python,
                tmp_size_bytes=sandbox.tmp_size_bytes,
            )
            command = prefix + command
    except BaseException:
        launch.close_fds()
        os.close(report_r)
        raise
    cpu_seconds = max(1, math.ceil(timeout_s) + 1)
    launch.command = command
    launch.options = SpawnOptions(
        preexec=lambda: sandbox.preexec(cpu_seconds),
        pass_fds=tuple(launch.fds),
        user=sandbox.drop_uid,
        group=sandbox.drop_uid,
    )
    extra_env = {"TMPDIR": "/tmp"} if use_ns else {}
    launch.env = minimal_env(cwd, {**extra_env, **(env or {})})
    return launch


def attest(
    sandbox: LayeredSandbox,
    report: dict[str, Any] | None,
    launch: Launch,
    output: str,
    timed_out: bool,
) -> dict[str, Any]:
    """The call's measured isolation, or :class:`SandboxUnavailable` if it was not in force."""
    if report is None:
        if timed_out:
            detail = "it timed out before its isolation could be measured"
        else:
            detail = f"the sandbox failed to start: {output.strip()[-300:]}"
        raise SandboxUnavailable(f"Refused: {detail}. The command was not run.")
    isolation = {
        "sandbox": "bwrap" if launch.use_ns else "process",
        "process_group": True,
        "rlimits_set": sandbox.rlimit_names(),
        "host_uid": sandbox.run_uid,
        "minimal_env": True,
        "profile": launch.profile.describe(),
        **report,
    }
    isolation["workspace_confined"] = bool(report.get("namespaces") or report.get("landlock"))
    if not report.get("ok"):
        missing = ", ".join(report.get("missing", [])) or "unknown"
        raise SandboxUnavailable(
            f"Refused: required isolation was not in force when measured ({missing}); "
            "the command was not run."
        )
    return isolation
