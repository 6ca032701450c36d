"""The compiled wrapper's first stage (``sandbox-wrapper outer``, ``wrapper_outer.c``), which does
what a Python ``preexec_fn`` did between fork and exec so the executor can start a call with
``vfork``: it must leave the child exactly as :func:`~switchboard_tools.sandbox.process.
outer_preexec` does (cgroup, rlimits, uid, ``no_new_privs``), hold no cgroup descriptor after
it, kill the child when its parent dies, and refuse to run anything when a step fails. Run
directly on the real kernel, no executor, no bubblewrap."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from switchboard_tools.sandbox import LayeredSandbox
from switchboard_tools.sandbox.cgroups import CallCgroup, CgroupLimits, Cgroups, CgroupUnavailable
from switchboard_tools.sandbox.native import outer_args
from switchboard_tools.sandbox.process import OuterLimits, load_prctl, outer_preexec

from .sandbox_checks import SANDBOX_UID, require_root, skip_or_fail
from .wrappers import native_wrapper

# What the child shows of its outer layers: ids, no_new_privs, limits, cgroups, descriptors.
SHOW = (
    "grep -E '^(Uid|Gid|Groups|NoNewPrivs):' /proc/self/status; cat /proc/self/limits; "
    "grep -E ':(memory|pids|):' /proc/self/cgroup; ls /proc/self/fd"
)
LIMITS = OuterLimits(fsize_bytes=3 << 20, nofile=77, address_space_bytes=900 << 20, uid=None)


@pytest.fixture(scope="module")
def wrapper() -> Iterator[str]:
    with native_wrapper() as path:
        yield path


@pytest.fixture
def cgroup() -> Iterator[CallCgroup]:
    require_root("entering a call's cgroup")
    try:
        found = Cgroups.find(CgroupLimits())
    except CgroupUnavailable as exc:
        skip_or_fail(f"cgroups are not writable here: {exc}")
    call = found.create()
    try:
        yield call
    finally:
        call.remove()


def _shown(
    argv: list[str], pass_fds: tuple[int, ...] = (), preexec: Callable[[], None] | None = None
) -> str:
    done = subprocess.run(
        argv,
        pass_fds=pass_fds,
        preexec_fn=preexec,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _limit(shown: str, name: str, value: int) -> bool:
    """``/proc/self/limits`` shows ``name`` with soft and hard limit ``value``."""
    return re.search(rf"^{name}\s+{value}\s+{value}\s", shown, re.MULTILINE) is not None


def test_first_stage_leaves_the_child_as_preexec_did(wrapper: str, cgroup: CallCgroup) -> None:
    """Same ids, ``no_new_privs``, every rlimit, cgroup and open descriptors (the cgroup's
    ``cgroup.procs`` not among them) as the Python ``preexec_fn`` gives, down to the text."""
    limits = OuterLimits(3 << 20, 77, 900 << 20, SANDBOX_UID)
    prctl = load_prctl()
    by_preexec = _shown(
        ["/bin/sh", "-c", SHOW],
        preexec=lambda: outer_preexec(9, cgroup=cgroup, limits=limits, prctl=prctl),
    )
    fds = tuple(cgroup.fds)
    first = outer_args(limits.rlimits(9), cgroup_fds=fds, uid=SANDBOX_UID, parent_pid=None)
    by_wrapper = _shown([wrapper, *first, "--", "/bin/sh", "-c", SHOW], fds)
    assert f"Uid:\t{SANDBOX_UID}\t{SANDBOX_UID}" in by_wrapper, by_wrapper
    assert "NoNewPrivs:\t1" in by_wrapper
    assert _limit(by_wrapper, "Max open files", 77), by_wrapper
    assert cgroup.view and all(path in by_wrapper for path in cgroup.view.values()), by_wrapper
    assert by_wrapper.split()[-4:] == ["0", "1", "2", "3"], by_wrapper  # 3: ls's own
    assert by_wrapper == by_preexec


def test_limits_never_rise_above_the_current_hard_limit(wrapper: str) -> None:
    """A limit asked above the hard one the executor has (which it could not raise) is held
    at that hard limit, as ``lower_limit`` holds it, rather than failing the call."""

    def low_hard() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (50, 50))

    first = outer_args(LIMITS.rlimits(9), cgroup_fds=(), uid=None, parent_pid=None)
    shown = _shown([wrapper, *first, "--", "/bin/sh", "-c", SHOW], preexec=low_hard)
    assert _limit(shown, "Max open files", 50), shown
    assert _limit(shown, "Max file size", 3 << 20), shown
    assert _limit(shown, "Max cpu time", 9), shown
    assert _limit(shown, "Max core file size", 0), shown
    assert _limit(shown, "Max address space", 900 << 20), shown


# The parent of test_child_dies_with_its_parent: starts the first stage with its own pid as
# the parent to die with, running sleep; writes the child's pid; waits to be killed.
PARENT = """
import os, subprocess, sys, time
wrapper, pid_file = sys.argv[1:]
child = subprocess.Popen([wrapper, "outer", f"pdeathsig={os.getpid()}", "--", "/bin/sleep", "60"])
with open(pid_file, "w") as f:
    f.write(str(child.pid))
