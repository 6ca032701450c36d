"""``switchboard pairing``: the DM pairing requests of the running system (list, approve, deny)
and the senders they admitted (paired, revoke)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from switchboard.cli.admin_client import AdminError, Gateway


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("pairing", help="DM pairing: list, approve, deny, revoke")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="pending pairing requests")
    listing.add_argument("channel", nargs="?", default="")
    listing.add_argument("--json", action="store_true")
    for name, text in (("approve", "admit the sender of CODE"), ("deny", "drop request CODE")):
        action = actions.add_parser(name, help=text)
        action.add_argument("channel")
        action.add_argument("code")
    paired = actions.add_parser("paired", help="senders admitted by pairing")
    paired.add_argument("channel", nargs="?", default="")
    paired.add_argument("--json", action="store_true")
    revoke = actions.add_parser("revoke", help="take a sender's approval back")
    revoke.add_argument("channel")
    revoke.add_argument("sender")
    parser.set_defaults(func=run)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _print_requests(found: list[dict[str, Any]]) -> None:
    if not found:
        print("no pending pairing requests")
    for r in found:
        print(
            f"{r['channel']:<10} {r['code']}  sender {r['sender']}  "
            f"expires {_when(r['expires_at_ms'])}  {r['text'][:40]!r}"
        )


def run(args: argparse.Namespace) -> int:
    try:
        gateway = Gateway.from_environment(args.home)
        if args.action == "list":
            found = gateway.call("GET", "/api/pairing", channel=args.channel)["requests"]
            if args.json:
                print(json.dumps(found, indent=2))
            else:
                _print_requests(found)
        elif args.action in ("approve", "deny"):
            path = f"/api/pairing/{quote(args.channel, safe='')}/{quote(args.code, safe='')}"
            reply = gateway.call("POST", f"{path}/{args.action}")
            verb = "approved" if args.action == "approve" else "denied"
            print(f"{verb}: sender {reply['sender']} on {reply['channel']}")
        elif args.action == "paired":
            senders = gateway.call("GET", "/api/pairing/paired", channel=args.channel)["senders"]
            if args.json:
                print(json.dumps(senders, indent=2))
            for s in [] if args.json else senders:
                print(f"{s['channel']:<10} {s['sender']}  approved {_when(s['approved_at_ms'])}")
        else:
            path = f"/api/pairing/paired/{quote(args.channel, safe='')}"
            gateway.call("DELETE", f"{path}/{quote(args.sender, safe='')}")
            print(f"revoked: sender {args.sender} on {args.channel}")
    except AdminError as exc:
        print(f"switchboard pairing: {exc}", file=sys.stderr)
        return 1
    return 0
