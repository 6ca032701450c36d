"""apply_patch: unified diffs applied all-or-nothing inside the workspace."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from switchboard_tools.patch import parse_patch
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.tools.apply_patch import ApplyPatchTool

Apply = Callable[[str], Awaitable[ToolOutput]]

NUMBERS = "".join(f"line {i}\n" for i in range(1, 31))


@pytest.fixture
def apply(ctx: ToolContext) -> Apply:
    registry = ToolRegistry([ApplyPatchTool()])

    async def _apply(patch: str) -> ToolOutput:
        return await registry.execute("apply_patch", json.dumps({"patch": patch}), ctx)

    return _apply


@pytest.fixture
def outside() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="sb-outside-"))
    try:
        (root / "secret.txt").write_text("secret\n")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def leftovers(workspace: Path) -> list[str]:
    return [p.name for p in workspace.rglob("*") if p.name.endswith("~")]


async def test_multi_file_multi_hunk(apply: Apply, workspace: Path) -> None:
    (workspace / "a.txt").write_text(NUMBERS)
    (workspace / "src").mkdir()
    (workspace / "src" / "b.py").write_text("def f():\n    return 1\n")
    patch = """diff --git a/a.txt b/a.txt
index 1111111..2222222 100644
--- a/a.txt
+++ b/a.txt
@@ -2,3 +2,4 @@
 line 2
-line 3
+line three
+line 3.5
 line 4
@@ -24,3 +25,2 @@
 line 24
-line 25
 line 26
diff --git a/src/b.py b/src/b.py
--- a/src/b.py
+++ b/src/b.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
"""
    out = await apply(patch)
    assert not out.is_error, out.content
    text = (workspace / "a.txt").read_text()
    assert "line three\nline 3.5\nline 4\n" in text and "line 25\n" not in text
    assert text.count("\n") == 30
    assert (workspace / "src" / "b.py").read_text() == "def f():\n    return 2\n"
    assert out.content.splitlines() == [
        "Applied patch: 2 files changed, +3 -3",
        "M a.txt +2 -2",
        "M src/b.py +1 -1",
    ]
    assert out.details["files"][0]["hunks"] == 2
    assert leftovers(workspace) == []


async def test_create_and_delete(apply: Apply, workspace: Path) -> None:
    (workspace / "old.txt").write_text("bye\nnow\n")
    patch = """--- /dev/null
+++ b/docs/new/readme.md
@@ -0,0 +1,2 @@
+# Title
+text
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-bye
-now
"""
    out = await apply(patch)
    assert not out.is_error, out.content
    assert (workspace / "docs/new/readme.md").read_text() == "# Title\ntext\n"
    assert not (workspace / "old.txt").exists()
    assert "A docs/new/readme.md +2 -0" in out.content and "D old.txt +0 -2" in out.content


async def test_git_empty_file_creation(apply: Apply, workspace: Path) -> None:
    out = await apply("diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0..e69\n")
    assert not out.is_error, out.content
    assert (workspace / "empty.txt").read_text() == ""


async def test_hunks_found_at_an_offset(apply: Apply, workspace: Path) -> None:
    (workspace / "a.txt").write_text("header\n" * 5 + NUMBERS)
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -10,3 +10,3 @@\n line 10\n-line 11\n+eleven\n line 12\n"
    out = await apply(patch)
    assert not out.is_error, out.content
    assert "line 10\neleven\nline 12\n" in (workspace / "a.txt").read_text()
    assert out.details["files"][0]["offsets"] == [5]
    assert "hunk 1 at offset +5" in out.content


async def test_mismatch_leaves_every_file_untouched(apply: Apply, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    (workspace / "b.txt").write_text("alpha\nbeta\n")
    patch = """--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
 one
-two
+TWO
--- a/b.txt
+++ b/b.txt
@@ -1,2 +1,2 @@
 alpha
