from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from switchboard_tools.sandbox import ProcessSandbox, Sandbox

from .sandbox_checks import KILL_GRACE_MS, wait_until


def _alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie waiting for a reaper counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def test_protocol_and_attestation(tmp_path: Path) -> None:
    sandbox = ProcessSandbox()
    assert isinstance(sandbox, Sandbox)
    att = sandbox.attestation()
    json.dumps(att)
    assert att["sandbox"] == "process"
    assert att["process_group"] is True
    assert set(att["rlimits"]) >= {"cpu", "fsize", "nofile"}
    assert att["namespaces"] is False and att["seccomp"] is False and att["landlock"] is False
    assert att["network"] is True
    assert att["workspace_confined"] is False  # honest: only cwd and argument checks
    # The uid it attests is the one a command really runs as (this sandbox keeps the
    # executor's own uid, so an attestation claiming a dropped uid would be caught here).
    result = await sandbox.run(["id", "-u"], cwd=tmp_path, timeout_s=5, output_cap=100)
    assert result.exit_code == 0 and int(result.output) == att["uid"], result.output


async def test_basic_run(tmp_path: Path) -> None:
    result = await ProcessSandbox().run(
        ["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout_s=5, output_cap=1000
    )
    assert result.exit_code == 3
    assert result.output == "out\nerr\n"
    assert not result.truncated and not result.timed_out


async def test_env_not_inherited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_TEST_SECRET", "s3cr3t")
    result = await ProcessSandbox().run(
        ["env"], cwd=tmp_path, timeout_s=5, output_cap=10000, env={"EXTRA": "1"}
    )
    assert "s3cr3t" not in result.output
    assert sorted(result.output.splitlines()) == [
        "EXTRA=1",
        f"HOME={tmp_path}",
        "LANG=C.UTF-8",
        "PATH=/usr/local/bin:/usr/bin:/bin",
    ]


async def test_stdin_is_devnull(tmp_path: Path) -> None:
    result = await ProcessSandbox().run(["cat"], cwd=tmp_path, timeout_s=5, output_cap=100)
    assert result.exit_code == 0 and result.output == ""


def _group(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and _alive(pid):
                members.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return members


async def test_timeout_kills_whole_group(tmp_path: Path) -> None:
    result = await ProcessSandbox().run(
        ["sh", "-c", "echo $$; sleep 60 & echo $!; sleep 60"],
        cwd=tmp_path,
        timeout_s=1,
        output_cap=1000,
    )
    assert result.timed_out and result.exit_code is None
    # Killed at its timeout, not when the 60 s sleeps would have ended.
    assert result.duration_ms <= 1000 + KILL_GRACE_MS, result.duration_ms
    shell, background = (int(pid) for pid in result.output.split())  # the group's leader
    assert await wait_until(lambda: not _group(shell)), _group(shell)
    assert not _alive(background) and not _alive(shell)


async def test_leftover_background_process_killed(tmp_path: Path) -> None:
    result = await ProcessSandbox(exit_grace_s=0.2).run(
        ["sh", "-c", "sleep 60 & echo $!"], cwd=tmp_path, timeout_s=10, output_cap=1000
    )
    assert result.exit_code == 0 and not result.timed_out
    # Ended once the grace after the exit was over, not at the 10 s timeout, although the
    # leftover still held the output pipe open.
    assert result.duration_ms <= 200 + KILL_GRACE_MS < 10_000, result.duration_ms
    child = int(result.output.split()[0])
    assert await wait_until(lambda: not _alive(child)), f"leftover {child} survived"


async def test_output_cap_and_drain(tmp_path: Path) -> None:
    result = await ProcessSandbox().run(
        ["sh", "-c", "head -c 500000 /dev/zero | tr '\\0' x; echo done >&2"],
        cwd=tmp_path,
        timeout_s=10,
        output_cap=1000,
    )
    assert result.exit_code == 0
    assert result.truncated
    assert result.output == "x" * 1000


async def test_endless_output_is_stopped(tmp_path: Path) -> None:
    result = await ProcessSandbox(drain_limit_bytes=1 << 20).run(
        ["yes"], cwd=tmp_path, timeout_s=20, output_cap=100
    )
    # Killed (SIGKILL) by the drain limit, long before its 20 s timeout.
    assert result.truncated and not result.timed_out and result.duration_ms < 20_000
    assert result.exit_code == -9
    assert result.output == "y\n" * 50


async def test_rlimits_in_force(tmp_path: Path) -> None:
    script = (
        "import resource as r;"
        "print(r.getrlimit(r.RLIMIT_CPU)[0], r.getrlimit(r.RLIMIT_FSIZE)[0],"
        " r.getrlimit(r.RLIMIT_NOFILE)[0], r.getrlimit(r.RLIMIT_CORE)[0])"
    )
    result = await ProcessSandbox(fsize_bytes=4096, nofile=32).run(
        [sys.executable, "-c", script], cwd=tmp_path, timeout_s=5, output_cap=1000
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["6", "4096", "32", "0"]


async def test_file_size_limit(tmp_path: Path) -> None:
    result = await ProcessSandbox(fsize_bytes=4096).run(
        ["sh", "-c", "head -c 100000 /dev/zero > big"], cwd=tmp_path, timeout_s=5, output_cap=1000
    )
    assert result.exit_code != 0
    assert (tmp_path / "big").stat().st_size <= 4096


async def test_no_new_privs(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("linux only")
    result = await ProcessSandbox().run(
        ["grep", "NoNewPrivs", "/proc/self/status"], cwd=tmp_path, timeout_s=5, output_cap=1000
    )
    assert result.output.split() == ["NoNewPrivs:", "1"]


async def test_command_not_found(tmp_path: Path) -> None:
    result = await ProcessSandbox().run(
        ["no-such-program-xyz"], cwd=tmp_path, timeout_s=5, output_cap=1000
    )
    assert result.exit_code == 127
    assert "command not found" in result.output


async def test_cancellation_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(
        ProcessSandbox().run(
            ["sh", "-c", f"echo $$ > {pidfile}; sleep 60"],
            cwd=tmp_path,
            timeout_s=30,
            output_cap=1000,
        )
    )
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.02)
    pid = int(pidfile.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_until(lambda: not _alive(pid)), f"{pid} survived the cancel"


async def test_no_fd_leak(tmp_path: Path) -> None:
    sandbox = ProcessSandbox()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        await sandbox.run(["true"], cwd=tmp_path, timeout_s=5, output_cap=10)
        await sandbox.run(["no-such-program-xyz"], cwd=tmp_path, timeout_s=5, output_cap=10)
    await sandbox.run(["sleep", "5"], cwd=tmp_path, timeout_s=0.1, output_cap=10)
    assert len(os.listdir("/proc/self/fd")) <= before + 2
