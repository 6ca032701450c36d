"""Where the per-call cgroups of :mod:`.cgroups` go: the memory and pids hierarchies mounted
here (cgroup v2, or v1 with one hierarchy per controller), this process's place in them, and the
plain file operations on cgroup files."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

EXECUTOR_LEAF = "sb-executor"
CONTROLLERS = ("memory", "pids")


class CgroupUnavailable(Exception):
    """Per-call cgroups cannot be made here; the message says why."""


@dataclass(frozen=True)
class Hierarchy:
    """One cgroup hierarchy the call's cgroups are made in: ``keys`` are how
    ``/proc/self/cgroup`` names it (``""`` for v2), ``view`` the parent's path as shown there."""

    keys: frozenset[str]
    parent: Path
    view: str


@dataclass(frozen=True)
class _Mount:
    root: str
    point: str
    fstype: str
    options: frozenset[str]


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def _mounts() -> list[_Mount]:
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                options = frozenset(tail[2].split(","))
                found.append(_Mount(_unescape(fields[3]), _unescape(fields[4]), tail[0], options))
    return found


def own_cgroups() -> dict[str, str]:
    """This process's cgroups: ``{controller: path}``, ``""`` for the v2 hierarchy."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _directory(mount: _Mount, view: str) -> Path:
    root = mount.root.rstrip("/")
    if root and view != root and not view.startswith(root + "/"):
        raise CgroupUnavailable(f"cgroup {view} is not visible under {mount.point}")
    return Path(mount.point) / view[len(root) :].lstrip("/")


def write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def procs_of(directory: Path) -> list[int]:
    try:
        return [int(p) for p in (directory / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _enable_controllers(parent: Path, own: bool) -> None:
    """cgroup v2: let ``parent``'s children have memory and pids limits. A cgroup holding
    processes cannot, so when ``parent`` is the executor's own cgroup and holds nothing but
    the executor, the executor moves into a leaf of its own first."""
    have = set((parent / "cgroup.controllers").read_text().split())
    lacking = [c for c in CONTROLLERS if c not in have]
    if lacking:
        raise CgroupUnavailable(
            f"{parent} has no {' or '.join(lacking)} controller (enable it in the "
            "cgroup.subtree_control of its parent, or set SB_EXEC_CGROUP_PARENT)"
        )
    control = parent / "cgroup.subtree_control"
    if set(CONTROLLERS) <= set(control.read_text().split()):
        return
    try:
        write(control, " ".join(f"+{c}" for c in CONTROLLERS))
        return
    except OSError as exc:
        if exc.errno != errno.EBUSY or not own or procs_of(parent) != [os.getpid()]:
            raise CgroupUnavailable(
                f"cannot enable memory and pids in {control} ({exc.strerror}): it holds "
                "processes; set SB_EXEC_CGROUP_PARENT to a cgroup delegated to the executor"
            ) from exc
    leaf = parent / EXECUTOR_LEAF
    leaf.mkdir(exist_ok=True)
    write(leaf / "cgroup.procs", str(os.getpid()))
    write(control, " ".join(f"+{c}" for c in CONTROLLERS))


def find_hierarchies(parent: str) -> tuple[int, list[Hierarchy]]:
    """The cgroup version and, for memory and pids, the hierarchies and the parent in each:
    ``parent`` (a cgroup path as ``/proc/self/cgroup`` shows them, created if missing) or this
    process's own cgroup. Raises :class:`CgroupUnavailable` (or ``OSError``)."""
    own = own_cgroups()
    mounts = _mounts()
    v1 = {c: m for m in mounts if m.fstype == "cgroup" for c in CONTROLLERS if c in m.options}
    if v1:
        if set(v1) != set(CONTROLLERS):
            raise CgroupUnavailable("the memory and pids controllers are not both mounted")
        hierarchies: list[Hierarchy] = []
        for mount in {m.point: m for m in v1.values()}.values():
            keys = frozenset(c for c in CONTROLLERS if c in mount.options)
            view = parent or own.get(next(iter(sorted(keys))), "")
            if not view:
                raise CgroupUnavailable("this process is in no memory/pids cgroup")
            directory = _directory(mount, view)
            directory.mkdir(parents=True, exist_ok=True)
            hierarchies.append(Hierarchy(keys, directory, view))
        return 1, hierarchies
    unified = [m for m in mounts if m.fstype == "cgroup2"]
    if not unified or "" not in own:
        raise CgroupUnavailable("no cgroup v2 hierarchy and no memory/pids v1 hierarchy")
    mount = next((m for m in unified if m.point == "/sys/fs/cgroup"), unified[0])
    view = parent or own[""]
    directory = _directory(mount, view)
    directory.mkdir(parents=True, exist_ok=True)
    _enable_controllers(directory, own=not parent or parent == own[""])
    return 2, [Hierarchy(frozenset({""}), directory, view)]