-gamma
+GAMMA
"""
    out = await apply(patch)
    assert out.is_error
    assert "Hunk 1 of b.txt" in out.content and "'gamma'" in out.content
    assert "Nothing was changed" in out.content
    assert (workspace / "a.txt").read_text() == "one\ntwo\n"
    assert (workspace / "b.txt").read_text() == "alpha\nbeta\n"
    assert leftovers(workspace) == []


async def test_creation_is_rolled_back_with_a_later_mismatch(apply: Apply, workspace: Path) -> None:
    (workspace / "b.txt").write_text("alpha\n")
    patch = "--- /dev/null\n+++ b/new/x.txt\n@@ -0,0 +1 @@\n+x\n"
    patch += "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-nope\n+yes\n"
    out = await apply(patch)
    assert out.is_error and "b.txt" in out.content
    assert not (workspace / "new").exists()


@pytest.mark.parametrize(
    ("path", "reason"),
    [("../escape.txt", "'..'"), ("/etc/passwd", "absolute"), ("a/../../x", "'..'")],
)
async def test_paths_must_stay_inside(apply: Apply, path: str, reason: str) -> None:
    out = await apply(f"--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n+pwned\n")
    assert out.is_error and reason in out.content, out.content


async def test_symlinks_cannot_escape(apply: Apply, workspace: Path, outside: Path) -> None:
    (workspace / "link").symlink_to(outside)
    (workspace / "file-link").symlink_to(outside / "secret.txt")
    for target in ("link/secret.txt", "file-link"):
        patch = f"--- a/{target}\n+++ b/{target}\n@@ -1 +1 @@\n-secret\n+pwned\n"
        out = await apply(patch)
        assert out.is_error and "outside the workspace" in out.content, out.content
    out = await apply("--- /dev/null\n+++ b/link/new.txt\n@@ -0,0 +1 @@\n+pwned\n")
    assert out.is_error and "outside the workspace" in out.content
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("just some text\n", "no file changes found"),
        ("--- a/x\n+++ b/x\n@@ bad @@\n", "bad header for hunk 1 of x"),
        ("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "ends inside hunk 1 of x"),
        ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n*b\n", "line 5"),
        ("@@ -1 +1 @@\n-a\n+b\n", "outside a file"),
        ("--- a/x\n+++ b/x\n", "x has no hunks"),
        ("--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "Renames are not supported"),
        ("diff --git a/x b/y\nrename from x\nrename to y\n", "renames are not supported"),
    ],
)
async def test_malformed_patches_get_readable_errors(
    apply: Apply, workspace: Path, patch: str, expected: str
) -> None:
    (workspace / "x").write_text("a\nb\n")
    out = await apply(patch)
    assert out.is_error and expected in out.content, out.content
    assert out.details["error"] == "tool_error"
    assert (workspace / "x").read_text() == "a\nb\n"


async def test_existing_and_missing_targets(apply: Apply, workspace: Path) -> None:
    (workspace / "here.txt").write_text("x\n")
    out = await apply("--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+y\n")
    assert out.is_error and "already exists" in out.content
    out = await apply("--- a/gone.txt\n+++ b/gone.txt\n@@ -1 +1 @@\n-a\n+b\n")
    assert out.is_error and "File not found: gone.txt" in out.content
    out = await apply("--- a/here.txt\n+++ b/here.txt\n@@ -1 +1 @@\n-x\n+z\n--- a/here.txt\n")
    assert not out.is_error  # a trailing lone '---' line is just noise


async def test_partial_deletion_is_refused(apply: Apply, workspace: Path) -> None:
    (workspace / "a.txt").write_text("1\n2\n3\n")
    out = await apply("--- a/a.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-1\n-2\n")
    assert out.is_error and "must remove the whole file" in out.content
    assert (workspace / "a.txt").exists()


async def test_no_newline_markers_and_crlf(apply: Apply, workspace: Path) -> None:
    (workspace / "n.txt").write_text("a\nb")
    patch = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
    out = await apply(patch)
    assert not out.is_error, out.content
    assert (workspace / "n.txt").read_text() == "a\nc\n"
    (workspace / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    out = await apply("--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
    assert not out.is_error, out.content
    assert (workspace / "w.txt").read_bytes() == b"one\r\n2\r\n"


async def test_blank_context_lines_and_mode_kept(apply: Apply, workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\n\necho hi\n")
    script.chmod(0o755)
    out = await apply(
        "--- a/run.sh\n+++ b/run.sh\n@@ -1,3 +1,3 @@\n #!/bin/sh\n\n-echo hi\n+echo ho\n"
    )
    assert not out.is_error, out.content
    assert script.read_text() == "#!/bin/sh\n\necho ho\n"
    assert script.stat().st_mode & 0o777 == 0o755


def test_parser_handles_quoted_paths_and_timestamps() -> None:
    files = parse_patch(
        '--- "a/sp\\303\\251cial name.txt"\t2024-01-01\n+++ "b/sp\\303\\251cial name.txt"\n'
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert [f.path for f in files] == ["spécial name.txt"]
