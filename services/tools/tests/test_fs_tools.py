from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from switchboard_tools.registry import ToolOutput
from switchboard_tools.tools.list_dir import MAX_ENTRIES
from switchboard_tools.tools.read import MAX_READ_BYTES

Call = Callable[..., Awaitable[ToolOutput]]


async def test_write_then_read(call: Call, workspace: Path) -> None:
    out = await call("write", {"path": "notes/today.md", "content": "héllo\nworld\n"})
    assert not out.is_error, out.content
    assert out.content == "Wrote 13 bytes to notes/today.md"
    assert out.details == {
        "path": "notes/today.md",
        "bytes_written": 13,
        "append": False,
        "created": True,
    }
    assert (workspace / "notes" / "today.md").read_text() == "héllo\nworld\n"

    out = await call("read", {"path": "notes/today.md"})
    assert out.content == "héllo\nworld\n"
    assert not out.is_error
    assert out.details["truncated"] is False


async def test_write_append_and_overwrite(call: Call, workspace: Path) -> None:
    await call("write", {"path": "log.txt", "content": "one\n"})
    out = await call("write", {"path": "log.txt", "content": "two\n", "append": True})
    assert out.content == "Appended 4 bytes to log.txt"
    assert (workspace / "log.txt").read_text() == "one\ntwo\n"
    await call("write", {"path": "log.txt", "content": "x"})
    assert (workspace / "log.txt").read_text() == "x"


@pytest.mark.parametrize(
    "path", ["../escape.txt", "/tmp/escape.txt", "sub/../../escape.txt", "link/escape.txt"]
)
async def test_write_outside_refused_and_nothing_written(
    call: Call, workspace: Path, tmp_path: Path, path: str
) -> None:
    (workspace / "link").symlink_to(tmp_path)
    before = set(os.listdir(tmp_path))
    out = await call("write", {"path": path, "content": "pwned"})
    assert out.is_error
    assert "outside the workspace" in out.content
    assert set(os.listdir(tmp_path)) == before
    assert "escape.txt" not in os.listdir("/tmp")


async def test_write_through_dangling_symlink_refused(call: Call, workspace: Path, tmp_path: Path):
    target = tmp_path / "created-outside.txt"
    (workspace / "trap").symlink_to(target)
    out = await call("write", {"path": "trap", "content": "pwned"})
    assert out.is_error
    assert not target.exists()


async def test_write_directory_refused(call: Call, workspace: Path) -> None:
    (workspace / "d").mkdir()
    out = await call("write", {"path": "d", "content": "x"})
    assert out.is_error and "is a directory" in out.content
    out = await call("write", {"path": ".", "content": "x"})
    assert out.is_error


async def test_write_under_a_file_refused(call: Call, workspace: Path) -> None:
    (workspace / "f").write_text("x")
    out = await call("write", {"path": "f/g.txt", "content": "x"})
    assert out.is_error
    assert "not a directory" in out.content


async def test_read_confinement(call: Call, workspace: Path) -> None:
    (workspace / "etc").symlink_to("/etc")
    (workspace / "pw").symlink_to("/etc/passwd")
    for path in ["/etc/passwd", "../../../../../etc/passwd", "etc/passwd", "pw"]:
        out = await call("read", {"path": path})
        assert out.is_error, path
        assert "outside the workspace" in out.content
        assert "root:" not in out.content


