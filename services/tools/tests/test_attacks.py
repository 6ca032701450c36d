"""Attack suite against the executor's tools, run through the registry with the probed layered
sandbox. Every case asserts that the attack failed and that a normal call still works.

Targets are temporary files the sandbox's uid could really read or write if confinement broke
(never real system files). Where a layer is the defence, the attack is also run under each such
layer alone, and once with every confinement layer off: that control run must succeed, which
shows the attack is real and the test can fail."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile

from .executor_procs import ExecutorProcesses, ToolBus
from .sandbox_checks import (
    KILL_GRACE_MS,
    SANDBOX_UID,
    assert_all_gone,
    environ_of,
    host_targets,
    require_root,
    root_only_targets,
)

Need = Callable[..., None]
SECRET = "sb-test-secret-7f3a9c"
# The layers that can confine a command (the uid and rlimits stay in force in every run).
CONFINEMENT = ("namespaces", "landlock", "seccomp")
# How a filesystem attack is run: None = through the exec tool with everything this host has;
# a layer name = under that layer alone; "control" = with every confinement layer off.
FS_RUNS = [None, "namespaces", "landlock", "control"]


async def healthy(*calls: Any) -> None:
    """The executor still answers: ``echo ok`` through each of ``calls`` (lcall, scall...)."""
    for call in calls:
        out = await call("exec", {"command": "echo ok"})
        assert not out.is_error and out.content == "ok\n", out.content


async def attack(
    scall: Any,
    layered: LayeredSandbox,
    workspace: Path,
    need: Need,
    only: str | None,
    command: str,
) -> str:
    """Run the shell ``command`` in the sandbox as ``only`` says (see FS_RUNS); its output."""
    if only is None:
        out = await scall("exec", {"command": command})
        assert out.details["isolation"]["measured"], out.content
        return str(out.content)
    if only != "control":
        need(only)
    layers = {name: name == only for name in CONFINEMENT}
    result = await layered.run(
        ["/bin/sh", "-c", command],
        cwd=workspace,
        timeout_s=10,
        output_cap=10000,
        profile=SandboxProfile(network=True),  # the network is not what is attacked here
        layers=layers,
    )
    iso = result.isolation or {}
    assert {name: iso[name] for name in CONFINEMENT} == layers  # measured: exactly these
    return result.output


# -- filesystem ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../../../../etc/passwd", "/etc/passwd", "sub/../../x"])
async def test_read_and_write_outside(lcall: Any, path: str) -> None:
    out = await lcall("read", {"path": path})
    assert out.is_error and "outside the workspace" in out.content
    out = await lcall("write", {"path": path, "content": "pwned"})
    assert out.is_error and "outside the workspace" in out.content
    await healthy(lcall)


async def test_planted_symlinks(lcall: Any, workspace: Path) -> None:
    # The read/write tools run in the executor itself: only their path check stands between
    # them and the (existing, readable, writable) targets.
    with host_targets() as host:
        (workspace / "file-link").symlink_to(host.readable)
        (workspace / "dir-link").symlink_to(host.writable_dir)
        for path in ("file-link", "dir-link/existing.txt"):
            out = await lcall("read", {"path": path})
            assert out.is_error and "outside the workspace" in out.content, out.content
            assert host.READABLE_TEXT not in out.content
            assert host.WRITABLE_TEXT.strip() not in out.content
        for path in ("file-link", "dir-link/existing.txt", "dir-link/new.txt"):
            out = await lcall("write", {"path": path, "content": "pwned"})
            assert out.is_error and "outside the workspace" in out.content, out.content
        assert host.untouched()
    await healthy(lcall)


@pytest.mark.parametrize("only", FS_RUNS)
async def test_planted_symlinks_from_the_shell(
    lcall: Any, scall: Any, layered: LayeredSandbox, workspace: Path, need: Need, only: str | None
) -> None:
    with host_targets() as host:
        (workspace / "file-link").symlink_to(host.readable)
        (workspace / "dir-link").symlink_to(host.writable_dir)
        command = (
            "cat file-link; cat dir-link/existing.txt; "
            "echo pwned > dir-link/new.txt; echo pwned >> dir-link/existing.txt"
        )
        output = await attack(scall, layered, workspace, need, only, command)
        if only == "control":  # nothing confines the command: the links lead to the targets
            assert host.READABLE_TEXT in output and host.WRITABLE_TEXT in output, output
            assert (host.writable_dir / "new.txt").read_text() == "pwned\n"
            assert host.writable.read_text() == host.WRITABLE_TEXT + "pwned\n"
        else:  # the targets are not mounted / not allowed by Landlock
            assert host.READABLE_TEXT not in output and host.WRITABLE_TEXT not in output
            assert host.untouched(), output
    await healthy(lcall, scall)


@pytest.mark.parametrize("only", FS_RUNS)
async def test_shell_cannot_touch_host_files(
    lcall: Any, scall: Any, layered: LayeredSandbox, workspace: Path, need: Need, only: str | None
) -> None:
    with host_targets() as host:
        command = (
            f"cat {host.readable}; echo pwned > {host.writable_dir}/planted; "
            f"echo pwned >> {host.writable}"
        )
        output = await attack(scall, layered, workspace, need, only, command)
        if only == "control":  # the same attack, nothing confining it: it works
            assert host.READABLE_TEXT in output, output
            assert (host.writable_dir / "planted").read_text() == "pwned\n"
            assert host.writable.read_text() == host.WRITABLE_TEXT + "pwned\n"
        else:
            assert host.READABLE_TEXT not in output
            assert host.untouched(), output
    await healthy(lcall, scall)


async def test_uid_drop_keeps_files_only_root_may_touch(
    layered: LayeredSandbox, workspace: Path
) -> None:
    """What the audit's /etc/shadow and /etc/x stood for, on temporary targets: a file only
    root may read and a directory only root may write, reached with every confinement layer
    off, so that only the sandbox's uid stands in between."""
    require_root("the uid drop")
    with root_only_targets() as host:
        command = f"id -u; cat {host.private}; echo pwned > {host.closed}/planted"
        argv = ["/bin/sh", "-c", command]
        off = {name: False for name in CONFINEMENT}
        network = SandboxProfile(network=True)
        result = await layered.run(
            argv, cwd=workspace, timeout_s=10, output_cap=10000, profile=network, layers=off
        )
        assert result.output.split()[0] == str(SANDBOX_UID), result.output
        assert host.PRIVATE_TEXT not in result.output
        assert not (host.closed / "planted").exists()

        # Control: the same sandbox keeping the executor's uid (root) does both.
        as_root = LayeredSandbox(uid=None)
        as_root.layers = layered.layers
        result = await as_root.run(
            argv, cwd=workspace, timeout_s=10, output_cap=10000, profile=network, layers=off
        )
        assert result.output.split()[0] == "0", result.output
        assert host.PRIVATE_TEXT in result.output
        assert (host.closed / "planted").read_text() == "pwned\n"


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
    layered: LayeredSandbox, workspace: Path, need: Need, scall: Any, only: str | None
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
            out = await scall("exec", {"command": f'python3 -c "{script}"'})
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
    await healthy(scall)


