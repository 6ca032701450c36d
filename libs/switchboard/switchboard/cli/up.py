"""``switchboard up``: run the whole system on this machine (embedded mode).

The work is done by :class:`~switchboard.cli.launcher.Launcher` (NATS, PostgreSQL, the services
in this process or one process each); this module turns the command line and the settings into
its arguments.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from switchboard import registry
from switchboard.cli.home import Home
from switchboard.cli.launcher import Launcher, default_services
from switchboard.cli.settings import LauncherSettings, check_port
from switchboard.settings import describe

__all__ = ["parse_scale", "register", "run", "runnable"]

MAX_NATS_NODES = 5  # as SB_NATS_CLUSTER's bound


def parse_scale(items: Sequence[str], services: Sequence[registry.Service]) -> dict[str, int]:
    """``["agent=2", "tools=0"]`` -> ``{"agent": 2, "tools": 0}``; ValueError with a message."""
    known = {s.name: s for s in services}
    scale: dict[str, int] = {}
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not count.strip().isdigit():
            raise ValueError(f"--scale {item!r}: expected SERVICE=N, e.g. --scale agent=2")
        if name not in known:
            raise ValueError(f"--scale {item!r}: unknown service; choose from {', '.join(known)}")
        if not known[name].scaled and int(count) != 1:
            raise ValueError(f"--scale {item!r}: {name} runs as one process")
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
    scalable = [s.name for s in registry.SERVICES if s.scaled]
    parser.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="SERVICE=N",
        help=f"processes per service (default 1; repeatable; implies --processes): "
        f"{', '.join(scalable)}",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="one process per service, as in Compose and Kubernetes "
        "(default: every service in this process; also $SB_PROCESSES=1)",
    )
    parser.add_argument(
        "--nats-cluster",
        type=int,
        metavar="N",
        help="run NATS as a cluster of N nodes on loopback, the streams at min(N, 3) replicas "
        "(default: one server; also $SB_NATS_CLUSTER)",
    )
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = LauncherSettings.from_environ(os.environ)
        scale = parse_scale(args.scale, registry.SERVICES)
        if args.http_port is None:
            http_port = settings.http_port
        else:
            http_port = check_port("--http-port", args.http_port)
        nats_nodes = settings.nats_cluster
        if args.nats_cluster is not None:
            if not 1 <= args.nats_cluster <= MAX_NATS_NODES:
                raise ValueError(
                    f"--nats-cluster {args.nats_cluster}: choose 1 to {MAX_NATS_NODES}"
                )
            nats_nodes = args.nats_cluster
    except ValidationError as exc:
        print(f"switchboard up: {describe(exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"switchboard up: {exc}", file=sys.stderr)
        return 2
    wanted = [s for s in registry.SERVICES if scale.get(s.name, 1)]
    missing = [s.module for s in wanted if not runnable(s.module)]
    if missing:
        print(
            f"switchboard up: cannot run {', '.join(missing)} (not installed, or no __main__); "
            "install the services with `make install`",
            file=sys.stderr,
        )
        return 1
    home = Home.resolve(args.home, settings.home)
    return Launcher(
        home,
        services=default_services(scale),
        http_port=http_port,
        processes=args.processes or settings.processes,
        nats_cluster=nats_nodes,
    ).run()
