"""The compiled sandbox wrapper is equivalent to the Python one: the same probe findings, the
same measured report for the same call, the same process handed to the command (signal
dispositions, environment, descriptors, limits, credentials), the same refusals and exit codes.
Each test runs both wrappers on the same host and compares: a difference fails it, whatever the
host has (the isolation tests themselves run under both through the ``layered`` fixture)."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.sandbox import (
    LayeredSandbox,
    SandboxProfile,
    SandboxUnavailable,
    probe_sandbox,
)
from switchboard_tools.sandbox.inner import landlock_abi
from switchboard_tools.sandbox.launch import SYSTEM_RO
from switchboard_tools.sandbox.native import wrapper_args

from .sandbox_checks import SANDBOX_UID, need_confinement, skip_or_fail
from .wrappers import native_wrapper

# What only the wrapper's own name may change in a call's attestation.
_WRAPPER_KEYS = frozenset({"wrapper"})


@pytest.fixture(scope="module")
def pair() -> Iterator[dict[str, LayeredSandbox]]:
    """One probed sandbox per wrapper, side by side."""
    with native_wrapper() as path:
        yield {
            "python": asyncio.run(probe_sandbox(uid=SANDBOX_UID, wrapper="python")),
            "native": asyncio.run(
                probe_sandbox(uid=SANDBOX_UID, wrapper="native", native_path=path)
            ),
        }


def _without_wrapper(isolation: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in isolation.items() if k not in _WRAPPER_KEYS}


def test_the_probe_finds_the_same_layers(pair: dict[str, LayeredSandbox]) -> None:
    python, native = pair["python"], pair["native"]
    assert native.layers.wrapper == "native"
    assert python.layers.wrapper == "python"
    assert native.layers.status == python.layers.status
    assert native.available() == python.available()
    assert _without_wrapper(native.attestation()) == _without_wrapper(python.attestation())
    assert native.attestation()["wrapper"] == "native"


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
async def test_same_call_same_report(
    pair: dict[str, LayeredSandbox], workspace: Path, network: bool
) -> None:
    need_confinement(pair["python"])
    # The executor's default requirements (landlock|namespaces), every available layer on.
    profile = dataclasses.replace(pair["python"].default_profile, network=network)
    found = {}
    for name, sandbox in pair.items():
        result = await sandbox.run(
            ["true"], cwd=workspace, timeout_s=20, output_cap=4096, profile=profile
        )
        assert result.exit_code == 0, result.output
        assert result.isolation is not None
        assert result.isolation["wrapper"] == name
        found[name] = _without_wrapper(result.isolation)
    assert set(found["native"]) == set(found["python"])
    assert found["native"] == found["python"]


# What the command inherits, printed from inside: nothing here varies between two calls.
_STATE = (
    "grep -E '^(Sig(Ign|Blk)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp(_filters)?|Uid|Gid"
    "|Groups):' /proc/self/status; env | sort; ls /proc/self/fd; ulimit -a; umask; pwd; "
    "cat /proc/self/cgroup | sed 's/sb-[^/]*/CALL/g'"
)


@pytest.mark.parametrize(
    "env",
    [None, {"LANG": "C"}, {"LC_ALL": "C"}, {"LANG": "xx_YY.bogus"}],
    ids=["default", "LANG=C", "LC_ALL=C", "unknown-locale"],
)
async def test_the_command_gets_the_same_process(
    pair: dict[str, LayeredSandbox], workspace: Path, env: dict[str, str] | None
) -> None:
    """Including the environment when the caller's locale is C (the Python wrapper's
    interpreter then adds LC_CTYPE=C.UTF-8 for the command, PEP 538)."""
    need_confinement(pair["python"])
    found = {}
    for name, sandbox in pair.items():
        result = await sandbox.run(
            ["/bin/sh", "-c", _STATE], cwd=workspace, timeout_s=20, output_cap=65536, env=env
        )
        assert result.exit_code == 0, result.output
        found[name] = result.output
    assert "SigIgn" in found["python"]
    assert found["native"] == found["python"]


async def test_a_missing_layer_is_refused_alike(
    pair: dict[str, LayeredSandbox], workspace: Path
) -> None:
    """A layer required but switched off: both wrappers measure it missing and refuse to run
    the command, with the same refusal."""
    need_confinement(pair["python"])
    marker = workspace / "ran"
    profile = SandboxProfile(require=frozenset({"namespaces"}), network=True)
    messages = {}
    for name, sandbox in pair.items():
        with pytest.raises(SandboxUnavailable) as refused:
            await sandbox.run(
                ["touch", str(marker)],
                cwd=workspace,
                timeout_s=20,
                output_cap=4096,
                profile=profile,
                layers={"namespaces": False},
            )
        messages[name] = refused.value.message
        assert not marker.exists()
    assert "namespaces" in messages["python"]
    assert messages["native"] == messages["python"]


@pytest.mark.parametrize(
    "argv",
    [
        ["no-such-command-7f3a"],
        ["./script"],  # no "#!": Python's os.execvp refuses it; libc's execvp would run it
        ["./private"],  # not executable
        ["/"],  # a directory
    ],
    ids=["missing", "no-shebang", "not-executable", "directory"],
)
async def test_exec_failures_alike(
    pair: dict[str, LayeredSandbox], workspace: Path, argv: list[str]
) -> None:
    need_confinement(pair["python"])
    script = workspace / "script"
    script.write_text("echo ran\n")
    script.chmod(0o755)
    (workspace / "private").write_text("echo ran\n")
    found = {}
    for name, sandbox in pair.items():
        result = await sandbox.run(argv, cwd=workspace, timeout_s=20, output_cap=4096)
        found[name] = (result.exit_code, result.output)
    assert found["python"][0] in (126, 127)
    assert found["native"] == found["python"]


def _no_new_privs() -> None:
    """In the child before exec, as the executor does: Landlock needs it (or CAP_SYS_ADMIN)."""
    if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def _run_native(
    path: str, args: list[str], pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The compiled wrapper run directly (no executor, no bubblewrap)."""
    return subprocess.run(
        [path, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        pass_fds=pass_fds,
        preexec_fn=_no_new_privs,
    )


def _run_reported(
    path: str, cfg: dict[str, Any], argv: list[str]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``argv`` under the compiled wrapper with ``cfg``; the result and its report."""
    read, write = os.pipe()
    try:
        done = _run_native(path, wrapper_args({**cfg, "report_fd": write}, argv), (write,))
        os.close(write)
        write = -1
        with os.fdopen(read, "r") as report:
            read = -1
            return done, report.read()
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)


@pytest.mark.parametrize(
    "args",
    [
        ["report_fd=1", "bogus=1", "--", "true"],
        ["report_fd=x", "--", "true"],
        ["report_fd=1", "seccomp=yes", "--", "true"],
        ["report_fd=1", "ns=../../etc:1", "--", "true"],
        ["report_fd=1", "cgroup=memory", "--", "true"],
        ["report_fd=1", "nproc=99999999999999999999", "--", "true"],
        ["report_fd=1", "--"],
        ["report_fd=1", "true"],
    ],
)
def test_the_compiled_wrapper_refuses_a_bad_configuration(args: list[str]) -> None:
    """Anything it cannot read is refused before any layer or command: exit 2, a message, no
    report (the executor then refuses the call: the sandbox failed to start)."""
    with native_wrapper() as path:
        done = _run_native(path, args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "sandbox wrapper:" in done.stderr


def test_the_compiled_wrapper_takes_values_verbatim(tmp_path: Path) -> None:
    """A path is everything after the first ``=``: ``=`` and ``:`` inside it are kept. Shown by
    Landlock: the file in a directory with both in its name is readable only through the rule
    naming that directory (its sibling, without a rule, is not)."""
    if landlock_abi() < 1:
        skip_or_fail("this kernel has no Landlock")
    odd, other = tmp_path / "a=b:c", tmp_path / "other"
    for directory in (odd, other):
        directory.mkdir()
        (directory / "f").write_text("content\n")
    cfg = {"report_fd": 1, "landlock": True, "network": True, "ro": [*SYSTEM_RO, str(odd)]}
    assert f"ro={odd}" in wrapper_args(cfg, ["true"])
    with native_wrapper() as path:
        allowed, report = _run_reported(path, cfg, ["cat", str(odd / "f")])
        denied, _ = _run_reported(path, cfg, ["cat", str(other / "f")])
    assert json.loads(report)["landlock"] is True
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout == "content\n"
    assert denied.returncode != 0
    assert "Permission denied" in denied.stderr
