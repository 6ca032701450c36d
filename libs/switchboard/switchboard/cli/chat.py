"""``switchboard chat``: a terminal chat with the running system (``$SB_HOME``'s) over its
gateway's WebChat socket. Lines from stdin (a terminal or a pipe) are sent one at a time; the
answer streams in as it is written, tool calls show as ``· tool started`` / ``· tool done``.
Ctrl-C during a run stops it, Ctrl-D or ``/quit`` leaves; the chat commands the agent knows
(``/new``, ``/reset``, ``/stop``, ``/status``, ``/model``, ``/compact``) are sent as messages."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from typing import Any, TextIO

from switchboard.cli.admin_client import AdminError, Gateway
from switchboard.cli.chat_session import LiveSession
from switchboard.cli.chat_socket import ChatError, session_id
from switchboard.cli.chat_view import ChatView

DEFAULT_SESSION = "cli"
HELP = """\
Type a message and press Enter. Local commands:
  /help                 this help
  /quit                 leave (or Ctrl-D)
  /session KEY          chat in another session (its id, or <agent>:webchat:<id>)
  /approve ID [reason]  approve a tool call waiting for approval
  /deny ID [reason]     deny it
The agent's commands are sent to it: /new, /reset, /stop, /status, /model [provider:model],
/compact. Ctrl-C during a run stops the run."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("chat", help="chat with the assistant in the terminal")
    parser.add_argument("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    parser.add_argument(
        "--session",
        default=DEFAULT_SESSION,
        metavar="KEY",
        help=f"the WebChat session (default {DEFAULT_SESSION}: <agent>:webchat:{DEFAULT_SESSION})",
    )
    parser.set_defaults(func=main)


def stdin_lines(loop: asyncio.AbstractEventLoop, source: TextIO) -> asyncio.Queue[str | None]:
    """``source``'s lines as they are typed (None at its end), read by a daemon thread so that
    leaving never waits for a line."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        for line in source:
            loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\n"))
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return queue


class Chat:
    def __init__(self, live: LiveSession, view: ChatView, interactive: bool) -> None:
        self.live = live
        self.view = view
        self.interactive = interactive
        self.interrupted = asyncio.Event()

    async def wait_or_interrupt(self, task: asyncio.Future[Any]) -> bool:
        """True once ``task`` is done, False when Ctrl-C came first (or came while nothing
        waited: it counts for the next wait)."""
        stop = asyncio.ensure_future(self.interrupted.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return True
        self.interrupted.clear()
        return False

    async def run(self, lines: asyncio.Queue[str | None]) -> None:
        while True:
            if self.interactive:
                self.view.prompt("> ")
            line = asyncio.ensure_future(lines.get())
            if not await self.wait_or_interrupt(line):
                line.cancel()
                self.view.line("")
                return
            got = line.result()
            if got is None:
                return  # end of input
            text = got.strip()
            if text.lower() in ("/quit", "/exit"):
                return
            if not text:
                continue
            try:
                if not await self.local(text):
                    await self.turn(text)
            except ChatError as exc:
                if self.live.failure is not None:
                    raise
                self.view.note(f"error: {exc}")

    async def local(self, text: str) -> bool:
        """Handle a local command (True), or leave ``text`` to be sent (False)."""
        word, _, rest = text.partition(" ")
        word, rest = word.lower(), rest.strip()
        if word == "/help":
            self.view.line(HELP)
        elif word == "/session":
            if not rest:
                self.view.note(f"session {self.live.key}")
            else:
                await self.live.switch(session_id(rest))
                self.view.note(f"chatting in {self.live.key}")
        elif word in ("/approve", "/deny"):
            approval, _, reason = rest.partition(" ")
            if not approval:
                raise ChatError(f"usage: {word} ID [reason]")
            decision = "approve" if word == "/approve" else "deny"
            params = {"approval_id": approval, "decision": decision, "reason": reason.strip()}
            done = await self.live.request("decide", params)
            self.view.note(f"{done['tool']}: {done['status']}")
        else:
            return False
        return True

    async def turn(self, text: str) -> None:
        """Send ``text`` and show what comes until the run answering it ends."""
        sent = await self.live.send(text)
        if sent.get("status") == "answered":  # a chat command, answered at once
            self.view.line(str(sent.get("answer", "")))
            return
        end = asyncio.ensure_future(self.live.run_end(sent["message_id"]))
        aborted = False
        while not await self.wait_or_interrupt(end):
            if aborted:
                end.cancel()
                self.view.note("not waiting for the run any more")
                return
            self.view.note("stopping the run (Ctrl-C again: stop waiting)")
            await self.live.request("abort", {})
            aborted = True
        end.result()


async def chat(gateway: Gateway, session: str, source: TextIO, out: TextIO) -> None:
    view = ChatView(out)
    live = LiveSession(gateway, session, view.show, view.note)
    await live.start()
    loop = asyncio.get_running_loop()
    interactive = source.isatty() and out.isatty()
    runner = Chat(live, view, interactive)
    loop.add_signal_handler(signal.SIGINT, runner.interrupted.set)
    view.note(f"chatting in {live.key} (/help for commands, Ctrl-D to leave)")
    try:
        await runner.run(stdin_lines(loop, source))
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await live.close()


def main(args: argparse.Namespace) -> int:
    try:
        gateway = Gateway.from_environment(args.home)
        asyncio.run(chat(gateway, session_id(args.session), sys.stdin, sys.stdout))
    except AdminError as exc:
        print(f"switchboard chat: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # Ctrl-C before the chat was under way
    return 0
