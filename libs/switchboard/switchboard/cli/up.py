"""``switchboard up``: run the whole system on this machine (embedded mode).

The work is done by :class:`~switchboard.cli.launcher.Launcher` (NATS, PostgreSQL, supervised
service processes); this module turns the command line and environment into its arguments.
Tests and tools build their own service table: ``Launcher(home, services=[ServiceSpec(...)])``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence

from switchboard.cli.home import Home
from switchboard.cli.launcher import (
    DEFAULT_HTTP_PORT,
    SERVICE_MODULES,
    Launcher,
    LaunchError,
    default_services,
)
from switchboard.cli.supervisor import Backoff, Instance, ServiceSpec, Supervisor
from switchboard.embedded import port_is_free

__all__ = [
    "DEFAULT_HTTP_PORT",
    "SERVICE_MODULES",
    "Backoff",
    "Instance",
    "LaunchError",
    "Launcher",
    "ServiceSpec",
    "Supervisor",
    "default_services",
    "parse_scale",
    "port_is_free",
    "register",
    "run",
    "runnable",
]


def parse_scale(items: Sequence[str], services: Sequence[str]) -> dict[str, int]:
    """``["agent=2", "tools=0"]`` -> ``{"agent": 2, "tools": 0}``; ValueError with a message."""
    scale: dict[str, int] = {}
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not count.strip().isdigit():
            raise ValueError(f"--scale {item!r}: expected SERVICE=N, e.g. --scale agent=2")
        if name not in services:
            raise ValueError(
                f"--scale {item!r}: unknown service; choose from {', '.join(services)}"
            )
        scale[name] = int(count)
    return scale


def runnable(module: str) -> bool:
    """Whether ``python -m module`` can run: the package is installed and has a __main__."""
    try:
        return importlib.util.find_spec(f"{module}.__main__") is not None
    except ImportError:
        return False


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "up",
        help="run the whole system on this machine",
        description="Start NATS, PostgreSQL and every service; Ctrl-C stops everything.",
    )
    parser.add_argument(
        "--http-port", type=int, help="gateway HTTP port (default: $SB_HTTP_PORT or 8080)"
    )
    parser.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="SERVICE=N",
        help=f"processes per service (default 1; repeatable): {', '.join(SERVICE_MODULES)}",
    )
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    environ = os.environ
    try:
        scale = parse_scale(args.scale, list(SERVICE_MODULES))
        http_port = args.http_port
        if http_port is None:
            raw = environ.get("SB_HTTP_PORT") or str(DEFAULT_HTTP_PORT)
            if not raw.isdigit():
                raise ValueError(f"SB_HTTP_PORT={raw!r} is not a port number")
            http_port = int(raw)
        if not 0 < http_port < 65536:
            raise ValueError(f"HTTP port {http_port} is not a TCP port (1-65535)")
    except ValueError as exc:
        print(f"switchboard up: {exc}", file=sys.stderr)
        return 2
    missing = [m for name, m in SERVICE_MODULES.items() if scale.get(name, 1) and not runnable(m)]
    if missing:
        print(
            f"switchboard up: cannot run {', '.join(missing)} (not installed, or no __main__); "
            "install the services with `make install`",
            file=sys.stderr,
        )
        return 1
    home = Home.resolve(args.home, environ)
    services = default_services(scale)
    return Launcher(home, services=services, http_port=http_port, environ=environ).run()
