"""``switchboard security audit``: read the effective configuration (the environment the
services would read, and the data dir) and report what is risky, each finding with its fix
(docs/trust.md). Exits 1 when anything is critical, so a deployment script can stop on it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping

from switchboard.cli.audit import (
    CRITICAL,
    OK,
    WARNING,
    Check,
    Config,
    Finding,
    check_sandbox,
    check_secrets,
    check_state,
    check_valid,
)
from switchboard.cli.audit_people import check_direct, check_groups, check_visibility
from switchboard.cli.home import Home
from switchboard.cli.settings import LauncherSettings

CHECKS: tuple[Check, ...] = (
    check_valid,
    check_groups,
    check_direct,
    check_visibility,
    check_sandbox,
    check_secrets,
    check_state,
)
_LABEL = {CRITICAL: "CRITICAL", WARNING: "WARN    ", OK: "OK      "}


def audit(environ: Mapping[str, str], home: Home) -> list[Finding]:
    config = Config.load(environ, home)
    return [finding for check in CHECKS for finding in check(config)]


def run(args: argparse.Namespace) -> int:
    home = Home.resolve(args.home, LauncherSettings.from_environ(os.environ).home)
    findings = audit(os.environ, home)
    critical = sum(f.severity == CRITICAL for f in findings)
    warnings = sum(f.severity == WARNING for f in findings)
    if args.json:
        print(json.dumps([f.__dict__ for f in findings], indent=2))
    else:
        order = {CRITICAL: 0, WARNING: 1, OK: 2}
        for f in sorted(findings, key=lambda f: order[f.severity]):
            print(f"{_LABEL[f.severity]}  {f.check}: {f.detail}")
            if f.severity != OK and f.fix:
                print(f"          fix: {f.fix}")
        print(f"{critical} critical, {warnings} warning(s)", file=sys.stderr)
    return 1 if critical else 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("security", help="security checks of this installation")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    audit_parser = actions.add_parser(
        "audit", help="report what the configuration lets the wrong people do, with fixes"
    )
    audit_parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    audit_parser.add_argument("--json", action="store_true", help="findings as JSON")
    audit_parser.set_defaults(func=run)