# -- resources ----------------------------------------------------------------------------


async def test_fork_bomb(scall: Any, layered: LayeredSandbox, workspace: Path) -> None:
    # Every process the bomb creates appends a line to ``n`` and never ends by itself (bash
    # retries a failed fork, then execs a sleep), so the lines count every process it ever
    # managed to create -- and, since none exited, how many ran at once.
    bomb = "bash -c 'f(){ echo x >> n; f & f & exec sleep 60; }; f'"
    out = await scall("exec", {"command": bomb, "timeout_s": 5})
    iso = out.details["isolation"]
    assert iso["rlimits"]["nproc"] == layered.nproc
    assert out.details["timed_out"] and out.is_error
    assert "Resource temporarily unavailable" in out.content  # it ran into the limit
    created = len((workspace / "n").read_text().splitlines())
    assert 1 <= created <= layered.nproc, created
    await assert_all_gone(workspace, layered.drop_uid)  # killed and reaped
    await healthy(scall)
    # RLIMIT_NPROC does not hold root back: the limit above holds because of the uid drop.
    require_root("the fork bomb's uid")
    assert iso["uid"] == SANDBOX_UID


async def test_cpu_spin(scall: Any, layered: LayeredSandbox, workspace: Path) -> None:
    out = await scall("exec", {"command": "while :; do :; done", "timeout_s": 1.5})
    assert out.is_error and out.details["timed_out"]
    assert out.details["duration_ms"] <= 1500 + KILL_GRACE_MS, out.details["duration_ms"]
    await assert_all_gone(workspace, layered.drop_uid)
    await healthy(scall)


