"""The seccomp layer of a sandboxed call, applied by :mod:`.inner` to itself before ``exec``.

A denylist (namespaces, mounts, ptrace and friends, kernel modules, ``setsid``/``setpgid`` so the
call cannot leave its process group, sockets other than ``AF_UNIX`` unless the network is
granted) plus signal confinement: ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo``,
``rt_tgsigqueueinfo``, ``pidfd_open``, ``pidfd_send_signal`` and ``fcntl(F_SETOWN)`` are
answered by a supervisor (seccomp user notification): allowed only when every target is in the
call's own process group (its processes: they cannot leave it), refused with ``EPERM``
otherwise, so a command cannot signal the executor, other calls or anything else on the host.
The supervisor is a grandchild of the wrapper that detaches (the command never sees it as a
child), holds only the listener, and dies with the call's process group -- or once the command
itself is gone (what it left then gets ``ENOSYS``: still refused). A command cannot install a
filter with its own listener (which would take precedence), so the supervisor's answer stands.

Standard library only, no imports from this package: run by source with :mod:`.inner`. It
runs in a fresh interpreter on every call, so it imports only cheap modules (no ``ctypes.util``,
``re``, ``socket``, ``contextlib``, ``typing``, and ``signal`` only in the supervisor: together
most of that interpreter's start-up).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import select
import struct
from _socket import AF_UNIX

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the per-call interpreter several ms: for mypy only
    from collections.abc import Callable
    from typing import Any

_ACT_ALLOW = 0x7FFF0000
_ACT_NOTIFY = 0x7FC00000
_CMP_NE, _CMP_EQ, _CMP_MASKED_EQ = 1, 4, 7
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "bpf", "keyctl", "add_key", "request_key", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "perf_event_open",
    "userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "setsid", "setpgid", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
    "mount_setattr", "pidfd_getfd", "process_madvise",
)  # fmt: skip
# clone() flags that create namespaces: refused like unshare().
_CLONE_NS_FLAGS = (0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x08000000, 0x04000000,
                   0x02000000)  # fmt: skip
# Signal senders the supervisor answers (tgkill to the wrapper's own pid -- the command's own
# threads, e.g. raise() or a Go runtime's preemption -- needs no round trip).
SIGNAL_SYSCALLS = (
    "kill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
)  # fmt: skip
_F_SETOWN, _F_SETOWN_EX = 8, 15
_FIOSETOWN, _SIOCSPGRP = 0x8901, 0x8902
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
# <linux/seccomp.h>: struct seccomp_notif (80 bytes) and seccomp_notif_resp (24 bytes).
_NOTIF_RECV, _NOTIF_SEND, _NOTIF_ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
_FLAG_CONTINUE = 1
_LIBSECCOMP = "libseccomp.so.2"


def _act_errno(err: int) -> int:
    return 0x00050000 | (err & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def _library() -> Any:
    try:  # by its soname first: ctypes.util.find_library forks ``ldconfig -p``
        lib = ctypes.CDLL(_LIBSECCOMP, use_errno=True)
    except OSError:
        from ctypes.util import find_library

        lib = ctypes.CDLL(find_library("seccomp") or _LIBSECCOMP, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    )  # fmt: skip
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    lib.seccomp_notify_fd.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    return lib


def apply_seccomp(cfg: dict[str, Any]) -> tuple[int, dict[int, str]]:
    """Load the filter (libseccomp); return the notification listener and the numbers of the
    syscalls it receives. Raises if the filter cannot be loaded."""
    lib = _library()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    notified: dict[int, str] = {}

    def rule(syscall: str, action: int, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(syscall.encode())
        if nr < 0:
            return  # not a syscall on this architecture
        arr = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
        rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if rc < 0:
            raise OSError(-rc, f"seccomp rule for {syscall} failed")
        if action == _ACT_NOTIFY:
            notified[nr] = syscall

    eperm = _act_errno(errno.EPERM)
    try:
        for syscall in DENIED_SYSCALLS:
            rule(syscall, eperm)
        for flag in _CLONE_NS_FLAGS:
            rule("clone", eperm, (0, _CMP_MASKED_EQ, flag, flag))
        rule("clone3", _act_errno(errno.ENOSYS))  # flags live in memory: make libc use clone
        if not cfg.get("network"):
            rule("socket", _act_errno(errno.EACCES), (0, _CMP_NE, AF_UNIX, 0))
        # Signals: see the module docstring.
        for syscall in SIGNAL_SYSCALLS:
            rule(syscall, _ACT_NOTIFY)
        rule("tgkill", _ACT_NOTIFY, (0, _CMP_NE, os.getpid(), 0))
        rule("fcntl", _ACT_NOTIFY, (1, _CMP_EQ, _F_SETOWN, 0))
        rule("fcntl", eperm, (1, _CMP_EQ, _F_SETOWN_EX, 0))  # the owner is behind a pointer
        rule("ioctl", eperm, (1, _CMP_EQ, _FIOSETOWN, 0))
        rule("ioctl", eperm, (1, _CMP_EQ, _SIOCSPGRP, 0))
        # A filter with a listener of the command's own would answer before ours.
        flag = _SECCOMP_FILTER_FLAG_NEW_LISTENER
        rule("seccomp", eperm, (1, _CMP_MASKED_EQ, flag, flag))
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, "seccomp_load failed")
        listener = int(lib.seccomp_notify_fd(ctx))
        if listener < 0:
            raise OSError(-listener, "seccomp_notify_fd failed")
    finally:
        lib.seccomp_release(ctx)
    return listener, notified


def _started(pid: int) -> str | None:
    """When ``pid`` started (``None``: it is gone): tells it from a later process with its pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def start_supervisor(listener: int, notified: dict[int, str]) -> None:
    """Fork the supervisor of ``listener`` (detached: a grandchild) and close the listener
    here, so the command never holds it."""
    group, command = os.getpgrp(), os.getpid()
    started = _started(command)
    pid = os.fork()
    if pid == 0:
        try:
            if os.fork() == 0:
                _serve(listener, notified, group, lambda: _started(command) == started)
        finally:
            os._exit(0)
    os.close(listener)
    os.waitpid(pid, 0)


