"""The process tool in one executor: start/poll/kill/list under the layered sandbox, limits,
agent scoping and shutdown. Cross-replica forwarding is in test_executor_bus.py."""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.procs import ProcessLimits, ProcessManager
from switchboard_tools.registry import ToolContext, ToolOutput
from switchboard_tools.sandbox import LayeredSandbox
from switchboard_tools.tools.exec import DEFAULT_EXEC_ALLOWLIST

Call = Callable[..., Awaitable[ToolOutput]]
LIMITS = ProcessLimits(max_per_agent=2, max_lifetime_s=30.0, output_cap=2048)


@pytest.fixture
async def manager(layered: LayeredSandbox) -> AsyncIterator[ProcessManager]:
    processes = ProcessManager(layered, LIMITS)
    try:
        yield processes
    finally:
        await processes.shutdown()


@pytest.fixture
def pcall(manager: ProcessManager, ctx: ToolContext) -> Call:
    """Like ``lcall``: the builtin registry on the probed layered sandbox, with ``manager``."""
    registry = builtin_registry(
        manager.sandbox, [*DEFAULT_EXEC_ALLOWLIST, "sleep"], processes=manager, exec_mode="sandbox"
    )

    async def _call(args: dict[str, Any], **overrides: Any) -> ToolOutput:
        context = ToolContext(**{**ctx.__dict__, **overrides}) if overrides else ctx
        return await registry.execute("process", json.dumps(args), context)

    return _call


async def start(pcall: Call, command: str, **extra: Any) -> str:
    args = {"action": "start", "command": command, "wait_s": 0, **extra}
    out = await pcall(args)
    assert not out.is_error, out.content
    assert out.details["isolation"]["measured"] and out.details["isolation"]["ok"]
    handle: str = out.details["handle"]
    return handle


async def poll_until_done(pcall: Call, handle: str, limit_s: float = 10.0) -> tuple[str, dict]:
    text = ""
    for _ in range(int(limit_s / 0.5) + 1):
        out = await pcall({"action": "poll", "handle": handle, "wait_s": 0.5})
        assert not out.is_error, out.content
        text += out.details["output"]
        if not out.details["running"]:
            return text, out.details
    raise AssertionError(f"{handle} still running: {text!r}")


