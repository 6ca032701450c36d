"""The ``switchboard`` command: one sub-command per module, each exposing ``register()``.

Only the module of the command being run is imported: ``switchboard up`` does not load the
terminal chat's WebSocket client, httpx's own command line (click, rich, pygments), the YAML of
skills or jsonschema, which the other commands import (0.6 s of a warm start: docs/startup.md).
``switchboard --help``, no command or an unknown one registers them all."""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from switchboard import configfile
from switchboard.gcdefer import deferred

# Each command and the module (switchboard.cli.<module>) that registers it, in help's order.
COMMANDS: dict[str, str] = {
    "up": "up",
    "serve": "serve",
    "doctor": "doctor",
    "secrets": "secrets_env",
    "pairing": "pairing",
    "memory": "memory",
    "cron": "cron",
    "chat": "chat",
    "agent": "agent",
    "sessions": "sessions",
    "security": "security",
    "config": "config",
    "onboard": "onboard",
}
# Commands that do not read the file's settings: a refused file does not stop them (onboard
# writes a new one, from answers and the environment alone).
_NO_FILE = frozenset({"config", "secrets", "version", "onboard"})
# Commands that report a refused configuration file themselves instead of stopping on it.
_REPORT_FILE = frozenset({"doctor"})


def package_version() -> str:
    try:
        return version("switchboard")
    except PackageNotFoundError:
        return "unknown"


def _version(args: argparse.Namespace) -> int:
    print(f"switchboard {package_version()} (python {platform.python_version()})")
    return 0


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with ``only`` that one (its module alone imported)."""
    parser = argparse.ArgumentParser(
        prog="switchboard", description="Switchboard: a self-hosted AI assistant."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"switchboard.cli.{module}").register(commands)
    commands.add_parser("version", help="print the version").set_defaults(func=_version)
    return parser


def chosen(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, if it is one of :data:`COMMANDS` (the first argument: the
    top-level parser has no options but ``-h``)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with deferred():  # the command's imports: fewer garbage collections (switchboard.gcdefer)
        parser = build_parser(chosen(argv))
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    refused = _apply_file(args)
    if refused is not None:
        print(refused, file=sys.stderr)
        print("switchboard: fix the file (`switchboard config validate`)", file=sys.stderr)
        return 2
    code: int = args.func(args)
    return code


def _apply_file(args: argparse.Namespace) -> str | None:
    """``$SB_HOME/switchboard.toml`` into this process's environment, which every command
    (and the services `up` starts) reads: the one place the file is read. The refusal's
    text, if it is refused (``doctor`` reports it as one of its checks; ``config`` reads the
    file itself)."""
    if args.command in _NO_FILE:
        return None
    try:
        home = configfile.home_of(getattr(args, "home", None), os.environ)
        applied = configfile.apply(os.environ, home)
    except configfile.ConfigError as exc:
        return None if args.command in _REPORT_FILE else str(exc)
    if applied is not None:  # watched for changes by the services (configfile.reload)
        configfile.hand_down(os.environ, applied)
    return None


if __name__ == "__main__":
    sys.exit(main())
