"""Per-call cgroups against the real kernel: a fork bomb is held at ``pids.max``, a memory hog
is OOM-killed at the memory limit, what a call leaves behind (even outside its process group)
is killed with its cgroup, the cgroup is removed, and the executor answers afterwards. The
limits come from real settings (``SB_EXEC_MEMORY_MAX``, ``SB_EXEC_PIDS_MAX``), set low."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.config import ToolsSettings
from switchboard_tools.registry import ToolContext, ToolOutput
from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile

from .sandbox_checks import (
    SANDBOX_UID,
    assert_all_gone,
    sandbox_processes,
    skip_or_fail,
    wait_until,
)

MEMORY_MAX = 96 << 20
PIDS_MAX = 16
Call = Callable[[dict[str, Any]], Awaitable[ToolOutput]]


@pytest.fixture(scope="module")
def limited() -> Iterator[LayeredSandbox]:
    """The executor's sandbox as SB_EXEC_MEMORY_MAX=96M and SB_EXEC_PIDS_MAX=16 make it."""
    settings = ToolsSettings.from_environ(
        {
            "SB_EXEC_MEMORY_MAX": "96M",
            "SB_EXEC_PIDS_MAX": str(PIDS_MAX),
            "SB_EXEC_SANDBOX_UID": str(SANDBOX_UID),
        }
    )
    sandbox = asyncio.run(settings.probe_sandbox())
    if not sandbox.available()["cgroup"]:
        skip_or_fail(f"cgroups are not writable here: {sandbox.layers.status.get('cgroup')}")
    yield sandbox


@pytest.fixture
def sh(limited: LayeredSandbox, ctx: ToolContext) -> Call:
    """exec in sandbox mode (a shell) on the limited sandbox."""
    registry = builtin_registry(limited, exec_mode="sandbox")

    async def call(args: dict[str, Any]) -> ToolOutput:
        return await registry.execute("exec", json.dumps(args), ctx)

    return call


def call_cgroups(sandbox: LayeredSandbox) -> set[Path]:
    """This process's per-call cgroups that exist now."""
    assert sandbox.layers.cgroups is not None
    prefix = f"sb-call-{os.getpid()}-"
    return {
        entry
        for hierarchy in sandbox.layers.cgroups.hierarchies
        for entry in hierarchy.parent.iterdir()
        if entry.name.startswith(prefix)
    }


@pytest.fixture
def before(limited: LayeredSandbox) -> set[Path]:
    """The cgroups of this process before the test (other tests' may still be going)."""
    return call_cgroups(limited)


async def healthy(sh: Call, sandbox: LayeredSandbox, before: set[Path]) -> None:
    """The executor still answers, and every cgroup the test made is removed."""
    out = await sh({"command": "echo ok"})
    assert not out.is_error and out.content == "ok\n", out.content
    assert out.details["isolation"]["cgroup"] is True

    def made() -> set[Path]:
        return call_cgroups(sandbox) - before

    assert await wait_until(lambda: not made()), made()


async def test_call_runs_in_its_own_cgroup(
    sh: Call, limited: LayeredSandbox, before: set[Path]
) -> None:
    out = await sh({"command": "cat /proc/self/cgroup"})
    iso = out.details["isolation"]
    assert iso["cgroup"] is True and iso["ok"], out.content
    assert iso["cgroup_limits"] == {"memory_max": MEMORY_MAX, "pids_max": PIDS_MAX}
    assert iso["cgroup_events"] == {"oom_kill": 0, "pids_max": 0}
    assert limited.attestation()["cgroup"] is True
    await healthy(sh, limited, before)


async def test_fork_bomb_is_held_at_pids_max(
    sh: Call, limited: LayeredSandbox, workspace: Path, before: set[Path]
) -> None:
    # Every process the bomb creates appends a line to ``n`` and never ends by itself: the
    # lines count every process it managed to create, all alive at once.
    assert limited.nproc > PIDS_MAX  # the cgroup, not RLIMIT_NPROC, is what holds it here
    bomb = "bash -c 'f(){ echo x >> n; f & f & exec sleep 60; }; f'"
    out = await sh({"command": bomb, "timeout_s": 5})
    iso = out.details["isolation"]
    assert out.details["timed_out"] and out.is_error
    assert iso["cgroup_events"]["pids_max"] > 0, iso  # forks were refused at the limit
    assert "[process limit reached (16): forks failed]" in out.content, out.content
    created = len((workspace / "n").read_text().splitlines())
    assert 1 <= created < PIDS_MAX, created
    await assert_all_gone(workspace, limited.drop_uid)
    await healthy(sh, limited, before)


async def test_memory_hog_is_killed(
    sh: Call, limited: LayeredSandbox, workspace: Path, before: set[Path]
) -> None:
    # 256 MiB, filled: under the address-space rlimit (1 GiB), over the cgroup's 96 MiB.
    hog = "python3 -c \"b = b'x' * (256 << 20); print('survived')\""
    out = await sh({"command": hog})
    iso = out.details["isolation"]
    assert "survived" not in out.content, out.content
    assert iso["cgroup_events"]["oom_kill"] >= 1, iso
    assert "[killed: out of memory" in out.content, out.content
    # Control: the same command without the cgroup layer allocates it all.
    result = await limited.run(
        ["/bin/sh", "-c", hog],
        cwd=workspace,
        timeout_s=30,
        output_cap=1000,
        layers={"cgroup": False},
    )
    assert "survived" in result.output and result.isolation is not None
    assert result.isolation["cgroup"] is False
    await healthy(sh, limited, before)


async def test_what_left_the_group_dies_with_the_cgroup(
    limited: LayeredSandbox, workspace: Path
) -> None:
    """Without seccomp a command can leave its process group (setsid), out of reach of the
    group kill; the cgroup still holds it. (Namespaces off: with them it dies with the pid
    namespace anyway.) The command returns once the escapee is in its own session."""
    script = (
        "setsid sh -c 'echo $$ > escaped; exec sleep 61' > /dev/null 2>&1 < /dev/null & "
        "while [ ! -s escaped ]; do sleep 0.05; done; echo started"
    )
    off = {"seccomp": False, "namespaces": False}

    async def escape(cgroup: bool) -> int:
        (workspace / "escaped").unlink(missing_ok=True)
        result = await limited.run(
            ["/bin/sh", "-c", script],
            cwd=workspace,
            timeout_s=10,
            output_cap=100,
            layers={**off, "cgroup": cgroup},
            profile=SandboxProfile(network=True),
        )
        assert "started" in result.output and result.isolation is not None, result.output
        assert result.isolation["cgroup"] is cgroup
        return int((workspace / "escaped").read_text())

    pid = await escape(cgroup=True)
    await assert_all_gone(workspace, limited.drop_uid)
    assert not any(p.pid == pid for p in sandbox_processes(workspace))
    # Control: without the cgroup the escaped sleep outlives the call (the test ends it).
    pid = await escape(cgroup=False)
    try:
        assert [p.cmdline() for p in sandbox_processes(workspace) if p.pid == pid] == [
            ["sleep", "61"]
        ]
    finally:
        for proc in sandbox_processes(workspace):
            proc.kill()
    await assert_all_gone(workspace, limited.drop_uid)
