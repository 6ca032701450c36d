from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import ToolOutput
from switchboard_tools.workspace import display_path, ensure_workspace, resolve_in_workspace

Call = Callable[..., Awaitable[ToolOutput]]


def test_relative_and_absolute_inside(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, "a/b.txt") == workspace / "a" / "b.txt"
    assert resolve_in_workspace(workspace, ".") == workspace
    assert resolve_in_workspace(workspace, "a/../b") == workspace / "b"
    assert resolve_in_workspace(workspace, str(workspace / "x")) == workspace / "x"
    assert resolve_in_workspace(workspace, "./~/x") == workspace / "~" / "x"


@pytest.mark.parametrize(
    "attack",
    ["..", "../agent-2/secret", "a/../../..", "../../../../etc/passwd", "/etc/passwd", "/", "/tmp"],
)
def test_escapes_refused(workspace: Path, attack: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(workspace, attack)


def test_sibling_with_common_prefix_refused(workspace: Path) -> None:
    sibling = workspace.parent / (workspace.name + "-evil")
    sibling.mkdir()
    with pytest.raises(ToolError):
        resolve_in_workspace(workspace, str(sibling / "x"))
    with pytest.raises(ToolError):
        resolve_in_workspace(workspace, f"../{sibling.name}/x")


def test_nul_and_empty_refused(workspace: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        resolve_in_workspace(workspace, "a\x00/../../etc/passwd")
    with pytest.raises(ToolError, match="empty"):
        resolve_in_workspace(workspace, "")


async def test_symlinks_pointing_outside_refused(
    workspace: Path, tmp_path: Path, call: Call
) -> None:
    # Every link leads to something that exists and that the executor could read or write
    # (the tools run as the executor's own uid): only the check stands in between.
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("outside secret")
    (workspace / "dir").symlink_to(outside)
    (workspace / "file").symlink_to(secret)
    (workspace / "dangling").symlink_to(outside / "new-file")  # its directory exists
    (workspace / "up").symlink_to("..")
    for attack in ["dir", "dir/secret.txt", "file", "dangling", "up/x", "up"]:
        with pytest.raises(ToolError, match="outside the workspace"):
            resolve_in_workspace(workspace, attack)
    for attack in ["dir/secret.txt", "file"]:
        out = await call("read", {"path": attack})
        assert out.is_error and "outside the workspace" in out.content, out.content
        assert "outside secret" not in out.content
    for attack in ["dir/secret.txt", "dir/new-file", "file", "dangling"]:
        out = await call("write", {"path": attack, "content": "pwned"})
        assert out.is_error and "outside the workspace" in out.content, out.content
    assert secret.read_text() == "outside secret"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_symlinks_inside_allowed(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to("real")
    assert resolve_in_workspace(workspace, "alias/f") == workspace / "real" / "f"


def test_symlinked_workspace_root(tmp_path: Path) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    link = tmp_path / "ws-link"
    link.symlink_to(real)
    assert resolve_in_workspace(link, "f") == real / "f"
    assert resolve_in_workspace(link, str(link / "f")) == real / "f"
    with pytest.raises(ToolError):
        resolve_in_workspace(link, "../x")


def test_display_path(workspace: Path) -> None:
    assert display_path(workspace, workspace) == "."
    assert display_path(workspace, workspace / "a" / "b") == "a/b"


def test_ensure_workspace(tmp_path: Path) -> None:
    ws = ensure_workspace(tmp_path / "root", "agent_1-x")
    assert ws == (tmp_path / "root" / "agent_1-x").resolve()
    assert ws.is_dir()
    assert ensure_workspace(tmp_path / "root", "agent_1-x") == ws  # idempotent


@pytest.mark.parametrize(
    "agent", ["", "..", "a/b", "a b", "x" * 65, "a\n", "ä", ".hidden", "Agent"]
)
def test_ensure_workspace_rejects_bad_agent_ids(tmp_path: Path, agent: str) -> None:
    with pytest.raises(ToolError, match="Invalid agent id"):
        ensure_workspace(tmp_path, agent)
    assert os.listdir(tmp_path) == []


def test_ensure_workspace_refuses_symlinked_agent_dir(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "victim").mkdir(parents=True)
    (root / "attacker").symlink_to(root / "victim")
    with pytest.raises(ToolError):
        ensure_workspace(root, "attacker")
