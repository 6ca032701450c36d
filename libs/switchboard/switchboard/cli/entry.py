"""The ``switchboard`` command's entry point: the process environment first (before anything
loads gRPC, see :mod:`switchboard.process_env`), then :func:`switchboard.cli.main.main`."""

from __future__ import annotations

from switchboard import process_env


def main() -> int:
    process_env.prepare()
    from switchboard.cli.main import main as run

    return run()
