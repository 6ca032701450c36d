"""A sandboxed command cannot signal processes outside its own call, while signalling its own
children still works. The victim is a ``sleep`` this test starts in a session of its own, as
the sandbox's uid when the suite runs as root (so the uid does not protect it: exactly the
situation of another call's process), and kills at the end."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile

from .sandbox_checks import skip_or_fail, wait_until

Need = Callable[..., None]
CONFINEMENT = ("namespaces", "landlock", "seccomp")
# None: through the exec tool with every layer; a layer: that layer alone; "control": none.
RUNS = [None, "seccomp", "landlock", "control"]
SCRIPT = (
    "sleep 60 & kill -TERM $!; wait $!; echo child=$?; "
    "kill -TERM {victim}; echo victim=$?; kill -0 -1; echo everyone=$?"
)


@pytest.fixture
def victim(layered: LayeredSandbox) -> Iterator[subprocess.Popen[bytes]]:
    uid = layered.run_uid
    as_uid: dict[str, Any] = {"user": uid, "group": uid} if os.geteuid() == 0 else {}
    # An hour: the victim must outlive a slow test, or its own end would read as a kill.
    proc = subprocess.Popen(["sleep", "3600"], start_new_session=True, **as_uid)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def run_attack(
    scall: Any, layered: LayeredSandbox, workspace: Path, only: str | None, script: str
) -> tuple[str, dict[str, Any]]:
    if only is None:
        out = await scall("exec", {"command": script})
        return str(out.content), out.details["isolation"]
    layers = {name: name == only for name in CONFINEMENT}
    result = await layered.run(
        ["/bin/sh", "-c", script],
        cwd=workspace,
        timeout_s=20,
        output_cap=10000,
        profile=SandboxProfile(network=True),
        layers=layers,
    )
    iso = result.isolation or {}
    assert {name: iso[name] for name in CONFINEMENT} == layers
    return result.output, iso


@pytest.mark.parametrize("only", RUNS)
async def test_signal_outside_the_call(
    scall: Any,
    layered: LayeredSandbox,
    workspace: Path,
    need: Need,
    victim: subprocess.Popen[bytes],
    only: str | None,
) -> None:
    if only in ("seccomp", "landlock"):
        need(only)
    if only == "landlock" and layered.layers.landlock_abi < 6:
        skip_or_fail(f"Landlock ABI {layered.layers.landlock_abi} cannot scope signals (6+)")
    output, iso = await run_attack(
        scall, layered, workspace, only, SCRIPT.format(victim=victim.pid)
    )
    assert "child=143" in output, output  # its own child: signalled (128 + SIGTERM)
    if only == "control":  # nothing confines it: the signal reaches the victim
        assert "victim=0" in output, output
        assert await wait_until(lambda: victim.poll() is not None), "the victim survived"
        return
    assert "victim=1" in output and "Operation not permitted" in output, output
    assert victim.poll() is None, "the victim was killed"
    if only != "landlock":  # the seccomp supervisor refuses "every process" as such
        assert "everyone=1" in output and iso["signals_confined"] is True, output


async def test_other_ways_to_signal(
    scall: Any,
    layered: LayeredSandbox,
    workspace: Path,
    need: Need,
    victim: subprocess.Popen[bytes],
) -> None:
    """pidfd_open / pidfd_send_signal (also through a /proc/<pid> directory descriptor),
    tgkill and rt_sigqueueinfo, and F_SETOWN to have SIGIO sent there, under seccomp alone."""
    need("seccomp")
    script = f"""
import ctypes, errno, fcntl, os, signal, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
v = {victim.pid}
def attempt(name, fn):
    try:
        r = fn()
        print(name, "ok" if r in (None, 0) or (isinstance(r, int) and r >= 0) else r)
    except OSError as e:
        print(name, errno.errorcode[e.errno])
def sys_(nr, *a):
    r = libc.syscall(nr, *a)
    if r < 0:
        raise OSError(ctypes.get_errno(), "")
    return r
attempt("pidfd_open", lambda: os.pidfd_open(v))
d = os.open("/proc/%d" % v, os.O_RDONLY | os.O_DIRECTORY)
attempt("pidfd_send_signal_procfd", lambda: signal.pidfd_send_signal(d, signal.SIGTERM))
attempt("tgkill", lambda: sys_(234, v, v, 15))
attempt("tkill", lambda: sys_(200, v, 15))
info = ctypes.create_string_buffer(128)
ctypes.c_int.from_buffer(info, 0).value = 15
ctypes.c_int.from_buffer(info, 8).value = -1  # SI_QUEUE: what the kernel lets users send
attempt("rt_sigqueueinfo", lambda: sys_(129, v, 15, info))
s = socket.socketpair()
attempt("f_setown", lambda: fcntl.fcntl(s[0], fcntl.F_SETOWN, v))
attempt("own_pidfd", lambda: os.pidfd_open(os.getpid()))
attempt("own_setown", lambda: fcntl.fcntl(s[0], fcntl.F_SETOWN, os.getpid()))
attempt("listener", lambda: sys_(317, 1, 8, None))
"""
    path = workspace / "signals.py"
    path.write_text(script)
    path.chmod(0o644)
    for only in ("seccomp", "control"):
        output, _ = await run_attack(scall, layered, workspace, only, "python3 signals.py")
        lines = dict(line.split(" ", 1) for line in output.splitlines() if " " in line)
        if only == "control":  # the same calls reach the victim when nothing confines them
            assert lines["pidfd_open"] == "ok" and lines["f_setown"] == "ok", output
            assert lines["listener"] == "EFAULT", output  # (only the NULL program stops it)
            assert await wait_until(lambda: victim.poll() is not None), "the victim survived"
            continue
        for name in ("pidfd_open", "pidfd_send_signal_procfd", "tgkill", "tkill"):
            assert lines[name] == "EPERM", (name, output)
        assert lines["rt_sigqueueinfo"] == "EPERM" and lines["f_setown"] == "EPERM", output
        assert lines["own_pidfd"] == "ok" and lines["own_setown"] == "ok", output
        # A filter with a listener of its own would answer before the supervisor: refused.
        assert lines["listener"] == "EPERM", output
        assert victim.poll() is None, "the victim was killed"
