"""Descriptor-relative resolution (switchboard_tools.beneath, .wsfs), run against both resolvers
(openat2 and the O_NOFOLLOW walk: see ``fs_resolver`` in conftest). Outside targets are
temporary directories only."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard import beneath
from switchboard.beneath import O_PATH, open_beneath
from switchboard_tools.errors import ToolError
from switchboard_tools.wsfs import WorkspaceFS


@pytest.fixture
def tree(workspace: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The workspace's descriptor, with ``a/b/f.txt``, links that stay inside and links that
    lead to ``tmp_path/outside`` (a temporary directory)."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("outside")
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "a" / "b" / "f.txt").write_text("inside")
    (workspace / "alias").symlink_to("a")  # relative, inside
    (workspace / "fl").symlink_to("a/b/f.txt")
    (workspace / "a" / "b" / "up").symlink_to("../../a")  # '..' that stays inside
    (workspace / "abs").symlink_to(out)  # absolute, outside
    (workspace / "rel-out").symlink_to(os.path.relpath(out, workspace))  # relative, outside
    (workspace / "abs-in").symlink_to(workspace / "a")  # absolute, even if inside
    (workspace / "magic").symlink_to("/proc/self/cwd")
    (workspace / "loop").symlink_to("loop")
    (workspace / "dangling-in").symlink_to("a/created.txt")
    (workspace / "dangling-out").symlink_to(out / "created.txt")
    fd = os.open(workspace, O_PATH | os.O_DIRECTORY)
    try:
        yield fd, out
    finally:
        os.close(fd)


def read(fd: int, path: str) -> str:
    f = open_beneath(fd, path, os.O_RDONLY)
    with os.fdopen(f) as file:
        return file.read()


def test_the_forced_resolver_is_used(fs_resolver: str) -> None:
    assert beneath.resolver() == fs_resolver


def test_openat2_where_the_kernel_has_it() -> None:
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) >= (5, 6):
        assert beneath.openat2_available()


@pytest.mark.parametrize(
    "path", ["a/b/f.txt", "./a//b/./f.txt", "alias/b/f.txt", "fl", "a/b/up/b/f.txt", "a/../fl"]
)
def test_paths_inside_open(tree: tuple[int, Path], path: str) -> None:
    fd, _ = tree
    assert read(fd, path) == "inside"


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../x",
        "a/../../x",
        "/etc/hostname",
        "abs/secret.txt",
        "rel-out/secret.txt",
        "abs-in/b/f.txt",
        "magic",
        "a/b/up/../../x",
    ],
)
def test_escapes_are_exdev(tree: tuple[int, Path], path: str) -> None:
    fd, _ = tree
    with pytest.raises(OSError) as info:
        os.close(open_beneath(fd, path, os.O_RDONLY))
    assert info.value.errno == errno.EXDEV, info.value


def test_links_out_cannot_create_files(tree: tuple[int, Path]) -> None:
    fd, out = tree
    for path in ("dangling-out", "abs/new.txt", "rel-out/new.txt"):
        with pytest.raises(OSError) as info:
            os.close(open_beneath(fd, path, os.O_WRONLY | os.O_CREAT, 0o600))
        assert info.value.errno == errno.EXDEV
    assert sorted(os.listdir(out)) == ["secret.txt"]


def test_dangling_link_inside_creates_its_target(tree: tuple[int, Path], workspace: Path) -> None:
    fd, _ = tree
    os.close(open_beneath(fd, "dangling-in", os.O_WRONLY | os.O_CREAT, 0o600))
    assert (workspace / "a" / "created.txt").is_file()


def test_loops_and_nofollow(tree: tuple[int, Path]) -> None:
    fd, _ = tree
    with pytest.raises(OSError) as info:
        open_beneath(fd, "loop", os.O_RDONLY)
    assert info.value.errno == errno.ELOOP
    with pytest.raises(OSError) as info:
        open_beneath(fd, "fl", os.O_RDONLY | os.O_NOFOLLOW)
    assert info.value.errno == errno.ELOOP


def test_o_path_follows_a_final_link(tree: tuple[int, Path], workspace: Path) -> None:
    fd, _ = tree
    got = open_beneath(fd, "alias", O_PATH | os.O_DIRECTORY)
    try:
        st = os.fstat(got)
        assert stat.S_ISDIR(st.st_mode)
        assert st.st_ino == (workspace / "a").stat().st_ino
    finally:
        os.close(got)


def test_rel_is_lexical(workspace: Path) -> None:
    with WorkspaceFS(workspace) as fs:
        assert fs.rel("a/../b") == "b"
        assert fs.rel("./x//y/") == "x/y"
        assert fs.rel(str(workspace / "x")) == "x"
        assert fs.rel(str(workspace)) == "."
        for bad in ["..", "../x", "a/../../x", "/etc/passwd", "/", str(workspace) + "-evil/x"]:
            with pytest.raises(ToolError, match="outside the workspace"):
                fs.rel(bad)
        with pytest.raises(ToolError, match="NUL"):
            fs.rel("a\x00b")
        with pytest.raises(ToolError, match="empty"):
            fs.rel(" ")


def test_entry_follows_a_final_link_inside_only(tree: tuple[int, Path], workspace: Path) -> None:
    _, out = tree
    with WorkspaceFS(workspace) as fs:
        dirfd, name = fs.entry("fl")
        try:
            assert name == "f.txt"
            assert os.fstat(dirfd).st_ino == (workspace / "a" / "b").stat().st_ino
        finally:
            os.close(dirfd)
        dirfd, name = fs.entry("a/missing.txt")  # a missing entry in an existing directory
        os.close(dirfd)
        assert name == "missing.txt"
        for path in ("dangling-out", "abs/secret.txt", "rel-out/secret.txt"):
            with pytest.raises(OSError) as info:
                fs.entry(path)
            assert info.value.errno == errno.EXDEV
    assert sorted(os.listdir(out)) == ["secret.txt"]


def test_make_dirs(workspace: Path) -> None:
    (workspace / "file").write_text("x")
    with WorkspaceFS(workspace) as fs:
        fd, created = fs.make_dirs("n/m/o")
        os.close(fd)
        assert created == ["n", "n/m", "n/m/o"]
        assert (workspace / "n" / "m" / "o").is_dir()
        fd, created = fs.make_dirs("n/m")
        os.close(fd)
        assert created == []
        with pytest.raises(NotADirectoryError):
            fs.make_dirs("file/sub")
