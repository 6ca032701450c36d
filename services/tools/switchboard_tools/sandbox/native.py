"""The compiled sandbox wrapper (``wrapper.c``): built, found, and its command line.

A sandboxed call's first program used to be a Python interpreter running :mod:`.inner`: ~35-40
ms of CPU per call before the command even starts (interpreter start-up, imports), most of the
cost of a call (docs/footprint.md, "Sandboxed exec"). ``wrapper.c`` does the same steps
(Landlock, the seccomp filter and its signal supervisor, the measurement, the JSON report,
``exec``) and starts in under a millisecond. ``make install`` builds it with
``python -m switchboard_tools.sandbox.native --build`` into the environment's ``libexec``
(inside the virtualenv, so never in git); the executor uses it when it is built and its probe
passes (``SB_SANDBOX_WRAPPER``, see :mod:`.settings`), else the Python wrapper.

It takes its configuration as one ``KEY=VALUE`` argument per setting (:func:`wrapper_args`)
rather than JSON: a C program then needs no JSON parser, and nothing needs unquoting.

It also has a first stage, ``sandbox-wrapper outer ... -- bwrap ...`` (``wrapper_outer.c``,
:func:`outer_args`): the cgroup entry, rlimits, uid drop, ``no_new_privs`` and parent-death
signal that the Python wrapper's calls get from a ``preexec_fn``
(:func:`~switchboard_tools.sandbox.process.outer_preexec`). Without a ``preexec_fn`` the
executor starts the call with ``vfork`` rather than a ``fork`` of its whole address space.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SOURCES = (
    "wrapper.c",
    "wrapper_outer.c",
    "wrapper_seccomp.c",
    "wrapper_report.c",
    "wrapper_util.c",
)
HEADERS = ("wrapper.h", "wrapper_report.h")
NAME = "sandbox-wrapper"
_CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-D_FORTIFY_SOURCE=2")


def default_path() -> Path:
    """Where ``make install`` puts it: the environment's own ``libexec`` (the virtualenv's)."""
    return Path(sys.prefix) / "libexec" / "switchboard" / NAME


def source_dir() -> Path:
    return Path(__file__).resolve().parent


def compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "gcc") or shutil.which("cc")


def build(dest: Path | None = None) -> Path:
    """Compile the wrapper to ``dest`` (default :func:`default_path`), atomically (a running
    executor never sees half a binary), readable and executable by everyone (the sandbox's
    dedicated uid runs it). Raises :class:`RuntimeError` with the compiler's output on failure."""
    dest = dest or default_path()
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (gcc or cc) found")
    dest.parent.mkdir(parents=True, exist_ok=True)
    src = source_dir()
    fd, tmp = tempfile.mkstemp(prefix=f".{NAME}-", dir=dest.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, *_CFLAGS, "-o", tmp, *(str(src / s) for s in SOURCES)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"building the sandbox wrapper failed:\n{done.stderr.strip()}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def find(path: Path | None = None) -> Path | None:
    """The built wrapper (``path``, default :func:`default_path`) if it is there and newer than
    its sources (a stale build after an update of ``wrapper.c`` is not used), else ``None``."""
    path = path or default_path()
    try:
        built = path.stat()
    except OSError:
        return None
    if not os.access(path, os.X_OK):
        return None
    src = source_dir()
    for name in (*SOURCES, *HEADERS):
        try:
            if (src / name).stat().st_mtime > built.st_mtime:
                return None
        except OSError:
            continue  # an installed package without its C sources: the build is what there is
    return path


def wrapper_args(cfg: Mapping[str, Any], argv: Sequence[str]) -> list[str]:
    """The compiled wrapper's arguments for the configuration ``cfg`` (what the Python wrapper
    gets as JSON, see :func:`~switchboard_tools.sandbox.launch.prepare_launch`) and the command
    ``argv``. Paths cannot hold a NUL; any other byte passes through unquoted."""
    args = [f"report_fd={int(cfg['report_fd'])}"]
    args += [f"{key}={int(bool(cfg.get(key)))}" for key in ("seccomp", "landlock", "network")]
    args += [f"ro={path}" for path in cfg.get("ro", [])]
    args += [f"rwfd={p}" if isinstance(p, int) else f"rw={p}" for p in cfg.get("rw", [])]
    args += [f"dev={path}" for path in cfg.get("dev", [])]
    args += [f"require={layer}" for layer in cfg.get("require", [])]
    args += [f"require_any={'|'.join(sorted(g))}" for g in cfg.get("require_any", [])]
    args += [f"cgroup={c}:{p}" for c, p in (cfg.get("cgroup") or {}).items()]
    if cfg.get("host_cgroupns") is not None:
        args.append(f"host_cgroupns={int(cfg['host_cgroupns'])}")
    args += [f"ns={kind}:{int(ino)}" for kind, ino in cfg.get("host_ns", {}).items()]
    if cfg.get("host_net") is not None:
        args.append(f"host_net={int(cfg['host_net'])}")
    if cfg.get("nproc"):
        args.append(f"nproc={int(cfg['nproc'])}")
    return [*args, "--", *argv]


def outer_args(
    rlimits: Sequence[tuple[str, int, int]],
    *,
    cgroup_fds: Sequence[int],
    uid: int | None,
    parent_pid: int | None,
) -> list[str]:
    """The first stage's settings (before its ``--``): ``rlimits`` as ``(name, resource,
    value)`` in the order to lower them (see :meth:`.process.OuterLimits.rlimits`),
    ``cgroup_fds`` the call's ``cgroup.procs`` opened for writing, ``uid`` the uid to drop to
    (``None``: keep it), ``parent_pid`` the executor's pid when the child must die with it."""
    args = ["outer", *(f"cgroup_fd={int(fd)}" for fd in cgroup_fds)]
    args += [f"rlimit={name}:{int(value)}" for name, _, value in rlimits]
    if uid is not None:
        args.append(f"uid={int(uid)}")
    if parent_pid is not None:
        args.append(f"pdeathsig={int(parent_pid)}")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--build", action="store_true", help="compile it (make install does)")
    parser.add_argument(
        "--dest", type=Path, default=None, help=f"where (default: {default_path()})"
    )
    args = parser.parse_args(argv)
    if not args.build:
        found = find(args.dest)
        print(found or "not built")
        return 0 if found else 1
    try:
        print(f"built {build(args.dest)}")
    except RuntimeError as exc:
        # Not fatal for make install: the executor then uses the Python wrapper.
        print(f"note: {exc}; the sandbox uses its Python wrapper", file=sys.stderr)
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
