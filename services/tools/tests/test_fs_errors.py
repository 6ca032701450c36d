"""Error text from the file tools names workspace-relative paths only (issue 9, item 5): the
OSErrors behind it carry absolute host paths (``/root/.switchboard/workspaces/main/...``),
which must never reach the model."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from switchboard_tools.registry import ToolOutput

from .sandbox_checks import skip_or_fail

Call = Callable[..., Awaitable[ToolOutput]]


@contextlib.contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """Make ``path`` a file its owner cannot write: mode 0 for an ordinary user; the immutable
    attribute for root, whom modes do not stop."""
    if os.geteuid() != 0:
        path.chmod(0)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], check=False).returncode:
        skip_or_fail("cannot make a file immutable here (chattr +i) to deny root a write")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


def assert_no_host_path(out: ToolOutput, workspace: Path) -> None:
    assert out.is_error, out.content
    text = out.content + repr(out.details)
    for host in {str(workspace), os.path.realpath(workspace), str(workspace.parent.parent)}:
        assert host not in text, text


async def test_os_errors_name_relative_paths(call: Call, workspace: Path) -> None:
    (workspace / "dir").mkdir()
    (workspace / "file").write_text("x\n")
    (workspace / "loop").symlink_to("loop")
    os.mkfifo(workspace / "fifo")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("read", {"path": "dir"}, "dir is a directory"),
        ("write", {"path": "dir", "content": "x"}, "dir is a directory"),
        ("edit", {"path": "dir", "old_text": "a", "new_text": "b"}, "dir is a directory"),
        ("read", {"path": "missing/sub/f.txt"}, "File not found: missing/sub/f.txt"),
        ("edit", {"path": "missing/f", "old_text": "a", "new_text": "b"}, "missing/f"),
        ("list_dir", {"path": "missing/sub"}, "not found: missing/sub"),
        ("write", {"path": "file/sub.txt", "content": "x"}, "file/sub.txt"),
        ("read", {"path": "loop"}, "symbolic links"),
        ("write", {"path": "fifo", "content": "x"}, "fifo"),
        ("search_files", {"path": "missing"}, "'missing' is not a directory"),
        (
            "apply_patch",
            {"patch": "--- a/missing/f\n+++ b/missing/f\n@@ -1 +1 @@\n-a\n+b\n"},
            "File not found: missing/f",
        ),
        ("apply_patch", {"patch": "--- a/dir\n+++ b/dir\n@@ -1 +1 @@\n-a\n+b\n"}, "dir"),
        (
            "apply_patch",
            {"patch": "--- /dev/null\n+++ b/file/new.txt\n@@ -0,0 +1 @@\n+x\n"},
            "file/new.txt",
        ),
    ]
    for tool, args, expected in cases:
        out = await call(tool, args)
        assert_no_host_path(out, workspace)
        assert expected in out.content, (tool, args, out.content)


async def test_permission_denied_names_a_relative_path(call: Call, workspace: Path) -> None:
    locked = workspace / "locked.txt"
    locked.write_text("a\n")
    with unwritable(locked):
        for tool, args in [
            ("write", {"path": "locked.txt", "content": "x"}),
            ("write", {"path": "locked.txt", "content": "x", "append": True}),
            ("edit", {"path": "locked.txt", "old_text": "a", "new_text": "b"}),
        ]:
            out = await call(tool, args)
            assert_no_host_path(out, workspace)
            assert "Permission denied: locked.txt" in out.content, out.content
        if os.geteuid() != 0:
            out = await call("read", {"path": "locked.txt"})
            assert_no_host_path(out, workspace)
    assert locked.read_text() == "a\n"


async def test_absolute_paths_inside_are_shown_relative(call: Call, workspace: Path) -> None:
    out = await call("read", {"path": str(workspace / "nope" / "x.txt")})
    assert_no_host_path(out, workspace)
    assert out.content == "File not found: nope/x.txt"
    out = await call("write", {"path": str(workspace / "n" / "y.txt"), "content": "y"})
    assert not out.is_error and out.content == "Wrote 1 bytes to n/y.txt"
