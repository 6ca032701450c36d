"""Opening beneath a directory (``switchboard.beneath``), what the tool executor's file tools
and the services' own reads rely on beyond the reads of test_beneath_reads.py: what an
escape, a loop or a refused link reports (errno, message and the path asked, which a tool shows
the model), the mode of files created, the descriptor a directory or a kept link yields, links
whose targets hold ``.``, ``//`` or end on a directory, the kernel's 40-link limit, and which
resolver is used when the kernel has no ``openat2``. Every test runs on both resolvers;
every target is inside a temporary directory."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from switchboard import beneath
from switchboard.beneath import (
    MAX_SYMLINKS,
    O_CLOEXEC,
    O_PATH,
    NotRegular,
    Resolver,
    TooLarge,
    open_beneath,
    open_no_symlinks,
    openat2,
    read_regular,
    walk_open,
)


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
    outside: Path


@pytest.fixture
def tree(tmp_path: Path, resolver: Resolver) -> Iterator[Tree]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (root / "a" / "b" / "f.txt").write_bytes(b"inside\n")
    (root / "fl").symlink_to("a/b/f.txt")
    (root / "alias").symlink_to("a")
    (root / "abs").symlink_to(outside)
    (root / "loop").symlink_to("loop")
    fd = os.open(root, O_PATH | os.O_DIRECTORY | O_CLOEXEC)
    try:
        yield Tree(fd, root, outside)
    finally:
        os.close(fd)


def _error(call: Callable[..., int], *args: object) -> OSError:
    with pytest.raises(OSError) as caught:
        fd = call(*args)
        os.close(fd)
        pytest.fail(f"{args!r} opened")
    return caught.value


def _reports(exc: OSError, code: int, path: str) -> None:
    assert (exc.errno, exc.strerror, exc.filename) == (code, os.strerror(code), path)


@pytest.mark.parametrize("path", ["../outside", "a/../../outside", "abs/x", "abs"])
def test_an_escape_reports_exdev_and_the_path(tree: Tree, path: str) -> None:
    _reports(_error(open_beneath, tree.fd, path, os.O_RDONLY), errno.EXDEV, path)


def test_an_absolute_path_reports_exdev_and_the_path(tree: Tree) -> None:
    path = str(tree.outside)
    _reports(_error(open_beneath, tree.fd, path, os.O_RDONLY), errno.EXDEV, path)
    _reports(_error(open_no_symlinks, tree.fd, path, os.O_RDONLY), errno.EXDEV, path)


def test_open_no_symlinks_reports_a_link_with_the_path(tree: Tree) -> None:
    for path in ("alias/b/f.txt", "alias/"):
        _reports(_error(open_no_symlinks, tree.fd, path, os.O_RDONLY), errno.ELOOP, path)
    _reports(_error(open_no_symlinks, tree.fd, "a/../fl", os.O_RDONLY), errno.EXDEV, "a/../fl")


def _chain(root: Path, n: int) -> str:
    """``l<n>`` -> ... -> ``l1`` -> ``a/b/f.txt``: opening ``l<n>`` follows ``n`` links."""
    (root / "l1").symlink_to("a/b/f.txt")
    for i in range(2, n + 1):
        (root / f"l{i}").symlink_to(f"l{i - 1}")
    return f"l{n}"


def test_forty_links_are_followed_the_forty_first_is_a_loop(tree: Tree) -> None:
    longest = _chain(tree.root, MAX_SYMLINKS + 1)
    fd = open_beneath(tree.fd, f"l{MAX_SYMLINKS}", os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"inside\n"
    finally:
        os.close(fd)
    _reports(_error(open_beneath, tree.fd, longest, os.O_RDONLY), errno.ELOOP, longest)
    _reports(_error(open_beneath, tree.fd, "loop", os.O_RDONLY), errno.ELOOP, "loop")


def _mode(fd: int) -> int:
    try:
        return stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def test_created_files_get_the_mode_asked(tree: Tree) -> None:
    create = os.O_CREAT | os.O_WRONLY | os.O_EXCL
    assert _mode(open_beneath(tree.fd, "a/new.txt", create, 0o600)) == 0o600
    assert _mode(open_no_symlinks(tree.fd, "a/b/new.txt", create, 0o600)) == 0o600
    # No mode: no permission bits, as open(2) with mode 0.
    assert _mode(open_beneath(tree.fd, "a/bare.txt", create)) == 0
    assert _mode(open_no_symlinks(tree.fd, "a/b/bare.txt", create)) == 0


def test_the_low_level_calls_create_with_mode_zero_by_default(tmp_path: Path) -> None:
    fd = os.open(tmp_path, O_PATH | os.O_DIRECTORY | O_CLOEXEC)
    try:
        create = os.O_CREAT | os.O_WRONLY | os.O_EXCL
        assert _mode(walk_open(fd, "w.txt", create)) == 0
        if beneath.openat2_available():
            assert _mode(openat2(fd, "o.txt", create)) == 0
            # A mode without O_CREAT is not passed on (the kernel would refuse it: EINVAL).
            assert _mode(openat2(fd, "o.txt", os.O_RDONLY, 0o644)) == 0
    finally:
        os.close(fd)


def test_a_directory_path_yields_a_descriptor_with_the_flags_asked(tree: Tree) -> None:
    for path in ("a/b/..", "a/b/../", "alias"):
        fd = open_beneath(tree.fd, path, O_PATH | os.O_DIRECTORY)
        try:
            assert os.fstat(fd).st_ino == (tree.root / "a").stat().st_ino, path
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & O_PATH, path
            assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC, path
        finally:
            os.close(fd)


def test_links_to_dot_and_with_empty_components(tree: Tree) -> None:
    (tree.root / "a" / "here").symlink_to(".")
    (tree.root / "dots").symlink_to("./a//b/./f.txt")
    (tree.root / "a" / "back").symlink_to("./../a/b/f.txt")  # "." then "..": back to the root
    fd = open_beneath(tree.fd, "a/here", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert os.fstat(fd).st_ino == (tree.root / "a").stat().st_ino
    finally:
        os.close(fd)
    for path in ("dots", "a/back"):
        fd = open_beneath(tree.fd, path, os.O_RDONLY)
        try:
            assert os.read(fd, 100) == b"inside\n", path
        finally:
            os.close(fd)


def test_an_unnamed_file_in_a_directory_reached_by_dot_dot_gets_its_mode(tree: Tree) -> None:
    fd = open_beneath(tree.fd, "a/b/..", os.O_TMPFILE | os.O_WRONLY, 0o600)
    try:
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
        assert stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def test_a_last_link_is_kept_with_o_nofollow_and_followed_without(tree: Tree) -> None:
    fd = open_beneath(tree.fd, "fl", O_PATH | os.O_NOFOLLOW)
    try:
        assert stat.S_ISLNK(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    fd = open_beneath(tree.fd, "fl", O_PATH)
    try:
        assert stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def test_what_read_regular_refuses_says_why_and_which_path(tree: Tree) -> None:
    with pytest.raises(NotRegular) as not_regular:
        read_regular(tree.fd, "a/b", 100)
    _reason = (not_regular.value.errno, not_regular.value.strerror, not_regular.value.filename)
    assert _reason == (errno.EINVAL, "not a regular file", "a/b")
    with pytest.raises(TooLarge) as too_large:
        read_regular(tree.fd, "a/b/f.txt", 3)
    _reason = (too_large.value.errno, too_large.value.strerror, too_large.value.filename)
    assert _reason == (errno.EFBIG, "larger than 3 bytes", "a/b/f.txt")


def test_a_file_of_several_reads_comes_back_whole(tree: Tree) -> None:
    data = os.urandom(1024) * 2600  # 2.5 MiB: three reads of at most 1 MiB
    (tree.root / "a" / "big.bin").write_bytes(data)
    assert read_regular(tree.fd, "a/big.bin", len(data)) == data


def test_growing_past_a_mib_while_read_is_refused(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size is taken (10 bytes), then the file grows to 3 MiB: it is refused after the cap,
    however many reads it took, with the cap and the path in the error."""
    path = tree.root / "a" / "grows.bin"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat
    grown: list[int] = []

    def fstat_then_grow(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        if not grown and st.st_ino == os.stat(path).st_ino:
            with open(path, "ab") as f:
                f.write(b"y" * (3 << 20))
            grown.append(fd)
        return st

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    with pytest.raises(TooLarge) as caught:
        read_regular(tree.fd, "a/grows.bin", (3 << 19) + 10)
    monkeypatch.undo()
    assert grown
    reason = (caught.value.errno, caught.value.strerror, caught.value.filename)
    assert reason == (errno.EFBIG, f"larger than {(3 << 19) + 10} bytes", "a/grows.bin")


def test_the_probe_answers_what_the_kernel_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        os.close(openat2(-100, str(tmp_path), O_PATH | os.O_DIRECTORY))
        kernel = True
    except OSError:
        kernel = False
    monkeypatch.setattr(beneath, "_probed", None)
    assert beneath.openat2_available() is kernel
    assert beneath._probed is kernel  # asked once, then remembered


def test_the_resolver_follows_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    beneath.use_resolver(None)
    monkeypatch.setattr(beneath, "_probed", False)  # a kernel without openat2
    try:
        assert beneath.resolver() == "walk"
        with pytest.raises(RuntimeError, match=r"^openat2 is not available on this kernel$"):
            beneath.use_resolver("openat2")
        beneath.use_resolver("walk")
        assert beneath.resolver() == "walk"
        beneath.use_resolver(None)
        monkeypatch.setattr(beneath, "_probed", True)
        assert beneath.resolver() == "openat2"
    finally:
        beneath.use_resolver(None)
