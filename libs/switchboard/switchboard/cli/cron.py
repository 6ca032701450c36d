"""``switchboard cron``: the scheduled jobs of the running system (``$SB_HOME``'s), through its
gateway (``/api/cron``): ``add``, ``list``, ``rm``, ``run``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from switchboard.cli.admin_client import AdminError, Gateway


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("cron", help="scheduled jobs: add, list, rm, run")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a job")
    add.add_argument("name", help="the job's name (1-64 of A-Z a-z 0-9 _ . -)")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help="a cron expression: '0 9 * * MON-FRI'")
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 5m, 1h30m")
    when.add_argument("--at", metavar="TIME", help="once: ISO 8601 (UTC without offset) or +10m")
    add.add_argument("--tz", help="the cron expression's time zone (default UTC)")
    add.add_argument("--session", metavar="KEY", help="the session it wakes (default cron:NAME)")
    add.add_argument("--message", metavar="TEXT", help="what the agent is told")
    add.add_argument("--agent", help="the agent (default: the default agent)")
    add.add_argument(
        "--kind",
        default="message",
        choices=["message", "heartbeat", "webhook", "watch_url", "watch_file"],
    )
    add.add_argument("--url", help="webhook: where to POST; watch_url: what to watch")
    add.add_argument("--path", help="watch_file: a file in the agent's workspace")
    add.add_argument("--deliver", metavar="CHANNEL:CHAT", help="send the reply to this chat")
    add.add_argument("--missed", choices=["skip", "run_once"], help="after downtime (skip)")
    add.add_argument("--urgent", action="store_true", help="run even in quiet hours")
    listing = actions.add_parser("list", help="the jobs")
    listing.add_argument("--json", action="store_true")
    rm = actions.add_parser("rm", help="remove a job")
    rm.add_argument("name")
    run = actions.add_parser("run", help="run a job now")
    run.add_argument("name")
    parser.set_defaults(func=main)


def _job(args: argparse.Namespace) -> dict[str, Any]:
    if args.tz and not args.cron:
        raise AdminError("--tz goes with --cron")
    body: dict[str, Any] = {"name": args.name, "kind": args.kind}
    for key in ("cron", "every", "at", "message", "agent", "url", "path", "missed"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.tz:
        body["timezone"] = args.tz
    if args.session:
        body["session_key"] = args.session
    if args.urgent:
        body["urgent"] = True
    if args.deliver:
        channel, sep, chat = args.deliver.partition(":")
        if not sep or not channel or not chat:
            raise AdminError(f"--deliver {args.deliver!r}: expected CHANNEL:CHAT, e.g. telegram:42")
        body["deliver_to"] = {"channel": channel, "to": chat}
    return body


def _schedule(job: dict[str, Any]) -> str:
    if job.get("cron"):
        return f"cron '{job['cron']}' {job.get('timezone') or 'UTC'}"
    if job.get("every"):
        return f"every {job['every']}"
    return f"at {job.get('at')}"


def _line(job: dict[str, Any]) -> str:
    state = f"next {job['next_run']}" if job["enabled"] else "disabled"
    last = f"  last: {job['last_result']}" if job.get("last_result") else ""
    error = f" ({job['last_error']})" if job.get("last_error") else ""
    return f"{job['name']:<20} {job['kind']:<10} {_schedule(job):<32} {state}{last}{error}"


def main(args: argparse.Namespace) -> int:
    try:
        gateway = Gateway.from_environment(args.home)
        if args.action == "add":
            body = json.dumps(_job(args)).encode()
            job = gateway.send("POST", "/api/cron", {}, body, "application/json")
            print(f"added {job['name']}: {_schedule(job)}, next run {job['next_run']}")
        elif args.action == "list":
            jobs = gateway.call("GET", "/api/cron")["jobs"]
            if args.json:
                print(json.dumps(jobs, indent=2))
            elif not jobs:
                print("no scheduled jobs")
            for job in [] if args.json else jobs:
                print(_line(job))
        elif args.action == "rm":
            gateway.call("DELETE", f"/api/cron/{quote(args.name, safe='')}")
            print(f"removed {args.name}")
        else:
            ran = gateway.call("POST", f"/api/cron/{quote(args.name, safe='')}/run")
            if ran.get("error"):
                print(f"switchboard cron: {args.name} failed: {ran['error']}", file=sys.stderr)
                return 1
            print(f"ran {args.name}: {ran['result']}")
    except AdminError as exc:
        print(f"switchboard cron: {exc}", file=sys.stderr)
        return 1
    return 0
