from __future__ import annotations

from pathlib import Path
from typing import Any


async def test_edit_exact_once(call: Any, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\nbeta\ngamma\n")
    out = await call("edit", {"path": "a.txt", "old_text": "beta", "new_text": "BETA"})
    assert not out.is_error and out.details["line"] == 2
    assert (workspace / "a.txt").read_text() == "alpha\nBETA\ngamma\n"


async def test_edit_zero_or_many_matches_change_nothing(call: Any, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x = 1\nx = 1\n")
    out = await call("edit", {"path": "a.txt", "old_text": "x = 1", "new_text": "x = 2"})
    assert out.is_error and "2 times" in out.content and "lines 1, 2" in out.content
    out = await call("edit", {"path": "a.txt", "old_text": "y", "new_text": "z"})
    assert out.is_error and "not found" in out.content
    assert (workspace / "a.txt").read_text() == "x = 1\nx = 1\n"


async def test_edit_refuses_outside_and_symlinks(
    call: Any, workspace: Path, tmp_path: Path
) -> None:
    target = tmp_path / "t.txt"
    target.write_text("secret")
    (workspace / "link").symlink_to(target)
    for path in ("link", "../../t.txt", str(target)):
        out = await call("edit", {"path": path, "old_text": "secret", "new_text": "pwned"})
        assert out.is_error
    assert target.read_text() == "secret"


async def test_search_files(call: Any, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "m.py").write_text("import os\n# TODO: fix\n")
    (workspace / "notes.md").write_text("todo list\n")
    (workspace / "bin.dat").write_bytes(b"\x00TODO")
    out = await call("search_files", {"glob": "*.py"})
    assert out.content == "src/m.py"
    out = await call("search_files", {"query": "TODO"})
    assert out.content == "src/m.py:2: # TODO: fix"
    out = await call("search_files", {"query": "todo", "case_sensitive": False})
    assert out.content.splitlines() == ["notes.md:1: todo list", "src/m.py:2: # TODO: fix"]
    out = await call("search_files", {"query": r"^import \w+$", "regex": True, "glob": "src/*"})
    assert out.content == "src/m.py:1: import os"
    out = await call("search_files", {"query": "(", "regex": True})
    assert out.is_error and "regular expression" in out.content
    out = await call("search_files", {"path": "../.."})
    assert out.is_error and "outside" in out.content


async def test_search_does_not_follow_symlinks_out(
    call: Any, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "s.txt").write_text("needle\n")
    (workspace / "out").symlink_to(tmp_path / "outside")
    (workspace / "f").symlink_to(tmp_path / "outside" / "s.txt")
    out = await call("search_files", {"query": "needle"})
    assert out.content == "(no matches)"
