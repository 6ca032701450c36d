"""Attack suite against the executor's tools, run through the registry with the probed layered
sandbox. Every case asserts that the attack failed and that a normal call still works."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile

Need = Callable[..., None]
SECRET = "sb-test-secret-7f3a9c"


async def healthy(lcall: Any) -> None:
    out = await lcall("exec", {"command": "echo ok", "mode": "sandbox"})
    assert not out.is_error and out.content == "ok\n", out.content
    out = await lcall("exec", {"command": "echo ok"})
    assert not out.is_error and out.content == "ok\n", out.content


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _uid_processes(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


# -- filesystem ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../../../../etc/passwd", "/etc/passwd", "sub/../../x"])
async def test_read_and_write_outside(lcall: Any, path: str) -> None:
    out = await lcall("read", {"path": path})
    assert out.is_error and "outside the workspace" in out.content
    out = await lcall("write", {"path": path, "content": "pwned"})
    assert out.is_error and "outside the workspace" in out.content
    await healthy(lcall)


async def test_planted_symlinks(lcall: Any, workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    target.write_text("private")
    (workspace / "file-link").symlink_to(target)
    (workspace / "dir-link").symlink_to(tmp_path)
    for path in ("file-link", "dir-link/outside.txt", "dir-link/new.txt"):
        assert (await lcall("read", {"path": path})).is_error
        assert (await lcall("write", {"path": path, "content": "pwned"})).is_error
    assert target.read_text() == "private" and not (tmp_path / "new.txt").exists()
    # From a shell the link leads nowhere: the target is not mounted / not landlock-allowed.
    out = await lcall(
        "exec", {"command": "cat file-link; echo x > dir-link/new.txt", "mode": "sandbox"}
    )
    assert "private" not in out.content and not (tmp_path / "new.txt").exists()
    await healthy(lcall)


async def test_shell_cannot_touch_host_files(lcall: Any, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    secret.chmod(0o644)
    command = f"cat {secret}; cat /etc/shadow; echo pwned > {tmp_path}/planted; echo x > /etc/x"
    out = await lcall("exec", {"command": command, "mode": "sandbox"})
    assert "host secret" not in out.content and "root:" not in out.content
    assert not (tmp_path / "planted").exists() and not _exists("/etc/x")
    await healthy(lcall)


# -- allowlist mode -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "echo hi; cat /etc/passwd",
        "echo $(id)",
        "echo `id`",
        "echo hi | sh",
        "echo hi > /tmp/x",
        "echo hi\ncat /etc/passwd",
        "cat /etc/passwd",
        "cat ../../../etc/passwd",
        "/bin/sh -c id",
        "sh -c id",
        "sort --compress-program=sh x",
        "sort --compress=sh x",
        "wc --files0-from=/etc/passwd",
        "date -s 2000-01-01",
        "grep -r root /etc",
        "cat -- /etc/passwd",
        "head -n1 -- ../../etc/passwd",
    ],
)
async def test_allowlist_injection(lcall: Any, command: str) -> None:
    out = await lcall("exec", {"command": command})
    assert out.is_error and out.content.startswith("Command refused"), out.content
    assert "root:" not in out.content
    await healthy(lcall)


# -- network ------------------------------------------------------------------------------


@pytest.mark.parametrize("only", [None, "namespaces", "seccomp", "landlock"])
async def test_network_from_sandbox_mode(
    layered: LayeredSandbox, workspace: Path, need: Need, lcall: Any, only: str | None
) -> None:
    if only is not None:
        need(only)
    accepted: list[bool] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(True)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    script = (
        f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')"
    )
    try:
        if only is None:  # everything in force, through the tool
            out = await lcall("exec", {"command": f'python3 -c "{script}"', "mode": "sandbox"})
            output, iso = out.content, out.details["isolation"]
        else:  # each layer alone must stop it
            layers = {name: name == only for name in ("namespaces", "seccomp", "landlock")}
            result = await layered.run(
                ["python3", "-c", script],
                cwd=workspace,
                timeout_s=10,
                output_cap=10000,
                profile=SandboxProfile(network=False),
                layers=layers,
            )
            output, iso = result.output, result.isolation or {}
    finally:
        server.close()
        await server.wait_closed()
    assert "CONNECTED" not in output and not accepted, output
    assert iso["network"] is False
    await healthy(lcall)


# -- resources ----------------------------------------------------------------------------


async def test_fork_bomb(lcall: Any, layered: LayeredSandbox) -> None:
    started = time.monotonic()
    out = await lcall(
        "exec", {"command": "f(){ f|f& }; f; wait", "mode": "sandbox", "timeout_s": 5}
    )
    assert time.monotonic() - started < 8
    assert out.details["isolation"]["rlimits"]["nproc"] == layered.nproc
    await healthy(lcall)
    if layered.drop_uid is not None:
        for _ in range(40):  # killed and reaped: nothing of the sandbox uid is left
            if not _uid_processes(layered.drop_uid):
                break
            await asyncio.sleep(0.1)
        assert _uid_processes(layered.drop_uid) == []


async def test_cpu_spin(lcall: Any) -> None:
    started = time.monotonic()
    out = await lcall(
        "exec", {"command": "while :; do :; done", "mode": "sandbox", "timeout_s": 1.5}
    )
    assert out.is_error and out.details["timed_out"]
    assert time.monotonic() - started < 4
    await healthy(lcall)


async def test_memory_balloon(lcall: Any) -> None:
    out = await lcall(
        "exec", {"command": "python3 -c 'b = bytearray(3 * 1024**3)'", "mode": "sandbox"}
    )
    assert out.is_error and "MemoryError" in out.content
    await healthy(lcall)


async def test_huge_output(lcall: Any) -> None:
    started = time.monotonic()
    out = await lcall("exec", {"command": "head -c 100000000 /dev/zero", "mode": "sandbox"})
    assert out.details["truncated"] and len(out.content) < 70 * 1024
    assert time.monotonic() - started < 5
    await healthy(lcall)


async def test_sleep_past_timeout(lcall: Any) -> None:
    started = time.monotonic()
    out = await lcall("exec", {"command": "sleep 30", "timeout_s": 1})
    assert out.is_error and out.details["timed_out"] and "[timed out after 1s]" in out.content
    assert time.monotonic() - started < 3
    await healthy(lcall)


async def test_escaping_the_process_group(lcall: Any, need: Need) -> None:
    need("seccomp")
    out = await lcall("exec", {"command": "setsid sleep 60; echo rc=$?", "mode": "sandbox"})
    assert "rc=1" in out.content and "Operation not permitted" in out.content
    out = await lcall("exec", {"command": "unshare -r id; echo rc=$?", "mode": "sandbox"})
    assert "uid=0" not in out.content and "rc=1" in out.content
    await healthy(lcall)


# -- secrets ------------------------------------------------------------------------------


async def test_environment_secrets(lcall: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_FAKE_API_KEY", SECRET)
    command = (
        f"env; cat /proc/{os.getpid()}/environ; cat /proc/$PPID/environ; "
        "cat /proc/*/environ; grep -r sb-test-secret /proc/*/environ"
    )
    out = await lcall("exec", {"command": command, "mode": "sandbox"})
    assert SECRET not in out.content
    out = await lcall("exec", {"command": "env"})
    assert SECRET not in out.content
    await healthy(lcall)


async def test_environment_secrets_without_namespaces(
    layered: LayeredSandbox, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even where the executor's /proc is visible, its environ is not readable.
    monkeypatch.setenv("SB_FAKE_API_KEY", SECRET)
    result = await layered.run(
        ["cat", f"/proc/{os.getpid()}/environ"],
        cwd=workspace,
        timeout_s=5,
        output_cap=10000,
        layers={"namespaces": False},
    )
    assert SECRET not in result.output and result.exit_code != 0
