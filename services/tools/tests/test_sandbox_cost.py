"""What keeps a sandboxed call cheap (issue 25), against the real interpreter and kernel: the
per-call wrapper interpreter imports no costly module on its way to ``exec`` (and forks no
``ldconfig`` to find libseccomp) while still putting seccomp and Landlock in force, the lookup
of libseccomp still works where the soname is not found directly, the orphan reaps that calls
ask for at about the same time are merged without ever running early, an empty call cgroup is
removed without an orphan scan, and that scan reads this process's descendants only."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from switchboard_tools.sandbox import cgroups as cgroups_mod
from switchboard_tools.sandbox import coalesce, inner, inner_seccomp, orphans
from switchboard_tools.sandbox.cgroups import CgroupLimits, Cgroups, CgroupUnavailable
from switchboard_tools.sandbox.launch import DEV_FILES, INNER_SOURCE, SYSTEM_RO
from switchboard_tools.sandbox.probe import PYTHON_CANDIDATES

from .sandbox_checks import skip_or_fail

# Modules that cost the wrapper interpreter milliseconds each (measured with -X importtime:
# ctypes.util alone pulls in subprocess, shutil, tempfile and forks ``ldconfig -p``).
COSTLY = {"typing", "ctypes.util", "subprocess", "shutil", "tempfile", "socket", "contextlib"}


def _python() -> str:
    """The interpreter the sandbox's probe picks first on this host."""
    for candidate in PYTHON_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


def test_wrapper_imports_nothing_costly_and_still_confines(tmp_path: Path) -> None:
    """The real wrapper program, run as the sandbox runs it (``-I -S -c``) with seccomp and
    Landlock asked for, reports both in force and imports none of :data:`COSTLY` before it
    execs the command (``-X importtime`` lists every import on stderr)."""
    report_r, report_w = os.pipe()
    cfg = {
        "report_fd": report_w,
        "seccomp": True,
        "landlock": True,
        "network": False,
        "ro": list(SYSTEM_RO),
        "rw": [str(tmp_path)],
        "dev": list(DEV_FILES),
        "require": ["landlock", "seccomp"],
        "require_any": [],
        "nproc": 0,
    }
    argv = [_python(), "-I", "-S", "-X", "importtime", "-c", INNER_SOURCE, json.dumps(cfg), "true"]
    try:
        done = subprocess.run(
            argv, pass_fds=(report_w,), capture_output=True, text=True, timeout=30, check=False
        )
    finally:
        os.close(report_w)
    with os.fdopen(report_r) as reader:
        report = json.loads(reader.read())
    if report.get("errors"):
        skip_or_fail(f"seccomp or Landlock cannot be applied here: {report['errors']}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert report["ok"] and report["seccomp"] and report["landlock"], report
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "ctypes" in imported, done.stderr[-2000:]  # the listing is real
    assert not imported & COSTLY, sorted(imported & COSTLY)


def test_libseccomp_found_without_its_soname(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where ``libseccomp.so.2`` cannot be loaded by that name, the library is still found
    (through ``ctypes.util.find_library``), so seccomp does not silently go missing."""
    try:
        inner_seccomp._library()
    except OSError as exc:
        skip_or_fail(f"libseccomp is not installed here: {exc}")
    monkeypatch.setattr(inner_seccomp, "_LIBSECCOMP", "libseccomp-not-this-name.so.0")
    assert inner_seccomp._library().seccomp_init is not None


def test_pidfd_target_of_a_proc_directory() -> None:
    """A ``/proc/<pid>`` directory descriptor names that pid; any other descriptor, none (the
    supervisor then refuses the signal)."""
    me = os.getpid()
    proc_fd = os.open(f"/proc/{me}", os.O_RDONLY | os.O_DIRECTORY)
    other_fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        assert inner_seccomp._pidfd_target(me, proc_fd) == me
        assert inner_seccomp._pidfd_target(me, other_fd) == 0
        assert inner_seccomp._pidfd_target(me, 10**6) == 0  # no such descriptor
    finally:
        os.close(proc_fd)
        os.close(other_fd)
    assert inner.cgroup_view()  # the wrapper's own reading of /proc/self/cgroup still works


async def test_reaps_asked_together_run_once_and_never_early() -> None:
    loop = asyncio.get_running_loop()
    runs: list[float] = []

    def reap() -> None:
        runs.append(loop.time())

    asked = loop.time()
    assert coalesce.call_coalesced(0.2, reap) is True
    assert coalesce.call_coalesced(0.2, reap) is False  # served by the first one
    assert coalesce.call_coalesced(1.0, reap) is True  # far later: a run of its own
    await asyncio.sleep(0.6)
    early = 0.001  # asyncio runs a timer up to its clock resolution before it is due
    assert len(runs) == 1 and runs[0] >= asked + 0.2 - early, runs
    await asyncio.sleep(1.0)
    assert len(runs) == 2 and runs[1] >= asked + 1.0 - early, runs


def test_a_new_loop_does_not_count_on_the_timers_of_a_closed_one() -> None:
    """Each test gets its own loop: a run scheduled on a loop that is gone never happens, so it
    must not stand in for a run asked on the next loop."""
    runs: list[int] = []

    async def ask() -> bool:
        return coalesce.call_coalesced(5.0, lambda: runs.append(1))

    assert asyncio.run(ask()) is True
    assert asyncio.run(ask()) is True


def test_empty_call_cgroup_is_removed_without_scanning_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Removing a call's cgroup that nothing holds any more runs no orphan scan (it runs only
    when the removal fails)."""
    if os.geteuid() != 0:
        skip_or_fail("per-call cgroups need root here")
    try:
        found = Cgroups.find(CgroupLimits())
    except CgroupUnavailable as exc:
        skip_or_fail(f"cgroups are not writable here: {exc}")
    scans: list[int] = []
    real = cgroups_mod.reap_orphans

    def counted() -> int:
        scans.append(1)
        return real()

    monkeypatch.setattr(cgroups_mod, "reap_orphans", counted)
    call = found.create()
    call.close_fds()
    assert call.remove() is True
    assert not any(d.exists() for d in call.dirs)
    assert scans == []


def test_orphan_scan_reads_only_this_process_s_descendants() -> None:
    """The orphan reaps read this process's descendants, never every process of the host: a
    grandchild whose parent exited (ours, as the subreaper) is found, judged still dying while
    it runs and reaped once it has exited; no process outside our tree is read."""
    if not orphans.become_subreaper():
        skip_or_fail("prctl(PR_SET_CHILD_SUBREAPER) is not available here")
    since = orphans.boot_ticks()
    started = subprocess.run(
        ["sh", "-c", "sleep 0.5 & echo $!"], capture_output=True, text=True, check=True
    )
    orphan = int(started.stdout)
    procs = orphans._scan()
    assert procs[orphan][1] == os.getpid(), procs  # reparented to us
    assert 1 not in procs and os.getppid() not in procs, sorted(procs)
    assert all(_descends_from_us(pid) for pid in procs), procs
    assert orphans._dying(procs, since, own=0)
    deadline = time.monotonic() + 20
    while procs.get(orphan, (b"",))[0] != b"Z":  # exited, not reaped: our zombie
        assert time.monotonic() < deadline, procs.get(orphan)
        time.sleep(0.05)
        procs = orphans._scan()
    assert orphans.reap_orphans() >= 1
    assert not os.path.exists(f"/proc/{orphan}")
    assert orphan not in orphans._scan()


def _descends_from_us(pid: int) -> bool:
    me = os.getpid()
    while pid not in (0, 1, me):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except FileNotFoundError:
            return True  # gone meanwhile: nothing left to check
    return pid == me