def marked_processes(marker: str) -> list[int]:
    """Processes (any uid, any namespace) whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


async def test_start_poll_until_exit(pcall: Call) -> None:
    handle = await start(pcall, "for i in 1 2 3; do echo tick $i; sleep 0.2; done; exit 3")
    assert handle.startswith("p_")
    text, final = await poll_until_done(pcall, handle)
    assert text == "tick 1\ntick 2\ntick 3\n"  # every line exactly once across polls
    assert final["status"] == "exited" and final["exit_code"] == 3
    out = await pcall({"action": "poll", "handle": handle})
    assert "exited with code 3" in out.content and "(no new output)" in out.content


async def test_start_waits_for_quick_commands(pcall: Call) -> None:
    out = await pcall({"action": "start", "command": "echo hello", "wait_s": 5})
    assert not out.is_error and out.details["status"] == "exited"
    assert out.content.endswith("hello") and "exited with code 0" in out.content


async def test_allowlist_mode_is_checked_like_exec(
    pcall: Call, manager: ProcessManager, ctx: ToolContext
) -> None:
    registry = builtin_registry(manager.sandbox, processes=manager)  # SB_EXEC_MODE=allowlist
    for command, refusal in [
        ("rm -rf /", "'rm' is not allowed"),
        ("cat ../../etc/passwd", "outside the workspace"),
        ("sort -uo/tmp/sb-never x", "outside the workspace"),
        ("sh -c 'echo hi'", "'sh' is not allowed"),
    ]:
        start = json.dumps({"action": "start", "command": command})
        out = await registry.execute("process", start, ctx)
        assert out.is_error and refusal in out.content, (command, out.content)
    # The caller cannot pick the mode: it is not an argument (exec's neither).
    for tool, extra in [("process", {"action": "start"}), ("exec", {})]:
        args = {**extra, "command": "echo $((6*7)) | cat", "mode": "sandbox"}
        out = await registry.execute(tool, json.dumps(args), ctx)
        assert out.is_error and out.details["error"] == "invalid_arguments", out.content
        assert "'mode'" in out.content
    out = await pcall({"action": "poll"})
    assert out.is_error and "needs a handle" in out.content
    out = await pcall({"action": "kill", "handle": "p_x_1", "command": "ls"})
    assert out.is_error and "does not take command" in out.content


async def test_output_is_a_ring_buffer(pcall: Call, manager: ProcessManager) -> None:
    handle = await start(pcall, "head -c 100000 /dev/zero | tr '\\0' a; echo; echo END")
    await asyncio.wait_for(manager.get("agent-1", handle).child.finished.wait(), 10)
    out = await pcall({"action": "poll", "handle": handle})
    text = out.details["output"]
    assert out.details["dropped_bytes"] > 90000 and len(text) == LIMITS.output_cap
    assert text.endswith("aaa\nEND\n") and "bytes of output were dropped" in out.content
    out = await pcall({"action": "poll", "handle": handle})
    assert "(no new output)" in out.content


async def test_kill_ends_the_whole_group(pcall: Call) -> None:
    marker = f"98{random.randrange(10**6)}.5"
    # "started" first: once both sleeps run, it has been written (the other way round, a
    # loaded host can run both sleeps before the echo, and the kill comes before any output).
    handle = await start(pcall, f"echo started; sleep {marker} & sleep {marker} & wait")
    for _ in range(50):
        if len(marked_processes(f"sleep\0{marker}")) == 2:
            break
        await asyncio.sleep(0.1)
    assert len(marked_processes(f"sleep\0{marker}")) == 2
    out = await pcall({"action": "kill", "handle": handle})
    assert not out.is_error and out.details["status"] == "killed"
    assert "started" in out.content
    for _ in range(30):
        if not marked_processes(f"sleep\0{marker}"):
            break
        await asyncio.sleep(0.1)
    assert marked_processes(f"sleep\0{marker}") == []


async def test_lifetime_limit(pcall: Call) -> None:
    handle = await start(pcall, "sleep 30", lifetime_s=0.5)
    _, final = await poll_until_done(pcall, handle, limit_s=5)
    assert final["status"] == "timed_out" and final["lifetime_s"] == 0.5


async def test_processes_per_agent_are_limited(pcall: Call) -> None:
    first = await start(pcall, "sleep 30")
    await start(pcall, "sleep 30")
    out = await pcall({"action": "start", "command": "sleep 30"})
    assert out.is_error and "at most 2" in out.content
    other = await pcall({"action": "start", "command": "echo other", "wait_s": 5}, agent="agent-2")
    assert not other.is_error  # the limit is per agent
    await pcall({"action": "kill", "handle": first})
    await start(pcall, "sleep 30")


async def test_another_agents_handle_is_refused(pcall: Call) -> None:
    handle = await start(pcall, "echo secret-output; sleep 30")
    for action in ("poll", "kill"):
        out = await pcall({"action": action, "handle": handle}, agent="intruder")
        assert out.is_error and "No process" in out.content
        assert "secret-output" not in out.content
    out = await pcall({"action": "list"}, agent="intruder")
    assert out.content == "No processes." and out.details["processes"] == []
    out = await pcall({"action": "poll", "handle": handle, "wait_s": 2})
    assert out.details["running"] and "secret-output" in out.content


async def test_list_and_unknown_handles(pcall: Call, manager: ProcessManager) -> None:
    handle = await start(pcall, "sleep 30")
    out = await pcall({"action": "list"})
    assert handle in out.content and "running for" in out.content and "sleep 30" in out.content
    out = await pcall({"action": "poll", "handle": f"p_{manager.executor_id}_999"})
    assert out.is_error and "No process" in out.content
    out = await pcall({"action": "poll", "handle": "p_0ther-executor_1"})
    assert out.is_error and "executor that started this process is gone" in out.content


async def test_shutdown_kills_everything(pcall: Call, manager: ProcessManager) -> None:
    marker = f"97{random.randrange(10**6)}.5"
    handles = [await start(pcall, f"sleep {marker}") for _ in range(2)]
    await manager.shutdown()
    assert marked_processes(f"sleep\0{marker}") == []
    for handle in handles:
        out = await pcall({"action": "poll", "handle": handle})
        assert out.details["status"] == "killed"
