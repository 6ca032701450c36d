"""Opening a path beneath a directory descriptor, with no way out of it (the tool executor's file
tools, the scheduler's file watchers).

Two resolvers with the same contract, :func:`open_beneath`:

- ``openat2``: one ``openat2(2)`` call (Linux >= 5.6) with ``RESOLVE_BENEATH |
  RESOLVE_NO_MAGICLINKS``. The kernel refuses (``EXDEV``) any ``..``, absolute path or symlink
  that would leave the directory, at the moment it walks each component: there is no window
  between a check and the open for a concurrent rename or symlink swap to use.
- ``walk``: where the kernel has no ``openat2``, a walk component by component, each one opened
  with ``O_NOFOLLOW`` relative to the descriptor of the directory before it. A symlink is read
  (``readlinkat``) and its target walked the same way; absolute targets and ``..`` above the
  start are refused with ``EXDEV``, like the kernel does. Every step is relative to a
  descriptor this process holds, so a swap between two steps can only send the walk somewhere
  else *beneath* the start, never outside. (It cannot stop a directory this walk already
  entered from being renamed out of the tree by someone who can write outside it; the sandbox
  denies that to commands.)

Both follow symlinks that stay inside, both refuse ``/proc``-style magic links (the walk treats
their absolute targets as escapes). :func:`resolver` says which one is in use; tests force one
with :func:`use_resolver`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import Literal

Resolver = Literal["openat2", "walk"]

SYS_OPENAT2 = 437  # the same number on every architecture with the generic syscall table
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
MAX_SYMLINKS = 40  # as the kernel (ELOOP beyond)
_EAGAIN_RETRIES = 64

O_PATH: int = getattr(os, "O_PATH", 0)
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = [
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.POINTER(_OpenHow),
    ctypes.c_size_t,
]

_forced: Resolver | None = None
_probed: bool | None = None


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """``openat2(2)``: a new descriptor, or :class:`OSError` with the kernel's errno."""
    creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE
    how = _OpenHow(flags | O_CLOEXEC, mode if creates else 0, resolve)  # else EINVAL
    raw = os.fsencode(path)
    for _ in range(_EAGAIN_RETRIES):
        fd = int(_syscall(SYS_OPENAT2, dirfd, raw, ctypes.byref(how), ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        # EAGAIN: RESOLVE_BENEATH saw a concurrent rename and cannot vouch for '..': retry.
        if err not in (errno.EINTR, errno.EAGAIN):
            raise OSError(err, os.strerror(err), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def openat2_available() -> bool:
    """Whether this kernel (and any seccomp filter around this process) allows ``openat2``."""
    global _probed
    if _probed is None:
        try:
            os.close(openat2(-100, "/", O_PATH | os.O_DIRECTORY, 0, RESOLVE_NO_MAGICLINKS))
            _probed = True
        except OSError:
            _probed = False  # ENOSYS on kernels before 5.6, EPERM under some filters
    return _probed


def resolver() -> Resolver:
    """The resolver :func:`open_beneath` uses: ``openat2`` where available, else ``walk``."""
    if _forced is not None:
        return _forced
    return "openat2" if openat2_available() else "walk"


def use_resolver(which: Resolver | None) -> None:
    """Force a resolver (``None``: back to automatic). For tests and diagnostics."""
    global _forced
    if which == "openat2" and not openat2_available():
        raise RuntimeError("openat2 is not available on this kernel")
    _forced = which


def open_beneath(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    """Open ``path`` (relative) beneath ``dirfd``. Symlinks inside are followed (the last one
    too, unless ``flags`` has ``O_NOFOLLOW``); anything leading outside raises ``EXDEV``."""
    if resolver() == "openat2":
        return openat2(dirfd, path, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    return walk_open(dirfd, path, flags, mode)


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _escape(path: str) -> OSError:
    return OSError(errno.EXDEV, os.strerror(errno.EXDEV), path)


def walk_open(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    """The fallback resolver: see the module docstring."""
    if path.startswith("/"):
        raise _escape(path)
    nofollow = bool(flags & os.O_NOFOLLOW)
    todo = _parts(path)
    stack: list[int] = []  # descriptors of the directories entered below ``dirfd``
    links = 0
    try:
        while todo:
            name = todo.pop(0)
            cur = stack[-1] if stack else dirfd
            if name == "..":
                if not stack:
                    raise _escape(path)
                os.close(stack.pop())
                continue
            last = not todo
            failure: OSError | None = None
            try:
                if last:
                    fd = _open_last(cur, name, flags, mode, nofollow)
                    if fd is not None:
                        return fd
                else:
                    step = O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC
                    stack.append(os.open(name, step, dir_fd=cur))
                    continue
            except OSError as exc:
                # ELOOP/ENOTDIR from O_NOFOLLOW: perhaps a symlink, to be walked by hand.
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or (last and nofollow):
                    raise
                failure = exc
            target = _link_target(cur, name)
            if target is None:
                raise failure or OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            links += 1
            if links > MAX_SYMLINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):
                raise _escape(path)  # absolute symlinks are refused, as RESOLVE_BENEATH does
            todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
            if not todo:  # a link to "." or "": the directory it is in
                break
        cur = stack[-1] if stack else dirfd
        return os.open(".", flags | O_CLOEXEC, mode, dir_fd=cur)
    finally:
        for fd in stack:
            os.close(fd)


def _open_last(dirfd: int, name: str, flags: int, mode: int, nofollow: bool) -> int | None:
    """Open the last component without following it; ``None`` when it is a symlink to walk
    (``O_PATH | O_NOFOLLOW`` opens a symlink itself instead of failing)."""
    fd = os.open(name, flags | os.O_NOFOLLOW | O_CLOEXEC, mode, dir_fd=dirfd)
    if flags & O_PATH and not nofollow and stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _link_target(dirfd: int, name: str) -> str | None:
    """The target of ``name`` in ``dirfd`` if it is a symlink, else ``None``."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        if not stat.S_ISLNK(st.st_mode):
            return None
        return os.readlink(name, dir_fd=dirfd)
    except OSError:
        return None  # changed meanwhile: the original error stands


class NotRegular(OSError):
    """The path names something other than a regular file (a directory, a FIFO, a device)."""


class TooLarge(OSError):
    """The file is larger than the caller reads."""


def open_no_symlinks(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    """Open ``path`` (relative) beneath ``dirfd`` following no symlink at all, inside or out
    (``ELOOP`` for one), and no ``..``: what a service reading (or, with ``O_CREAT`` and
    ``mode``, writing) a file that an untrusted command may have planted uses (the memory
    indexer and its file flush, the bootstrap files, skills, file watchers). A symlink that
    stays inside is refused too: it could lead a file that others read (``AGENTS.md``) to one
    that is the owner's alone (``MEMORY.md``)."""
    parts = _parts(path)
    if not parts or path.startswith("/") or ".." in parts:
        raise _escape(path)
    if resolver() == "openat2":
        resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
        return openat2(dirfd, path, flags | os.O_NOFOLLOW, mode, resolve)
    stack: list[int] = []
    try:
        for name in parts[:-1]:
            step = O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC
            stack.append(_open_no_link(stack[-1] if stack else dirfd, name, step, path))
        last = stack[-1] if stack else dirfd
        final = flags | os.O_NOFOLLOW | O_CLOEXEC
        if path.endswith("/"):
            final |= os.O_DIRECTORY  # "file/" is ENOTDIR, as the kernel resolves it
        return _open_no_link(last, parts[-1], final, path, mode)
    finally:
        for fd in stack:
            os.close(fd)


def _open_no_link(dirfd: int, name: str, flags: int, path: str, mode: int = 0o777) -> int:
    """``os.open(name, flags)`` in ``dirfd`` (``flags`` with ``O_NOFOLLOW``); ``ELOOP`` for a
    symlink, as ``RESOLVE_NO_SYMLINKS`` says, also where ``O_DIRECTORY`` made it ``ENOTDIR``."""
    try:
        return os.open(name, flags, mode, dir_fd=dirfd)
    except NotADirectoryError:
        if _link_target(dirfd, name) is None:
            raise
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path) from None


def read_regular(dirfd: int, path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` beneath ``dirfd``, opened with
    :func:`open_no_symlinks` (never blocking on a FIFO); :class:`NotRegular` for anything
    else, :class:`TooLarge` past ``max_bytes``, ``OSError`` as the kernel says otherwise
    (``ENOENT``, ``ELOOP`` for a symlink, ``EXDEV`` for a way out)."""
    fd = open_no_symlinks(dirfd, path, os.O_RDONLY | os.O_NONBLOCK | O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", path)
        if st.st_size > max_bytes:
            raise TooLarge(errno.EFBIG, f"larger than {max_bytes} bytes", path)
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # grew while it was read
            raise TooLarge(errno.EFBIG, f"larger than {max_bytes} bytes", path)
        return b"".join(chunks)
    finally:
        os.close(fd)
