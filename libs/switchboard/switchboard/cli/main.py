"""The ``switchboard`` command: one sub-command per module, each exposing ``register()``."""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from switchboard.cli import (
    agent,
    chat,
    cron,
    doctor,
    memory,
    pairing,
    secrets_env,
    security,
    serve,
    sessions,
    up,
)


def package_version() -> str:
    try:
        return version("switchboard")
    except PackageNotFoundError:
        return "unknown"


def _version(args: argparse.Namespace) -> int:
    print(f"switchboard {package_version()} (python {platform.python_version()})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="switchboard", description="Switchboard: a self-hosted AI assistant."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    up.register(commands)
    serve.register(commands)
    doctor.register(commands)
    secrets_env.register(commands)
    pairing.register(commands)
    memory.register(commands)
    cron.register(commands)
    chat.register(commands)
    agent.register(commands)
    sessions.register(commands)
    security.register(commands)
    commands.add_parser("version", help="print the version").set_defaults(func=_version)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
