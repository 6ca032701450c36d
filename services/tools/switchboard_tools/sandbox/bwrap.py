"""The bubblewrap command line: the namespace layer of :class:`~.layered.LayeredSandbox`.

All namespaces are unshared (user, mount, pid, ipc, uts, cgroup, and network unless granted);
the child dies with its parent and starts a new session; every capability is dropped. The
filesystem is built from nothing: ``/usr`` and the top-level library/binary directories
read-only, a short list of ``/etc`` files read-only (no ``shadow``, no credentials), fresh
``/proc`` and ``/dev``, a size-capped private ``/tmp``, and the workspace -- bind-mounted
read-write at its own path from an already-open descriptor -- as the working directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

ETC_FILES = (
    "passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "localtime", "alternatives", "hosts", "host.conf", "gai.conf", "resolv.conf", "protocols",
    "services", "ssl", "ca-certificates", "mime.types", "debian_version", "os-release",
)  # fmt: skip
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib64", "/lib32")


def bwrap_argv(
    bwrap: str,
    *,
    ws_fd: int,
    workspace: Path,
    cwd: Path,
    network: bool,
    python: str,
    tmp_size_bytes: int,
    read_paths: Sequence[str] = (),
) -> list[str]:
    """The ``bwrap ... --`` prefix; ``ws_fd`` is an ``O_PATH`` descriptor of ``workspace``
    that the child inherits; ``read_paths``: further paths bound read-only at their own place
    (what a long-running server, such as an MCP server, needs to read besides the system)."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if network:
        argv.append("--share-net")
    argv += ["--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in TOP_LEVEL:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    prefix = str(Path(os.path.realpath(python)).parent.parent)
    if not prefix.startswith("/usr"):
        argv += ["--ro-bind", prefix, prefix]  # the wrapper's interpreter lives elsewhere
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(tmp_size_bytes), "--tmpfs", "/tmp"]
    for path in read_paths:  # after the private /tmp, which would hide a path beneath it
        argv += ["--ro-bind", path, path]
    argv += ["--bind-fd", str(ws_fd), str(workspace), "--chdir", str(cwd), "--"]
    return argv
