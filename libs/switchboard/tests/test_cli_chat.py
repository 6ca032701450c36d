"""The terminal chat's parts without a system: how events are shown, how ``--session`` is read,
how transcripts are printed, and the client's side of the WebChat protocol against a scripted
socket server (a dropped socket is reopened with the epoch and last seq and the replayed events
are shown; Ctrl-C during a run sends ``abort``). The whole commands against the real system:
tests/e2e/test_terminal.py."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from switchboard.cli.admin_client import Gateway
from switchboard.cli.chat import Chat
from switchboard.cli.chat_session import LiveSession
from switchboard.cli.chat_socket import ChatError, session_id, socket_url
from switchboard.cli.chat_view import ChatView
from switchboard.cli.sessions import message_lines

WAIT_S = 10.0


def event(seq: int, name: str, **payload: Any) -> str:
    return json.dumps({"type": "event", "event": name, "payload": payload, "seq": seq})


def shown(*frames: str) -> str:
    out = io.StringIO()
    view = ChatView(out)
    for frame in frames:
        view.show(json.loads(frame))
    return out.getvalue()


def test_deltas_stream_on_one_line_and_tool_phases_get_their_own() -> None:
    out = shown(
        event(1, "lifecycle", run_id="r", phase="start", message_ids=["m"]),
        event(2, "assistant", run_id="r", text="Let me "),
        event(3, "assistant", run_id="r", text="look."),
        event(4, "tool", run_id="r", call_id="c", tool="exec", phase="start", summary='{"a":1}'),
        event(5, "tool", run_id="r", call_id="c", tool="exec", phase="result", is_error=False),
        event(6, "assistant", run_id="r", text="Done."),
        event(7, "lifecycle", run_id="r", phase="end", message_ids=["m"], text="Let me look.Done."),
    )
    assert out == 'Let me look.\n· exec started {"a":1}\n· exec done\nDone.\n'


def test_an_unstreamed_reply_shows_at_its_end_and_trouble_is_named() -> None:
    out = shown(
        event(
            1,
            "tool",
            run_id="r",
            tool="exec",
            phase="approval",
            approval_id="ap_1",
            status="pending",
        ),
        event(2, "tool", run_id="r", tool="exec", phase="result", is_error=True, summary="no"),
        event(3, "run_error", run_id="r", message="the model call failed"),
        event(
            4, "lifecycle", run_id="r", phase="end", message_ids=[], status="error", text="Sorry."
        ),
        event(5, "gap", reason="new_feed", message="reload"),
    )
    assert out.splitlines() == [
        "· exec waits for approval (pending): /approve ap_1 or /deny ap_1",
        "· exec failed: no",
        "· error: the model call failed",
        "Sorry.",
        "· run error",
        "· some events were missed (new_feed)",
    ]


def test_session_is_a_webchat_session_id_or_its_key() -> None:
    assert session_id("cli") == "cli"
    assert session_id("main:webchat:kitchen-2") == "kitchen-2"
    for bad in ("a b", "main:api:x", "", "x" * 65):
        with pytest.raises(ChatError, match="the terminal chats in WebChat sessions"):
            session_id(bad)
    assert socket_url("http://127.0.0.1:8080") == "ws://127.0.0.1:8080/webchat/ws"
    assert socket_url("https://sb.example/") == "wss://sb.example/webchat/ws"


def test_history_lines_show_each_content_block() -> None:
    message = {
        "role": "assistant",
        "created_at_ms": 0,
        "content": [
            {"type": "text", "text": "Checking\nnow"},
            {"type": "tool_use", "id": "t", "name": "get_time", "input": {"timezone": "UTC"}},
        ],
    }
    result = {
        "role": "user",
        "created_at_ms": 0,
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "12:00"}],
    }
    assert message_lines(message) + message_lines(result) == [
        "- assistant Checking now",
        '- assistant [get_time] {"timezone": "UTC"}',
        "- user      [result] 12:00",
    ]


Handler = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]


@asynccontextmanager
async def gateway(handler: Handler) -> AsyncIterator[Gateway]:
    """A socket server answering ``connect`` and then handing the socket to ``handler``."""

    async def on_socket(ws: ServerConnection) -> None:
        hello = json.loads(await ws.recv())
        assert hello["method"] == "connect" and hello["params"]["token"] == "tok"
        await handler(ws, hello)

    async with serve(on_socket, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        yield Gateway(f"http://127.0.0.1:{port}", "tok")


def connected(hello: dict[str, Any], epoch: str, seq: int, resumed: bool, replayed: int) -> str:
    payload = {
        "session": "s",
        "session_key": "main:webchat:s",
        "epoch": epoch,
        "seq": seq,
        "resumed": resumed,
        "replayed": replayed,
    }
    return json.dumps({"type": "res", "id": hello["id"], "ok": True, "payload": payload})


def answer(request: dict[str, Any], **payload: Any) -> str:
    return json.dumps({"type": "res", "id": request["id"], "ok": True, "payload": payload})


async def test_a_dropped_socket_is_reopened_where_it_stopped() -> None:
    hellos: list[dict[str, Any]] = []

    async def handler(ws: ServerConnection, hello: dict[str, Any]) -> None:
        hellos.append(hello["params"])
        if len(hellos) == 1:
            await ws.send(connected(hello, "e1", 5, False, 0))
            sent = json.loads(await ws.recv())
            await ws.send(answer(sent, message_id="m1", status="queued"))
            await ws.send(event(6, "assistant", run_id="r", text="Hel"))
            await ws.close(1013, "too slow")  # the gateway drops a socket that lags behind
            return
        await ws.send(connected(hello, "e1", 7, True, 1))
        await ws.send(event(7, "assistant", run_id="r", text="lo"))
        await ws.send(event(8, "lifecycle", run_id="r", phase="end", message_ids=["m1"]))
        await ws.wait_closed()

    out = io.StringIO()
    view = ChatView(out)
    async with gateway(handler) as gw:
        live = LiveSession(gw, "s", view.show, view.note)
        await live.start()
        try:
            sent = await live.send("hi")
            end = await asyncio.wait_for(live.run_end(sent["message_id"]), WAIT_S)
        finally:
            await live.close()
    assert end["phase"] == "end"
    assert hellos[0] == {"token": "tok", "session": "s"}
    assert hellos[1] == {"token": "tok", "session": "s", "epoch": "e1", "last_seq": 6}
    assert out.getvalue() == (
        "Hel\n· connection lost (code 1013); reconnecting\n· resumed (1 events replayed)\nlo\n"
    )


async def test_ctrl_c_during_a_run_asks_the_gateway_to_abort_it() -> None:
    methods: list[str] = []

    async def handler(ws: ServerConnection, hello: dict[str, Any]) -> None:
        await ws.send(connected(hello, "e", 0, False, 0))
        async for raw in ws:
            request = json.loads(raw)
            methods.append(request["method"])
            if request["method"] == "send":
                await ws.send(answer(request, message_id="m", status="queued"))
                await ws.send(event(1, "lifecycle", run_id="r", phase="start", message_ids=["m"]))
            else:
                await ws.send(answer(request, status="requested"))
                await ws.send(
                    event(
                        2,
                        "lifecycle",
                        run_id="r",
                        phase="end",
                        message_ids=["m"],
                        status="interrupted",
                        stop_reason="interrupted",
                    )
                )

    out = io.StringIO()
    view = ChatView(out)
    async with gateway(handler) as gw:
        live = LiveSession(gw, "s", view.show, view.note)
        await live.start()
        chat = Chat(live, view, interactive=False)
        try:
            turn = asyncio.create_task(chat.turn("work hard"))
            chat.interrupted.set()  # what the SIGINT handler does
            await asyncio.wait_for(turn, WAIT_S)
        finally:
            await live.close()
    assert methods == ["send", "abort"]
    assert out.getvalue().splitlines() == [
        "· stopping the run (Ctrl-C again: stop waiting)",
        "· run interrupted (interrupted)",
    ]
