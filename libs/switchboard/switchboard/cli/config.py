"""``switchboard config show | get KEY | set KEY VALUE | validate``: the configuration file,
``$SB_HOME/switchboard.toml`` (docs/config-file.md). Secrets are never printed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from switchboard.configfile import home_of, path_for
from switchboard.configfile.errors import ConfigError


def config_path(home_arg: str | None) -> Path:
    return path_for(home_of(home_arg, os.environ))


def _show(path: Path, args: argparse.Namespace) -> int:
    from switchboard.configfile.edit import redacted

    if not path.exists():
        print(f"{path}: no such file (every setting comes from the environment)", file=sys.stderr)
        return 1
    sys.stdout.write(redacted(path))
    return 0


def _get(path: Path, args: argparse.Namespace) -> int:
    from switchboard.configfile.edit import get

    found = get(path, args.key)
    if found is None:
        print(f"{args.key}: not set in {path}", file=sys.stderr)
        return 1
    value, setting = found
    print(value if isinstance(value, str) else json.dumps(value, default=str))
    names = (setting.env, *setting.aliases)
    if any(n in os.environ for n in names):
        print(f"(the environment's {setting.env} overrides it)", file=sys.stderr)
    return 0


def _set(path: Path, args: argparse.Namespace) -> int:
    from switchboard.configfile.edit import set_value

    set_value(path, args.key, args.value, os.environ)
    print(f"{path}: set {args.key}")
    return 0


def _validate(path: Path, args: argparse.Namespace) -> int:
    from switchboard.configfile.load import load

    if not path.exists():
        print(f"{path}: no such file", file=sys.stderr)
        return 1
    loaded = load(path, os.environ)
    print(f"{path}: valid ({len(loaded.environ)} settings)")
    return 0


ACTIONS = {"show": _show, "get": _get, "set": _set, "validate": _validate}


def run(args: argparse.Namespace) -> int:
    path = config_path(args.home)
    try:
        return ACTIONS[args.action](path, args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "config",
        help="show, get, set or validate $SB_HOME/switchboard.toml",
        description="The configuration file; environment variables override it. "
        "Keys: SECTION.FIELD (gateway.http_port), or FIELD for what every service reads.",
    )
    home_help = "data dir (default: $SB_HOME or ~/.switchboard)"
    parser.add_argument("--home", help=home_help)
    # --home after the action too; SUPPRESS: not given there, the one before it stays.
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--home", default=argparse.SUPPRESS, help=home_help)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("show", parents=[where], help="the file, secrets redacted")
    getter = actions.add_parser("get", parents=[where], help="one value, a secret redacted")
    getter.add_argument("key")
    setter = actions.add_parser(
        "set", parents=[where], help="write one value (the whole file is checked first)"
    )
    setter.add_argument("key")
    setter.add_argument("value", help="a TOML value (8080, true, '[\"a\"]'), else a string")
    actions.add_parser("validate", parents=[where], help="check the file; exit 1 with its errors")
    parser.set_defaults(func=run)
