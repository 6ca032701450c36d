"""The first program of every sandboxed call: confine itself, measure, report, exec the command.

Run as ``python3 -I -S -c <this source> <config json> <argv...>`` inside the outer layers
(process group, rlimits, dedicated uid, no_new_privs, bubblewrap namespaces when available).
It then applies the layers only a process can apply to itself -- Landlock (writes confined to
the workspace, reads to the system directories, TCP denied unless network is granted) and a
seccomp denylist -- and measures, from inside, what is really in force: ``/proc/self/status``
(NoNewPrivs, Seccomp mode, capabilities), its namespaces against the executor's, whether an
``AF_INET`` socket can be created, whether a denied syscall is denied. The measurement is
written as JSON on the report fd, which is closed before ``exec`` so the command cannot forge
it. If a layer the profile requires is not in force, the command is never run (exit 126).

Standard library only, and no imports from this package: the file is run by source.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import resource
import socket
import sys
from typing import Any

# Landlock (linux/landlock.h)
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_FS_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
_FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir
_DEV_FILE_RW = (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
_NET_ALL_TCP = (1 << 0) | (1 << 1)  # bind_tcp, connect_tcp
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals

# seccomp / libseccomp
_ACT_ALLOW = 0x7FFF0000
_CMP_NE, _CMP_MASKED_EQ = 1, 7
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "bpf", "keyctl", "add_key", "request_key", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "perf_event_open",
    "userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "setsid", "setpgid", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
    "mount_setattr",
)  # fmt: skip
# clone() flags that create namespaces: refused like unshare().
_CLONE_NS_FLAGS = (0x10000000, 0x00020000, 0x20000000, 0x40000000, 0x08000000, 0x04000000,
                   0x02000000)  # fmt: skip


def _act_errno(err: int) -> int:
    return 0x00050000 | (err & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc = ctypes.CDLL(None, use_errno=True)


def _syscall(nr: int, *args: Any) -> int:
    return int(_libc.syscall(ctypes.c_long(nr), *args))


def landlock_abi() -> int:
    abi = _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(abi, 0)


def apply_landlock(cfg: dict[str, Any]) -> int:
    """Confine this process; return the ABI used (0 = not available). Raises on failure."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    handled = (1 << 13) - 1
    handled |= (1 << 13) if abi >= 2 else 0  # refer
    handled |= (1 << 14) if abi >= 3 else 0  # truncate
    handled |= (1 << 15) if abi >= 5 else 0  # ioctl_dev
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4 and not cfg.get("network"):
        attr.handled_access_net, size = _NET_ALL_TCP, 16
    if abi >= 6:
        attr.scoped, size = _SCOPE_ALL, 24
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        rules = [(p, _FS_READ) for p in cfg.get("ro", [])]
        rules += [(p, handled) for p in cfg.get("rw", [])]
        rules += [(p, _DEV_FILE_RW) for p in cfg.get("dev", [])]
        for path, access in rules:
            try:
                fd = int(path) if isinstance(path, int) else os.open(path, os.O_PATH)
            except OSError:
                continue  # a path this host does not have
            try:
                is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
                allowed = access & handled & (~0 if is_dir else _FS_FILE_RIGHTS)
                rule = _PathBeneath(allowed, fd)
                if _syscall(_SYS_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path!r} failed")
            finally:
                if not isinstance(path, int):
                    os.close(fd)  # passed fds are closed by main() after all layers
        if _syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def apply_seccomp(cfg: dict[str, Any]) -> None:
    """Load the denylist filter (libseccomp). Raises if it cannot be loaded."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    )  # fmt: skip
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")

    def rule(syscall: str, action: int, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(syscall.encode())
        if nr < 0:
            return  # not a syscall on this architecture
        arr = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
        rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if rc < 0:
            raise OSError(-rc, f"seccomp rule for {syscall} failed")

    try:
        for syscall in DENIED_SYSCALLS:
            rule(syscall, _act_errno(errno.EPERM))
        for flag in _CLONE_NS_FLAGS:
            rule("clone", _act_errno(errno.EPERM), (0, _CMP_MASKED_EQ, flag, flag))
        rule("clone3", _act_errno(errno.ENOSYS))  # flags live in memory: make libc use clone
        if not cfg.get("network"):
            rule("socket", _act_errno(errno.EACCES), (0, _CMP_NE, socket.AF_UNIX, 0))
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, "seccomp_load failed")
    finally:
        lib.seccomp_release(ctx)


def _status() -> dict[str, str]:
    with open("/proc/self/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _denied(fn: Any) -> bool:
    try:
        fn()
    except OSError:
        return True
    return False


def measure(cfg: dict[str, Any], landlock_abi_used: int) -> dict[str, Any]:
    """What is in force in this process right now, observed rather than assumed."""
    status = _status()
    host_ns: dict[str, int] = cfg.get("host_ns", {})
    ns = {}
    for kind, ino in host_ns.items():
        try:
            ns[kind] = os.stat(f"/proc/self/ns/{kind}").st_ino != ino
        except OSError:
            ns[kind] = False
    unshare_denied = _libc.unshare(0) != 0
    seccomp_mode = int(status.get("Seccomp", "0").strip() or 0)

    def inet() -> None:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()

    def root_dir() -> None:
        os.close(os.open("/", os.O_RDONLY | os.O_DIRECTORY))

    def tcp_connect() -> None:
        # Landlock denies connect() with EACCES before any packet; without it this gets
        # ECONNREFUSED (or connects) -- either way the network is reachable.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            try:
                s.connect(("127.0.0.1", 9))
            except PermissionError:
                raise
            except OSError:
                pass

    socket_denied = _denied(inet)
    connect_denied = socket_denied or _denied(tcp_connect)
    host_net = cfg.get("host_net")
    net_isolated = host_net is not None and os.stat("/proc/self/ns/net").st_ino != host_net
    limits = {}
    for name in ("CPU", "AS", "FSIZE", "NOFILE", "NPROC", "CORE"):
        soft = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))[0]
        limits[name.lower()] = None if soft == resource.RLIM_INFINITY else soft
    return {
        "measured": True,
        "uid": os.getuid(),
        "gid": os.getgid(),
        "no_new_privs": status.get("NoNewPrivs", "0").strip() == "1",
        "caps_effective": status.get("CapEff", "").strip(),
        "seccomp": seccomp_mode == 2 and unshare_denied,
        "seccomp_mode": seccomp_mode,
        "landlock": landlock_abi_used > 0 and _denied(root_dir),
        "landlock_abi": landlock_abi_used,
        "namespaces": bool(ns) and all(ns.values()),
        "ns": ns,
        "network": not (connect_denied or net_isolated),
        "network_checks": {
            "inet_socket_denied": socket_denied,
            "tcp_connect_denied": connect_denied,
            "net_namespace": net_isolated,
        },
        "rlimits": limits,
    }


def main(argv: list[str]) -> int:
    cfg: dict[str, Any] = json.loads(argv[0])
    command = argv[1:]
    report_fd: int = cfg["report_fd"]
    errors: list[str] = []
    if cfg.get("nproc"):
        # Inside a user namespace this counts this sandbox's processes only.
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))
    abi = 0
    if cfg.get("landlock"):
        try:
            abi = apply_landlock(cfg)
        except OSError as exc:
            errors.append(f"landlock: {exc}")
    if cfg.get("seccomp"):
        try:
            apply_seccomp(cfg)
        except OSError as exc:
            errors.append(f"seccomp: {exc}")
    report = measure(cfg, abi)
    missing = [layer for layer in cfg.get("require", []) if not report.get(layer)]
    if cfg.get("network") is False and report["network"]:
        missing.append("network_isolation")
    report["missing"], report["errors"] = missing, errors
    report["ok"] = not missing
    with os.fdopen(report_fd, "w") as out:
        out.write(json.dumps(report))
    for fd in [p for p in cfg.get("rw", []) if isinstance(p, int)]:
        with contextlib.suppress(OSError):  # not consumed by landlock: the command gets none
            os.close(fd)
    if missing:
        sys.stderr.write(f"sandbox: refused, layers not in force: {', '.join(missing)}\n")
        return 126
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        sys.stderr.write(f"{command[0]}: command not found\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"{command[0]}: permission denied\n")
        return 126
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
        return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