async def test_memory_balloon(scall: Any) -> None:
    out = await scall("exec", {"command": "python3 -c 'b = bytearray(3 * 1024**3)'"})
    assert out.is_error and "MemoryError" in out.content
    await healthy(scall)


async def test_huge_output(scall: Any) -> None:
    out = await scall("exec", {"command": "head -c 100000000 /dev/zero"})
    assert out.details["truncated"] and len(out.content) < 70 * 1024
    # Killed once the drain limit was read (head would otherwise exit 0 after 100 MB), and
    # not by its timeout.
    assert out.details["exit_code"] == -9 and not out.details["timed_out"]
    await healthy(scall)


async def test_sleep_past_timeout(lcall: Any, layered: LayeredSandbox, workspace: Path) -> None:
    out = await lcall("exec", {"command": "sleep 30", "timeout_s": 1})
    assert out.is_error and out.details["timed_out"] and "[timed out after 1s]" in out.content
    assert out.details["duration_ms"] <= 1000 + KILL_GRACE_MS, out.details["duration_ms"]
    await assert_all_gone(workspace, layered.drop_uid)
    await healthy(lcall)


async def test_escaping_the_process_group(scall: Any, need: Need) -> None:
    need("seccomp")
    out = await scall("exec", {"command": "setsid sleep 60; echo rc=$?"})
    assert "rc=1" in out.content and "Operation not permitted" in out.content
    out = await scall("exec", {"command": "unshare -r id; echo rc=$?"})
    assert "uid=0" not in out.content and "rc=1" in out.content
    await healthy(scall)


# -- secrets ------------------------------------------------------------------------------


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "without-namespaces"])
async def test_environment_secrets(nats_url: str, namespaces: bool) -> None:
    # A real executor process with the secret in the environment it was started with.
    env = {"SB_FAKE_API_KEY": SECRET, "SB_EXEC_MODE": "sandbox"}
    if not namespaces:  # no bubblewrap on its PATH: the probe finds no namespace layer, and
        env["PATH"] = str(Path(sys.executable).parent)  # the executor's /proc is visible
    client = await ToolBus.connect(nats_url)  # creates the streams the executor waits for
    try:
        async with ExecutorProcesses(nats_url, env) as executors:
            executor = await executors.start("tools-secrets")
            # Control: the secret really is in the executor's environment as the kernel shows it.
            assert SECRET.encode() in environ_of(executor.pid)
            await client.listen("sb.tools.result.>")
            command = (
                f"env; cat /proc/{executor.pid}/environ; cat /proc/$PPID/environ; "
                "cat /proc/*/environ; grep -r sb-test-secret /proc/*/environ"
            )
            result = await client.call("exec", {"command": command})
            isolation = json.loads(result.isolation_json)
            assert isolation["measured"] and isolation["namespaces"] is namespaces
            assert SECRET not in result.content
            if not namespaces:  # there, but not readable
                assert f"/proc/{executor.pid}/environ: Permission denied" in result.content
            result = await client.call("exec", {"command": "env"})
            assert not result.is_error and SECRET not in result.content
            assert "PATH=/usr/local/bin" in result.content, result.content  # it did run
    finally:
        await client.close()
