"""``switchboard sessions``: the running system's conversations, through its gateway
(``/api/sessions``): ``list`` them, show a session's ``history``, ``reset`` one (a fresh
transcript)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from switchboard.cli.admin_client import AdminError, Gateway
from switchboard.cli.chat_view import short

LINE_CHARS = 200


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("sessions", help="conversations: list, history, reset")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the sessions, most recently active first")
    listing.add_argument("--agent", default="", help="only this agent's")
    listing.add_argument("--limit", type=int, default=100, help="at most this many (1-1000)")
    listing.add_argument("--json", action="store_true")
    history = actions.add_parser("history", help="a session's transcript")
    history.add_argument("key", help="the session key, e.g. main:webchat:cli")
    history.add_argument("--limit", type=int, default=0, help="the last N messages (0: all)")
    history.add_argument("--json", action="store_true")
    reset = actions.add_parser("reset", help="start the session afresh (forget its transcript)")
    reset.add_argument("key")
    parser.set_defaults(func=main)


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") if ms else "-"


def session_line(s: dict[str, Any]) -> str:
    usage = s.get("usage") or {}
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    count = f"{s['message_count']:>5} msgs {tokens:>8} tokens"
    return f"{s['session_key']:<40} {count}  {when(s['updated_at_ms'])}"


def block_text(block: dict[str, Any]) -> str:
    """One content block of the transcript, on one line."""
    kind = block.get("type")
    if kind == "text":
        return short(str(block.get("text", "")), LINE_CHARS)
    if kind == "tool_use":
        args = json.dumps(block.get("input", {}), ensure_ascii=False)
        return short(f"[{block.get('name')}] {args}", LINE_CHARS)
    if kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        mark = "error" if block.get("is_error") else "result"
        return short(f"[{mark}] {text}", LINE_CHARS)
    return f"[{kind}]"


def message_lines(m: dict[str, Any]) -> list[str]:
    content = m.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    return [f"{when(m['created_at_ms'])} {m['role']:<9} {block_text(b)}" for b in blocks]


def main(args: argparse.Namespace) -> int:
    try:
        gateway = Gateway.from_environment(args.home)
        if args.action == "list":
            found = gateway.call("GET", "/api/sessions", agent=args.agent, limit=str(args.limit))
            if args.json:
                print(json.dumps(found["sessions"], indent=2))
            elif not found["sessions"]:
                print("no sessions")
            for s in [] if args.json else found["sessions"]:
                print(session_line(s))
        elif args.action == "history":
            route = f"/api/sessions/{quote(args.key, safe='')}/history"
            got = gateway.call("GET", route, limit=str(args.limit))
            if args.json:
                print(json.dumps(got, indent=2))
            elif not got["messages"]:
                print(f"{got['session_key']}: no messages")
            for m in [] if args.json else got["messages"]:
                print("\n".join(message_lines(m)))
        else:
            done = gateway.call("POST", f"/api/sessions/{quote(args.key, safe='')}/reset")
            print(f"reset {done['session_key']} ({done['messages_removed']} messages removed)")
    except AdminError as exc:
        print(f"switchboard sessions: {exc}", file=sys.stderr)
        return 1
    return 0
