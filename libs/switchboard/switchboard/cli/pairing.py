"""``switchboard pairing``: the DM and group pairing requests of the running system (list,
approve, deny) and the senders and groups they admitted (paired, revoke). A group shows as
``group <chat id>`` (the router's sender ``group:<chat id>``); ``approve --owner`` makes a
sender one of the owners (docs/trust.md)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from switchboard.cli.admin_client import AdminError, Gateway


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "pairing", help="DM and group pairing: list, approve, deny, revoke"
    )
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="pending pairing requests")
    listing.add_argument("channel", nargs="?", default="")
    listing.add_argument("--json", action="store_true")
    for name, text in (
        ("approve", "admit the sender (or group) of CODE"),
        ("deny", "drop request CODE"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("channel")
        action.add_argument("code")
        if name == "approve":
            action.add_argument(
                "--owner",
                action="store_true",
                help="as one of the owners: the operator's own identity (not for a group)",
            )
    paired = actions.add_parser("paired", help="senders and groups admitted by pairing")
    paired.add_argument("channel", nargs="?", default="")
    paired.add_argument("--json", action="store_true")
    revoke = actions.add_parser("revoke", help="take a sender's (or group's) approval back")
    revoke.add_argument("channel")
    revoke.add_argument("sender", help="a sender id, or group:<chat id> for a group")
    revoke.add_argument(
        "--account", default="", help="the channel's account it was approved on (default: default)"
    )
    parser.set_defaults(func=run)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


GROUP_PREFIX = "group:"  # the router's sender for a group (switchboard_router.pairing)


def _on(record: dict[str, Any]) -> str:
    """The channel, with its account when it is not the default one (``telegram/family``)."""
    account = record.get("account") or "default"
    return record["channel"] if account == "default" else f"{record['channel']}/{account}"


def _who(sender: str) -> str:
    """``group <chat id>`` for a group, ``sender <id>`` for a person."""
    if sender.startswith(GROUP_PREFIX):
        return f"group {sender.removeprefix(GROUP_PREFIX)}"
    return f"sender {sender}"


def _print_requests(found: list[dict[str, Any]]) -> None:
    if not found:
        print("no pending pairing requests")
    for r in found:
        print(
            f"{_on(r):<10} {r['code']}  {_who(r['sender'])}  "
            f"expires {_when(r['expires_at_ms'])}  {r['text'][:40]!r}"
        )


def _print_paired(senders: list[dict[str, Any]]) -> None:
    for s in senders:
        group = s["sender"].startswith(GROUP_PREFIX)
        role = "" if group else f"  role {s.get('role') or 'user'}"
        print(f"{_on(s):<10} {_who(s['sender'])}{role}  approved {_when(s['approved_at_ms'])}")


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
            route = f"{path}/{args.action}"
            if args.action == "approve" and args.owner:
                body = json.dumps({"owner": True}).encode()
                reply = gateway.send("POST", route, {}, body, "application/json")
            else:
                reply = gateway.call("POST", route)
            verb = "approved" if args.action == "approve" else "denied"
            as_owner = " as an owner" if reply.get("role") == "owner" else ""
            print(f"{verb}: {_who(reply['sender'])} on {_on(reply)}{as_owner}")
        elif args.action == "paired":
            senders = gateway.call("GET", "/api/pairing/paired", channel=args.channel)["senders"]
            if args.json:
                print(json.dumps(senders, indent=2))
            elif not senders:
                print("no paired senders or groups")
            else:
                _print_paired(senders)
        else:
            path = f"/api/pairing/paired/{quote(args.channel, safe='')}"
            query = {"account": args.account} if args.account else {}
            reply = gateway.call("DELETE", f"{path}/{quote(args.sender, safe='')}", **query)
            print(f"revoked: {_who(args.sender)} on {_on(reply)}")
    except AdminError as exc:
        print(f"switchboard pairing: {exc}", file=sys.stderr)
        return 1
    return 0
