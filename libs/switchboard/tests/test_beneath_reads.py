"""Reading a file an untrusted command may have planted (``switchboard.beneath``:
``open_no_symlinks`` and ``read_regular``, what the memory indexer and the scheduler's file
watchers use): no symlink followed anywhere in the path, inside the directory or out; no ``..``
and no absolute path; nothing but a regular file, opened without blocking; never more than the
cap, even for a file that grows while it is read. Every test runs on both resolvers (openat2,
and the O_NOFOLLOW walk that kernels without openat2 get). Outside targets are temporary
directories only."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from switchboard import beneath
from switchboard.beneath import (
    O_CLOEXEC,
    O_PATH,
    NotRegular,
    Resolver,
    TooLarge,
    open_no_symlinks,
    read_regular,
)

INSIDE = b"inside text\n"
SECRET = b"outside secret 3b7e\n"
# A FIFO opened without O_NONBLOCK and without a writer blocks; this long means it did.
FIFO_BOUND_S = 30.0


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> Iterator[Resolver]:
    which: Resolver = request.param
    if which == "openat2" and not beneath.openat2_available():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("this kernel has no openat2 (CI=true: must run here)", pytrace=False)
        pytest.skip("this kernel has no openat2 (Linux >= 5.6)")
    beneath.use_resolver(which)
    try:
        yield which
    finally:
        beneath.use_resolver(None)


@dataclass(frozen=True)
class Tree:
    fd: int  # an O_PATH descriptor of ``root``
    root: Path
    outside: Path  # a sibling directory holding secret.txt


@pytest.fixture
def tree(tmp_path: Path, resolver: Resolver) -> Iterator[Tree]:
    """``root/a/b/f.txt`` and links to it (inside) and to ``outside/secret.txt``."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (root / "a" / "b" / "f.txt").write_bytes(INSIDE)
    (outside / "secret.txt").write_bytes(SECRET)
    (root / "file-in").symlink_to("a/b/f.txt")  # a last component, leading inside
    (root / "file-out").symlink_to(outside / "secret.txt")  # ... and outside
    (root / "file-out-rel").symlink_to("../outside/secret.txt")
    (root / "dir-in").symlink_to("a")  # a middle component, leading inside
    (root / "dir-out").symlink_to(outside)  # ... and outside
    (root / "a" / "up").symlink_to("..")
    fd = os.open(root, O_PATH | os.O_DIRECTORY | O_CLOEXEC)
    try:
        yield Tree(fd, root, outside)
    finally:
        os.close(fd)


def refused(tree: Tree, path: str, code: int, max_bytes: int = 1 << 20) -> OSError:
    """``read_regular`` refuses ``path`` with ``code``; the error, for further checks."""
    with pytest.raises(OSError) as caught:
        data = read_regular(tree.fd, path, max_bytes)
        pytest.fail(f"{path!r} was read: {data!r}")
    assert caught.value.errno == code, (path, caught.value)
    return caught.value


