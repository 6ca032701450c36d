"""The first program of every sandboxed call: confine itself, measure, report, exec the command.

Run as ``python3 -I -S -c <bootstrap> <config json> <argv...>`` inside the outer layers
(process group, rlimits, dedicated uid, no_new_privs, bubblewrap namespaces when available, the
call's cgroup); the bootstrap (:func:`switchboard_tools.sandbox.launch.inner_source`) loads this
module and :mod:`.inner_seccomp` from their source. It then applies the layers only a process
can apply to itself -- Landlock (writes confined to the workspace, reads to the system
directories, TCP denied unless network is granted, signals and abstract sockets scoped) and the
seccomp filter with its signal supervisor -- and measures, from inside, what is really in force:
``/proc/self/status`` (NoNewPrivs, Seccomp mode, capabilities), its namespaces against the
executor's, whether an ``AF_INET`` socket can be created, whether a denied syscall is denied,
whether a signal outside the group is refused, which cgroup it is in. The measurement is written
as JSON on the report fd, which is closed before ``exec`` so the command cannot forge it. If a
layer the profile requires is not in force, the command is never run (exit 126).

Standard library only, and no imports from this package but :mod:`.inner_seccomp`. A fresh
interpreter runs this on every call, so its imports are kept cheap (``_socket`` rather than
``socket``, no ``contextlib``, ``typing`` only for mypy): each import is paid per call.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from _socket import AF_INET, SOCK_STREAM
from _socket import socket as _inet_socket

from switchboard_tools.sandbox import inner_seccomp

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the per-call interpreter several ms: for mypy only
    from typing import Any

# Landlock (linux/landlock.h)
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_FS_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
_FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir
_DEV_FILE_RW = (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
_NET_ALL_TCP = (1 << 0) | (1 << 1)  # bind_tcp, connect_tcp
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract unix sockets, signals


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


def _status() -> dict[str, str]:
    with open("/proc/self/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def _denied(fn: Any) -> bool:
    try:
        fn()
    except OSError:
        return True
    return False


def cgroup_view() -> dict[str, str]:
    """``/proc/self/cgroup`` as ``{controller: path}`` (``""``: the cgroup v2 hierarchy)."""
    view: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.readlines()
    except OSError:
        return view
    for line in lines:
        _, controllers, path = line.rstrip("\n").split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            view[controller] = path
    return view


def _in_cgroup(cfg: dict[str, Any]) -> bool:
    """Whether this process is in the call's cgroup: the path the executor made, or -- inside
    a cgroup namespace bubblewrap created after the executor moved it there -- its root."""
    expected: dict[str, str] = cfg.get("cgroup") or {}
    if not expected:
        return False
    view = cgroup_view()
    host_ns = cfg.get("host_cgroupns")
    own_ns = host_ns is not None and os.stat("/proc/self/ns/cgroup").st_ino != host_ns
    return all(view.get(c) == p or (own_ns and view.get(c) == "/") for c, p in expected.items())


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
    signals = inner_seccomp.signals_confined()

    def inet() -> None:
        _inet_socket(AF_INET, SOCK_STREAM).close()

    def root_dir() -> None:
        os.close(os.open("/", os.O_RDONLY | os.O_DIRECTORY))

    def tcp_connect() -> None:
        # Landlock denies connect() with EACCES before any packet; without it this gets
        # ECONNREFUSED (or connects) -- either way the network is reachable.
        s = _inet_socket(AF_INET, SOCK_STREAM)
        try:
            s.settimeout(0.2)
            s.connect(("127.0.0.1", 9))
        except PermissionError:
            raise
        except OSError:
            pass
        finally:
            s.close()

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
        "seccomp": seccomp_mode == 2 and unshare_denied and signals,
        "seccomp_mode": seccomp_mode,
        "signals_confined": signals,
        "landlock": landlock_abi_used > 0 and _denied(root_dir),
        "landlock_abi": landlock_abi_used,
        "namespaces": bool(ns) and all(ns.values()),
        "ns": ns,
        "cgroup": _in_cgroup(cfg),
        "network": not (connect_denied or net_isolated),
        "network_checks": {
            "inet_socket_denied": socket_denied,
            "tcp_connect_denied": connect_denied,
            "net_namespace": net_isolated,
        },
        "rlimits": limits,
    }


def missing_layers(cfg: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """The requirements of the call's profile that the measurement did not find in force."""
    missing = [layer for layer in cfg.get("require", []) if not report.get(layer)]
    for group in cfg.get("require_any", []):
        if not any(report.get(layer) for layer in group):
            missing.append("|".join(sorted(group)))
    if cfg.get("network") is False and report["network"]:
        missing.append("network_isolation")
    return missing


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
            listener, notified = inner_seccomp.apply_seccomp(cfg)
            inner_seccomp.start_supervisor(listener, notified)
        except OSError as exc:
            errors.append(f"seccomp: {exc}")
    report = measure(cfg, abi)
    missing = missing_layers(cfg, report)
    report["missing"], report["errors"] = missing, errors
    report["ok"] = not missing
    with os.fdopen(report_fd, "w") as out:
        out.write(json.dumps(report))
    for fd in [p for p in cfg.get("rw", []) if isinstance(p, int)]:
        # Not consumed by landlock: the command gets none (no contextlib: one import less).
        try:  # noqa: SIM105
            os.close(fd)
        except OSError:
            pass
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
