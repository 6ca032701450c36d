"""Workspaces per session (``SB_WORKSPACE_SCOPE=session``): each session key of a shared agent
gets its own directory, which every tool of a call (file tools and exec) works in."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_tools.errors import ToolError
from switchboard_tools.registry import ToolContext, ToolRegistry
from switchboard_tools.workspace import (
    SESSIONS_DIR,
    ensure_workspace,
    open_workspace,
    session_dir_name,
)

from .executor_procs import SUBJECTS, ExecutorProcesses, ToolBus

KEYS = ["agent:main:telegram:dm:alice", "agent:main:telegram:dm:bob"]


@contextlib.contextmanager
def session_ctx(root: Path, key: str) -> Iterator[ToolContext]:
    """A call's context as the executor builds it in session scope."""
    workspace, fd = open_workspace(root, "main", key)
    try:
        yield ToolContext("main", key, "call", workspace, 20.0, workspace_fd=fd)
    finally:
        os.close(fd)


def test_session_dir_names() -> None:
    names = {k: session_dir_name(k) for k in [*KEYS, "a:b", "a/b", "..", "", "ä" * 300, "A:B"]}
    assert len(set(names.values())) == len(names)  # same slug, different keys: still distinct
    for name in names.values():
        assert name and not name.startswith((".", "-")) and len(name) <= 61
        assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-")
    assert names[KEYS[0]].startswith("agent-main-telegram-dm-alice-")
    assert session_dir_name(KEYS[0]) == names[KEYS[0]]  # stable


def test_open_workspace_per_session(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    path, fd = open_workspace(root, "main", KEYS[0])
    os.close(fd)
    assert path == root.resolve() / "main" / SESSIONS_DIR / session_dir_name(KEYS[0])
    assert path.is_dir() and stat.S_IMODE(path.stat().st_mode) == 0o700
    for parent in (path.parent, path.parent.parent):  # reachable by the sandbox uid, unlisted
        assert stat.S_IMODE(parent.stat().st_mode) == 0o701
    assert ensure_workspace(root, "main") == root.resolve() / "main"  # agent scope unchanged
    with pytest.raises(ToolError, match="no session key"):
        open_workspace(root, "main", "")


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "main").mkdir(parents=True)
    (root / "main" / SESSIONS_DIR).symlink_to(elsewhere)
    with pytest.raises(ToolError, match="not a directory inside the root"):
        open_workspace(root, "main", KEYS[0])
    assert os.listdir(elsewhere) == []


async def test_sessions_do_not_share_files(registry: ToolRegistry, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    with session_ctx(root, KEYS[0]) as alice, session_ctx(root, KEYS[1]) as bob:
        out = await registry.execute("write", json.dumps({"path": "n.txt", "content": "A"}), alice)
        assert not out.is_error, out.content
        out = await registry.execute("read", json.dumps({"path": "n.txt"}), bob)
        assert out.is_error and out.content == "File not found: n.txt"
        out = await registry.execute("list_dir", "{}", bob)
        assert out.content == ".:\n(empty directory)"
        # exec works in the same directory as the file tools of its call.
        out = await registry.execute("exec", json.dumps({"command": "cat n.txt"}), alice)
        assert not out.is_error and out.content == "A", out.content
        out = await registry.execute("exec", json.dumps({"command": "cat n.txt"}), bob)
        assert out.is_error
    assert (root / "main" / SESSIONS_DIR / session_dir_name(KEYS[0]) / "n.txt").read_text() == "A"


async def test_executor_in_session_scope(nats_url: str) -> None:
    """A real executor process with SB_WORKSPACE_SCOPE=session, driven over the bus."""
    env = {"SB_WORKSPACE_SCOPE": "session", "SB_EXEC_ALLOWLIST": json.dumps(["cat"])}
    async with ExecutorProcesses(nats_url, env) as executors:
        client = await ToolBus.connect(nats_url)  # creates the streams the executor waits for
        try:
            await executors.start("tools-scope")
            await client.listen("sb.tools.result.>")

            async def call(key: str, tool: str, args: dict[str, str]) -> messages_pb2.ToolResult:
                message = messages_pb2.ToolCall(
                    call_id=f"call-{uuid.uuid4().hex[:12]}",
                    run_id=f"run-{uuid.uuid4().hex[:12]}",
                    session_key=key,
                    agent="main",
                    tool=tool,
                    args_json=json.dumps(args),
                    timeout_s=30,
                )
                await bus.js_publish(client.js, SUBJECTS.tools_call("default"), message)
                return await client.result(message)

            for key in KEYS:
                result = await call(key, "write", {"path": "who.txt", "content": key})
                assert not result.is_error, result.content
            for key in KEYS:
                result = await call(key, "exec", {"command": "cat who.txt"})
                assert not result.is_error and result.content == key, result.content
        finally:
            await client.close()
        sessions = executors.workspace("main") / SESSIONS_DIR
        assert sorted(os.listdir(sessions)) == sorted(session_dir_name(k) for k in KEYS)
        assert not (executors.workspace("main") / "who.txt").exists()
