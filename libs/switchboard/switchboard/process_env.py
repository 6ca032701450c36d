"""What a Switchboard process sets in its own environment before gRPC loads (so this module
must not import grpc, nor anything that does). Each entry point calls :func:`prepare` first:
the services' ``__main__`` modules (through :func:`run_service`), the ``switchboard`` command
and the tests' conftest.

``GRPC_ENABLE_FORK_SUPPORT=false``: by default gRPC's C core restarts its threads in every forked
child. The tool executor forks a child for every command (``preexec_fn`` runs before ``exec``);
a restarted poller thread whose descriptor ``close_fds`` had just closed printed
"epoll_wait error: Bad file descriptor" into the command's output, now and then. No
Switchboard child uses gRPC after a fork, so none needs it. gRPC reads the variable once, when
it loads: setting it later has no effect."""

from __future__ import annotations

import os

DEFAULTS = {"GRPC_ENABLE_FORK_SUPPORT": "false"}


def prepare() -> None:
    """Put :data:`DEFAULTS` into ``os.environ`` where the operator did not set them."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)


def run_service(name: str) -> None:
    """A service's ``python -m`` entry: :func:`prepare`, then the service (gRPC loads after)."""
    prepare()
    from switchboard.host import module_main

    module_main(name)