async def test_read_missing_directory_binary(call: Call, workspace: Path) -> None:
    out = await call("read", {"path": "nope.txt"})
    assert out.is_error and out.content == "File not found: nope.txt"
    (workspace / "d").mkdir()
    out = await call("read", {"path": "d"})
    assert out.is_error and "is a directory" in out.content
    (workspace / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" + os.urandom(512))
    out = await call("read", {"path": "blob.bin"})
    assert out.is_error and "binary" in out.content
    (workspace / "rand.bin").write_bytes(bytes(range(128, 256)) * 8)
    out = await call("read", {"path": "rand.bin"})
    assert out.is_error and "binary" in out.content


async def test_read_fifo_refused_without_blocking(call: Call, workspace: Path) -> None:
    os.mkfifo(workspace / "fifo")
    out = await call("read", {"path": "fifo"}, timeout_s=5)
    assert out.is_error
    assert "not a regular file" in out.content


async def test_read_offset_and_limit(call: Call, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await call("read", {"path": "n.txt", "offset": 3, "limit": 2})
    assert out.content == (
        "line 3\nline 4\n[more lines follow; showing lines 3-4; continue with offset=5]"
    )
    assert out.details["next_offset"] == 5
    out = await call("read", {"path": "n.txt", "offset": 9})
    assert out.content == "line 9\nline 10\n"
    out = await call("read", {"path": "n.txt", "offset": 99})
    assert out.is_error
    assert "offset 99 is past the end of n.txt (10 lines)" in out.content
    out = await call("read", {"path": "n.txt", "offset": 0})
    assert out.is_error and "at 'offset'" in out.content


async def test_read_size_cap(call: Call, workspace: Path) -> None:
    line = "x" * 99 + "\n"
    (workspace / "big.txt").write_text(line * 5000)  # ~500 KB
    out = await call("read", {"path": "big.txt"})
    assert not out.is_error
    assert out.details["truncated"] is True
    body, note = out.content.rsplit("\n", 1)
    assert len(body.encode()) <= MAX_READ_BYTES
    assert note.startswith("[truncated at 256 KiB; showing lines 1-")
    nxt = out.details["next_offset"]
    assert note.endswith(f"continue with offset={nxt}]")
    rest = await call("read", {"path": "big.txt", "offset": nxt})
    assert rest.content.startswith(line)


async def test_read_single_huge_line(call: Call, workspace: Path) -> None:
    (workspace / "one.txt").write_text("é" * 300_000 + "\nsecond\n")
    out = await call("read", {"path": "one.txt"})
    assert out.details["truncated"] is True
    assert out.content.startswith("é" * 1000)
    assert "\ufffd" not in out.content
    assert "continue with offset=2" in out.content
    out = await call("read", {"path": "one.txt", "offset": 2})
    assert out.content == "second\n"


async def test_read_empty_file(call: Call, workspace: Path) -> None:
    (workspace / "empty").write_text("")
    out = await call("read", {"path": "empty"})
    assert out.content == "(empty file)" and not out.is_error


async def test_list_dir(call: Call, workspace: Path) -> None:
    (workspace / "b.txt").write_text("hello")
    (workspace / "a-dir").mkdir()
    (workspace / "c-link").symlink_to("/etc")
    out = await call("list_dir", {})
    assert not out.is_error
    assert out.content == ".:\na-dir/\nb.txt  (5 bytes)\nc-link  (symlink)"
    assert out.details["entries"] == [
        {"name": "a-dir", "type": "dir", "size": None},
        {"name": "b.txt", "type": "file", "size": 5},
        {"name": "c-link", "type": "symlink", "size": None},
    ]
    out = await call("list_dir", {"path": "a-dir"})
    assert out.content == "a-dir:\n(empty directory)"


async def test_list_dir_confinement(call: Call, workspace: Path) -> None:
    (workspace / "etc").symlink_to("/etc")
    for path in ["..", "/", "/etc", "etc", "../.."]:
        out = await call("list_dir", {"path": path})
        assert out.is_error, path
        assert "passwd" not in out.content


async def test_list_dir_cap(call: Call, workspace: Path) -> None:
    for i in range(MAX_ENTRIES + 20):
        (workspace / f"f{i:04d}").touch()
    out = await call("list_dir", {"path": "."})
    assert out.details["truncated"] is True
    assert out.details["total"] == MAX_ENTRIES + 20
    assert len(out.details["entries"]) == MAX_ENTRIES
    assert out.content.endswith("[20 more entries not shown; 520 in total]")


async def test_list_dir_not_a_directory(call: Call, workspace: Path) -> None:
    (workspace / "f").write_text("x")
    out = await call("list_dir", {"path": "f"})
    assert out.is_error and "not a directory" in out.content
    out = await call("list_dir", {"path": "missing"})
    assert out.is_error and "not found" in out.content


async def test_write_fifo_refused_without_blocking(call: Call, workspace: Path) -> None:
    os.mkfifo(workspace / "fifo")
    out = await call("write", {"path": "fifo", "content": "x"}, timeout_s=5)
    assert out.is_error
    assert out.details["error"] == "tool_error"


async def test_read_latin1_text_is_not_binary(call: Call, workspace: Path) -> None:
    (workspace / "latin1.txt").write_bytes("café au lait\n".encode("latin-1"))
    out = await call("read", {"path": "latin1.txt"})
    assert not out.is_error
    assert out.content == "caf\ufffd au lait\n"