def test_a_regular_file_inside_is_read(tree: Tree, resolver: Resolver) -> None:
    assert beneath.resolver() == resolver
    for path in ("a/b/f.txt", "./a//b/f.txt"):
        assert read_regular(tree.fd, path, 1 << 20) == INSIDE
    fd = open_no_symlinks(tree.fd, "a/b/f.txt", os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        assert f.read() == INSIDE


@pytest.mark.parametrize("path", ["file-in", "file-out", "file-out-rel"])
def test_a_symlink_as_the_last_component_is_not_followed(tree: Tree, path: str) -> None:
    # Even one that stays inside: the reader cannot tell what a command planted.
    refused(tree, path, errno.ELOOP)
    with pytest.raises(OSError) as caught:
        os.close(open_no_symlinks(tree.fd, path, os.O_RDONLY))
    assert caught.value.errno == errno.ELOOP


@pytest.mark.parametrize(
    "path", ["dir-in/b/f.txt", "dir-out/secret.txt", "a/up/a/b/f.txt", "dir-in/", "file-in/"]
)
def test_a_symlink_in_the_middle_is_not_followed(tree: Tree, path: str) -> None:
    refused(tree, path, errno.ELOOP)


@pytest.mark.parametrize("path", ["a/../a/b/f.txt", "../outside/secret.txt", "a/b/..", ".."])
def test_dot_dot_is_refused_even_when_it_stays_inside(tree: Tree, path: str) -> None:
    refused(tree, path, errno.EXDEV)


def test_absolute_paths_are_refused(tree: Tree) -> None:
    for path in (str(tree.root / "a" / "b" / "f.txt"), str(tree.outside / "secret.txt")):
        refused(tree, path, errno.EXDEV)


@pytest.mark.parametrize("path", ["", ".", "./", "/"])
def test_the_directory_itself_is_refused(tree: Tree, path: str) -> None:
    refused(tree, path, errno.EXDEV)


def test_a_fifo_neither_blocks_nor_is_read(tree: Tree) -> None:
    fifo = tree.root / "a" / "pipe"
    os.mkfifo(fifo)
    outcome: list[BaseException | bytes] = []

    def attempt() -> None:
        try:
            outcome.append(read_regular(tree.fd, "a/pipe", 1 << 20))
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(FIFO_BOUND_S)
    if reader.is_alive():  # blocked in open(): release it with a writer, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(FIFO_BOUND_S)
        pytest.fail("read_regular blocked on a FIFO")
    [result] = outcome
    assert isinstance(result, NotRegular), result
    assert result.errno == errno.EINVAL


@pytest.mark.parametrize("path", ["a", "a/b", "a/b/"])
def test_a_directory_is_not_regular(tree: Tree, path: str) -> None:
    with pytest.raises(NotRegular):
        read_regular(tree.fd, path, 1 << 20)


def test_a_trailing_slash_on_a_file_is_not_a_directory(tree: Tree) -> None:
    refused(tree, "a/b/f.txt/", errno.ENOTDIR)


def test_missing_files_are_enoent(tree: Tree) -> None:
    for path in ("a/b/none.txt", "a/none/f.txt"):
        refused(tree, path, errno.ENOENT)


def test_the_size_cap(tree: Tree) -> None:
    size = len(INSIDE)
    assert read_regular(tree.fd, "a/b/f.txt", size) == INSIDE  # exactly the cap: read
    with pytest.raises(TooLarge) as caught:
        read_regular(tree.fd, "a/b/f.txt", size - 1)
    assert caught.value.errno == errno.EFBIG


def test_a_file_that_grows_while_it_is_read_is_too_large(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size is looked at once (fstat), then the file grows, as a command appending to it
    would make it: what is read stops past the cap and is refused, never returned."""
    path = tree.root / "a" / "b" / "f.txt"
    real_fstat = os.fstat
    grown: list[int] = []

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        if not grown and st.st_ino == os.stat(path).st_ino:
            with open(path, "ab") as f:  # after the size was taken: a concurrent append
                f.write(b"x" * 4096)
            grown.append(fd)
        return st

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    with pytest.raises(TooLarge):
        read_regular(tree.fd, "a/b/f.txt", len(INSIDE) + 10)
    monkeypatch.undo()
    assert grown, "the file did not grow between the size check and the read"
    assert path.stat().st_size > len(INSIDE) + 10


def test_no_descriptor_is_left_open(tree: Tree) -> None:
    os.mkfifo(tree.root / "a" / "pipe")
    before = set(os.listdir("/proc/self/fd"))
    for path in (
        "a/b/f.txt",
        "dir-in/b/f.txt",
        "a/up/a/b/f.txt",
        "file-out",
        "a/b/none.txt",
        "a",
        "a/pipe",
        "a/b/f.txt/",
    ):
        for cap in (1, 1 << 20):
            with contextlib.suppress(OSError):
                read_regular(tree.fd, path, cap)
    assert set(os.listdir("/proc/self/fd")) == before
