"""``switchboard agent -m TEXT``: one turn with the running system's agent (over the gateway's
WebChat socket, in a WebChat session): the answer on stdout, or with ``--json`` the run's
outcome as JSON; exit code 1 with the reason when the system is not running or the run did not
complete."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from switchboard.cli.admin_client import AdminError, Gateway
from switchboard.cli.chat import DEFAULT_SESSION
from switchboard.cli.chat_session import LiveSession
from switchboard.cli.chat_socket import ChatError, session_id

DEFAULT_TIMEOUT_S = 600.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("agent", help="one turn: send a message, print the answer")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    parser.add_argument("-m", "--message", required=True, metavar="TEXT", help="what to say")
    parser.add_argument(
        "--session",
        default=DEFAULT_SESSION,
        metavar="KEY",
        help=f"the WebChat session (default {DEFAULT_SESSION}: <agent>:webchat:{DEFAULT_SESSION})",
    )
    parser.add_argument("--json", action="store_true", help="the run's outcome as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up waiting after this long (default {DEFAULT_TIMEOUT_S:.0f})",
    )
    parser.set_defaults(func=main)


class Turn:
    """What the turn's events said: its tool calls and run errors."""

    def __init__(self) -> None:
        self.tools: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def show(self, frame: dict[str, Any]) -> None:
        payload = frame.get("payload") or {}
        if frame.get("event") == "tool" and payload.get("phase") == "result":
            self.tools.append({"tool": payload.get("tool"), "is_error": payload.get("is_error")})
        elif frame.get("event") == "run_error":
            self.errors.append(str(payload.get("message", "")))

    def note(self, text: str) -> None:
        print(f"switchboard agent: {text}", file=sys.stderr)


async def one_turn(gateway: Gateway, session: str, text: str, timeout: float) -> dict[str, Any]:
    turn = Turn()
    live = LiveSession(gateway, session, turn.show, turn.note)
    await live.start()
    try:
        sent = await live.send(text)
        outcome: dict[str, Any] = {"session_key": sent.get("session_key", live.key)}
        if sent.get("status") == "answered":  # a chat command
            return outcome | {"status": "completed", "text": sent.get("answer", ""), "tools": []}
        try:
            end = await asyncio.wait_for(live.run_end(sent["message_id"]), timeout)
        except TimeoutError:
            raise ChatError(
                f"no answer within {timeout:.0f} s (the run may still be going: "
                f"`switchboard sessions history {outcome['session_key']}`)"
            ) from None
    finally:
        await live.close()
    return outcome | {
        "run_id": end.get("run_id", ""),
        "status": end.get("status") or "completed",
        "stop_reason": end.get("stop_reason"),
        "text": end.get("text") or "",
        "input_tokens": end.get("input_tokens"),
        "output_tokens": end.get("output_tokens"),
        "tools": turn.tools,
        "errors": turn.errors,
    }


def main(args: argparse.Namespace) -> int:
    try:
        if not args.message.strip():
            raise AdminError("-m: the message is empty")
        gateway = Gateway.from_environment(args.home)
        outcome = asyncio.run(
            one_turn(gateway, session_id(args.session), args.message, args.timeout)
        )
    except AdminError as exc:
        print(f"switchboard agent: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("switchboard agent: interrupted (the run goes on)", file=sys.stderr)
        return 130
    failed = outcome["status"] != "completed" or bool(outcome.get("errors"))
    if args.json:
        print(json.dumps(outcome, indent=2))
    elif outcome["text"]:
        print(outcome["text"])
    if failed:
        why = "; ".join(outcome.get("errors") or []) or outcome.get("stop_reason") or ""
        print(
            f"switchboard agent: the run ended {outcome['status']}" + (f": {why}" if why else ""),
            file=sys.stderr,
        )
        return 1
    return 0