time.sleep(60)
"""


def test_child_dies_with_its_parent(wrapper: str, tmp_path: Path) -> None:
    """``pdeathsig``: a parent killed outright (no clean-up code runs) takes the child with it."""
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, wrapper, str(pid_file)])
    try:
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline and parent.poll() is None, "no child started"
            time.sleep(0.05)
        child = psutil.Process(int(pid_file.read_text()))
        while child.name() != "sleep":  # past the first stage: the signal is set
            assert time.monotonic() < deadline, child.cmdline()
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        gone, _ = psutil.wait_procs([child], timeout=10)
        assert gone, "the child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_parent_already_gone_runs_nothing(wrapper: str, tmp_path: Path) -> None:
    """Started on behalf of a parent that is not its parent (gone before the signal was set):
    refused, the program never runs."""
    marker = tmp_path / "ran"
    done = subprocess.run(
        [wrapper, "outer", "pdeathsig=1", "--", "/usr/bin/touch", str(marker)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 126 and "the executor is gone" in done.stderr, done
    assert not marker.exists()


@pytest.mark.parametrize(
    ("setting", "code", "message"),
    [
        ("cgroup_fd=987", 126, "entering the call's cgroup: Bad file descriptor"),
        ("rlimit=stack:1", 2, "bad setting: rlimit=stack:1"),
        ("rlimit=nofile:x", 2, "bad setting: rlimit=nofile:x"),
        ("uid=4294967295", 2, "bad setting: uid=4294967295"),
        ("pdeathsig=0", 2, "bad setting: pdeathsig=0"),
        ("uidx=1", 2, "bad setting: uidx=1"),
        ("network=0", 2, "bad setting: network=0"),
    ],
)
def test_a_failing_or_unknown_setting_runs_nothing(
    wrapper: str, tmp_path: Path, setting: str, code: int, message: str
) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run(
        [wrapper, "outer", setting, "--", "/usr/bin/touch", str(marker)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == code and message in done.stderr, done
    assert not marker.exists()


@pytest.mark.parametrize("layered", ["native"], indirect=True)
def test_a_native_call_is_started_without_preexec(layered: LayeredSandbox, workspace: Path) -> None:
    """Under the compiled wrapper the executor's child runs no Python between fork and exec
    (so ``subprocess`` uses ``vfork``): the first stage does that work, and gives a
    child, short-lived or not, its parent-death signal too (a ``run`` outlived a SIGKILLed
    executor when only long-running children had it)."""
    assert layered.layers.wrapper == "native"
    launch = layered._prepare(
        ["true"],
        cwd=workspace,
        timeout_s=5,
        env=None,
        profile=None,
        workspace=None,
        layers=None,
    )
    try:
        assert launch.options.preexec is None and launch.options.user is None
        assert launch.options.sets_parent_death_signal
        assert launch.command[:2] == [layered.layers.native, "outer"]
        first = launch.command[: launch.command.index("--")]
        assert f"pdeathsig={os.getpid()}" in first
        assert layered.drop_uid is None or f"uid={layered.drop_uid}" in first
        if launch.cgroup is not None:
            assert all(f"cgroup_fd={fd}" in first for fd in launch.cgroup.fds)
            assert set(launch.cgroup.fds) <= set(launch.options.pass_fds)
    finally:
        launch.close_fds()
        os.close(launch.report_r)
        launch.release_cgroup()  # nothing ever ran in it: removed at once
