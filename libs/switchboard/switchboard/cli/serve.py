"""``switchboard serve [SERVICE ...]``: run services in this process (Loki's ``-target``): one
service per container, or several side by side. Without names, the services named by
``SB_SERVICE`` (the container image sets it); ``all`` is every service of the registry."""

from __future__ import annotations

import argparse
import os
import sys

from pydantic import Field

from switchboard import host, registry
from switchboard.settings import Settings


class ServeSettings(Settings):
    service: str = Field(default="")  # SB_SERVICE: names, separated by commas or spaces


def names(requested: list[str]) -> list[str]:
    """The services to run; ValueError naming the known ones for an unknown name."""
    chosen = requested or ServeSettings.from_environ(os.environ).service.replace(",", " ").split()
    if chosen == ["all"]:
        return registry.names()
    unknown = [n for n in chosen if n not in registry.names()]
    if unknown or not chosen:
        what = f"unknown service(s) {', '.join(unknown)}" if unknown else "no service named"
        raise ValueError(f"{what}; choose from {', '.join(registry.names())} or all")
    return list(dict.fromkeys(chosen))


def run(args: argparse.Namespace) -> int:
    try:
        chosen = names(args.services)
    except ValueError as exc:
        print(f"switchboard serve: {exc}", file=sys.stderr)
        return 2
    return host.main(chosen, os.environ)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "serve",
        help="run services in this process (one per container, or several)",
        description="Run the named services (or $SB_SERVICE) in this process until "
        "SIGINT/SIGTERM; they reach NATS, PostgreSQL and each other through their settings.",
    )
    parser.add_argument("services", nargs="*", metavar="SERVICE", help="service names, or all")
    parser.set_defaults(func=run)
