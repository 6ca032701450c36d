"""What a Switchboard process sets in its own environment before gRPC loads (so this module
must not import grpc, nor anything that does). Each entry point calls :func:`prepare` first:
the services' ``__main__`` modules (through :func:`run_service`), the ``switchboard`` command
and the tests' conftest.

``GRPC_ENABLE_FORK_SUPPORT=false``: by default gRPC's C core restarts its threads in every forked
child. The tool executor forks a child for every command (``preexec_fn`` runs before ``exec``);
a restarted poller thread whose descriptor ``close_fds`` had just closed printed
"epoll_wait error: Bad file descriptor" into the command's output, now and then. No
Switchboard child uses gRPC after a fork, so none needs it. gRPC reads the variable once, when
it loads: setting it later has no effect.

``MALLOC_ARENA_MAX=2``: glibc's malloc gives each thread that allocates an arena of its own,
up to eight per core, and an arena keeps what was freed in it. A service's worker threads
(``asyncio.to_thread``: embeddings, file and database work) each grew one, and after a load
their free pages stayed resident: with two arenas a one-process stack measured about 10 MiB
less after 300 turns (docs/footprint.md). glibc reads the variable when the process starts, so
:func:`prepare` also sets the limit in this process (``mallopt``); child processes read it
from the environment. An operator's own value wins, in both."""

from __future__ import annotations

import ctypes
import os

DEFAULTS = {"GRPC_ENABLE_FORK_SUPPORT": "false", "MALLOC_ARENA_MAX": "2"}
M_ARENA_MAX = -8  # glibc's mallopt parameter


def prepare() -> None:
    """Put :data:`DEFAULTS` into ``os.environ`` where the operator did not set them, and apply
    the arena limit to this process (before it starts threads: glibc fixes the limit at the
    first arena it adds)."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    limit_arenas(os.environ["MALLOC_ARENA_MAX"])


def limit_arenas(value: str) -> bool:
    """``mallopt(M_ARENA_MAX, value)``; False where it does not apply (not a positive number,
    or a C library without glibc's ``mallopt``, such as macOS's)."""
    try:
        count = int(value)
        mallopt = ctypes.CDLL(None).mallopt
    except (ValueError, OSError, AttributeError):
        return False
    return count > 0 and bool(mallopt(M_ARENA_MAX, count))


def run_service(name: str) -> None:
    """A service's ``python -m`` entry: :func:`prepare`, then the service (gRPC loads after)."""
    prepare()
    from switchboard.host import module_main

    module_main(name)