def _serve(
    listener: int, notified: dict[int, str], group: int, command_alive: Callable[[], bool]
) -> None:
    import signal  # here, in the supervisor only: it pulls in enum, a cost on every call's path

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE,
                   signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):  # fmt: skip
        signal.signal(signum, signal.SIG_IGN)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, listener)
    os.closerange(listener + 1, 65536)
    request = bytearray(80)
    waiting = select.poll()
    waiting.register(listener, select.POLLIN)
    while True:
        if not waiting.poll(1000):
            if not command_alive():
                return
            continue
        request[:] = bytes(80)
        try:
            fcntl.ioctl(listener, _NOTIF_RECV, request, True)
        except OSError as exc:
            if exc.errno in (errno.EINTR, errno.ENOENT):
                continue
            return
        nid, caller, _flags, nr = struct.unpack_from("=QIIi", request, 0)
        args = struct.unpack_from("=6Q", request, 32)
        try:
            allowed = _allowed(notified.get(nr, ""), args, caller, group)
            fcntl.ioctl(listener, _NOTIF_ID_VALID, struct.pack("=Q", nid))
        except OSError:
            allowed = False  # the caller is gone (or its answer cannot be worked out)
        error, flags = (0, _FLAG_CONTINUE) if allowed else (-errno.EPERM, 0)
        try:  # noqa: SIM105 (contextlib: one import more per call)
            fcntl.ioctl(listener, _NOTIF_SEND, struct.pack("=QqiI", nid, 0, error, flags))
        except OSError:
            pass  # the caller is gone


def _s32(value: int) -> int:
    return ctypes.c_int32(value & 0xFFFFFFFF).value


def in_group(pid: int, group: int) -> bool:
    """Whether process (or thread) ``pid`` is in process group ``group`` right now."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[2]) == group
    except (OSError, ValueError, IndexError):
        return False


def _pidfd_target(caller: int, fd: int) -> int:
    """The process a pidfd (or a ``/proc/<pid>`` directory descriptor) of ``caller`` names."""
    try:
        with open(f"/proc/{caller}/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
        target = os.readlink(f"/proc/{caller}/fd/{fd}")
    except (OSError, ValueError, IndexError):
        return 0
    pid = target.removeprefix("/proc/")
    return int(pid) if target.startswith("/proc/") and pid.isdigit() and pid.isascii() else 0


def _allowed(name: str, raw: tuple[int, ...], caller: int, group: int) -> bool:
    a0, a1, a2 = _s32(raw[0]), _s32(raw[1]), _s32(raw[2])
    if name == "kill":  # -1 is every process (even where the group is 1: bubblewrap's)
        return a0 == 0 or (a0 < -1 and -a0 == group) or in_group(a0, group)
    if name in ("tkill", "rt_sigqueueinfo", "pidfd_open"):
        return in_group(a0, group)
    if name in ("tgkill", "rt_tgsigqueueinfo"):
        return in_group(a0, group) and in_group(a1, group)
    if name == "pidfd_send_signal":
        return in_group(_pidfd_target(caller, a0), group)
    if name == "fcntl":  # F_SETOWN: a pid, or a process group as its negative
        return a2 == 0 or (a2 < 0 and -a2 == group) or in_group(a2, group)
    return False


def signals_confined() -> bool:
    """Measured: ``kill(-1, 0)`` (every process this one may signal; nothing is sent) fails
    with ``EPERM`` only when the supervisor answers it: the kernel itself never says so."""
    try:
        os.kill(-1, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return False
