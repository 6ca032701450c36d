"""WebChat's page and socket protocol (docs/webchat-protocol.md), over a real socket: the page is
public and self-contained; the socket authenticates itself with its first request (anything
else, or a wrong token, closes it with 4401); a connected socket publishes its messages on
sb.inbound.webchat, answers bad frames with errors and stays open, refuses oversized frames,
and a token holds at most SB_MAX_STREAMS_PER_TOKEN sockets."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.msg import Msg

from switchboard.v1 import messages_pb2, sessions_pb2
from switchboard_gateway import auth, webchat

from .webchat_client import WebChatGateway, eventually, webchat_gateway


@pytest.fixture
async def wg(nats_url: str, tmp_path: Path) -> AsyncIterator[WebChatGateway]:
    async with webchat_gateway(nats_url, tmp_path, webchat_max_frame_bytes=4096) as gateway:
        yield gateway


async def test_the_page_is_public_and_loads_nothing_from_elsewhere(wg: WebChatGateway) -> None:
    assert webchat.PUBLIC_PATHS <= auth.PUBLIC
    page = await wg.gw.client.get("/webchat")  # no Authorization header
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert '<script type="module" src="/webchat/webchat.js"' in page.text
    assert 'aria-live="polite"' in page.text and '<label for="token">' in page.text
    names = ("view", "webchat", "prefs", "sidebar", "socket", "voice")
    assets = [(f"/webchat/{name}.js", "javascript") for name in names]
    for path, kind in [*assets, ("/webchat/webchat.css", "css")]:
        asset = await wg.gw.client.get(path)
        assert asset.status_code == 200 and kind in asset.headers["content-type"]
        assert not re.search(r"https?://", asset.text), f"{path} refers to another host"
    script = (await wg.gw.client.get("/webchat/webchat.js")).text
    assert "sessionStorage" in script and "localStorage" not in script
    # localStorage holds the theme and the conversations' names only, never the token.
    prefs = (await wg.gw.client.get("/webchat/prefs.js")).text
    assert "switchboard.webchat.token" in script and "switchboard.webchat.token" not in prefs
    view = (await wg.gw.client.get("/webchat/view.js")).text
    others = [(await wg.gw.client.get(f"/webchat/{n}.js")).text for n in ("sidebar", "socket")]
    # Text is set as text, never parsed as HTML (the Markdown renderer sanitises what it parses).
    assert "innerHTML" not in script + view + prefs + "".join(others)
    # The API next to it still wants the token.
    assert (await wg.gw.client.get("/api/sessions/x/history")).status_code == 401


async def test_connect_then_send_publishes_a_webchat_message(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, hello):
        session = hello["session"]
        assert hello["session_key"] == f"main:webchat:{session}"
        assert (hello["seq"], hello["resumed"], hello["replayed"]) == (0, False, 0)
        assert set(hello["methods"]) == {
            "connect",
            "send",
            "history",
            "abort",
            "decide",
            "sessions",
        }
        first = await client.request("send", text="hello there")
        second = await client.request("send", text="hello there")
    assert first["ok"] and second["ok"], (first, second)
    ids = [first["payload"]["message_id"], second["payload"]["message_id"]]
    assert ids[0] != ids[1]
    assert first["payload"]["session_key"] == hello["session_key"]
    published = await wg.gw.inbound()
    assert [msg_id for msg_id, _, _ in published] == [f"webchat:default:{i}" for i in ids]
    for _, subject, message in published:
        assert subject == "sb.inbound.webchat"
        assert (message.channel, message.agent, message.text) == ("webchat", "main", "hello there")
        assert message.session_key == hello["session_key"]
        assert message.sender == session


async def test_a_session_can_be_named_and_sent_to(wg: WebChatGateway) -> None:
    async with wg.connected(session="kitchen-1") as (client, hello):
        assert hello["session_key"] == "main:webchat:kitchen-1"
        res = await client.request("send", text="hi", session="other_2")
    assert res["payload"]["session_key"] == "main:webchat:other_2"
    [(_, _, message)] = await wg.gw.inbound()
    assert message.session_key == "main:webchat:other_2"


@pytest.mark.parametrize(
    "first",
    [
        {"type": "req", "id": 7, "method": "send", "params": {"text": "sneaky"}},
        "not json at all",
        {"type": "req", "id": 7, "method": "connect", "params": {}},
    ],
    ids=["send", "bad-json", "no-token"],
)
async def test_the_first_request_must_be_connect(wg: WebChatGateway, first: object) -> None:
    async with wg.open() as client:
        await client.send_raw(first if isinstance(first, str) else json.dumps(first))
        res = await client.frame()
        assert res["type"] == "res" and res["ok"] is False
        assert res["error"]["code"] in ("unauthorized", "invalid_params")
        assert res["id"] == (None if isinstance(first, str) else 7)
        assert await client.closed() == 4401
    assert await wg.gw.inbound() == []


async def test_a_wrong_token_is_refused_and_closed(wg: WebChatGateway) -> None:
    async with wg.open() as client:
        res = await client.request("connect", token=wg.token + "x")
        assert res == {
            "type": "res",
            "id": "t1",
            "ok": False,
            "error": {"code": "unauthorized", "message": "Invalid token."},
        }
        assert await client.closed() == 4401
        assert wg.token not in json.dumps(res)


async def test_no_connect_in_time_closes_the_socket(nats_url: str, tmp_path: Path) -> None:
    settings = {"webchat_connect_timeout_s": 0.3}
    async with webchat_gateway(nats_url, tmp_path, **settings) as wg, wg.open() as client:
        res = await client.frame()
        assert res["error"]["code"] == "unauthorized"
        assert await client.closed() == 4408


async def test_bad_frames_get_errors_and_the_socket_stays_open(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, _):
        await client.send_raw("{oops")
        assert (await client.frame())["error"]["code"] == "bad_json"
        await client.send_raw(json.dumps({"type": "req", "id": "a"}))
        bad = await client.frame()
        assert (bad["id"], bad["error"]["code"]) == ("a", "bad_frame")
        await client.send_raw(b"\x00binary")
        assert (await client.frame())["error"]["code"] == "bad_frame"
        unknown = await client.request("reboot")
        assert unknown["error"]["code"] == "unknown_method"
        assert "send" in unknown["error"]["message"]
        empty = await client.request("send", text="")
        assert empty["error"]["code"] == "invalid_params"
        assert "text" in empty["error"]["message"]
        odd = await client.request("send", text="x", session="no spaces allowed")
        assert odd["error"]["code"] == "invalid_params"
        again = await client.request("connect", token=wg.token)
        assert again["error"]["code"] == "already_connected"
        fine = await client.request("send", text="still here")
        assert fine["ok"], fine
    assert [m.text for _, _, m in await wg.gw.inbound()] == ["still here"]


async def test_an_oversized_frame_is_refused(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, _):
        frame = {"type": "req", "id": "big", "method": "send", "params": {"text": "x" * 5000}}
        await client.send_raw(json.dumps(frame))  # over 4096 bytes
        big = await client.frame()
        assert big["ok"] is False
        assert big["id"] is None  # not read: the frame was refused before parsing
        assert big["error"]["code"] == "frame_too_large"
        assert "4096" in big["error"]["message"]
        assert (await client.request("send", text="small"))["ok"]
    assert [m.text for _, _, m in await wg.gw.inbound()] == ["small"]


async def test_too_much_text_is_refused(nats_url: str, tmp_path: Path) -> None:
    async with webchat_gateway(nats_url, tmp_path, max_body_chars=10) as wg:
        async with wg.connected() as (client, _):
            res = await client.request("send", text="x" * 11)
            assert res["error"]["code"] == "too_much_text"
        assert await wg.gw.inbound() == []


async def test_sockets_per_token_are_bounded(nats_url: str, tmp_path: Path) -> None:
    async with webchat_gateway(nats_url, tmp_path, max_streams_per_token=1) as wg:
        async with wg.connected(), wg.open() as second:
            res = await second.request("connect", token=wg.token)
            assert res["error"]["code"] == "too_many_streams"
            assert await second.closed() == 4429
        # The first socket's slot comes back once the gateway saw it close.
        await eventually(lambda: not wg.gw.app.state.streams.open, "the slot released")
        async with wg.connected() as (_, hello):
            assert hello["session"]


async def test_a_socket_ends_at_its_lifetime(nats_url: str, tmp_path: Path) -> None:
    settings = {"stream_max_lifetime_s": 0.5}
    async with (
        webchat_gateway(nats_url, tmp_path, **settings) as wg,
        wg.connected() as (client, _),
    ):
        assert await client.closed() == 4000


async def test_abort_asks_the_agent_to_interrupt_the_sessions_run(wg: WebChatGateway) -> None:
    """An AbortRun for the connection's session (or the one named) goes to sb.runs.abort,
    where the agent replica running it interrupts it (tests/e2e/test_webchat_abort.py)."""
    got: asyncio.Queue[messages_pb2.AbortRun] = asyncio.Queue()

    async def on_abort(msg: Msg) -> None:
        got.put_nowait(messages_pb2.AbortRun.FromString(msg.data))

    sub = await wg.gw.rt.nc.subscribe("sb.runs.abort", cb=on_abort)
    try:
        async with wg.connected(session="s1") as (client, _):
            aborted = await client.request("abort")
            assert aborted["ok"], aborted
            assert aborted["payload"]["status"] == "requested"
            other = await client.request("abort", session="s2")
            assert other["payload"]["session_key"].endswith(":webchat:s2")
        first = await asyncio.wait_for(got.get(), 10)
        second = await asyncio.wait_for(got.get(), 10)
    finally:
        await sub.unsubscribe()
    assert first.session_key == aborted["payload"]["session_key"]
    assert first.session_key.endswith(":webchat:s1") and first.requested_by == "webchat"
    assert second.session_key.endswith(":webchat:s2")


async def test_decide_checks_its_parameters_and_says_when_the_agent_is_away(
    wg: WebChatGateway,
) -> None:
    """(The approval itself, through the tool card's button: tests/e2e/test_webchat_approval.py.)
    No agent listens in this harness: a well-formed decision is answered ``unavailable``."""
    async with wg.connected() as (client, _):
        bad = await client.request("decide", approval_id="ap 1", decision="approve")
        assert bad["error"]["code"] == "invalid_params"
        odd = await client.request("decide", approval_id="ap_1", decision="maybe")
        assert odd["error"]["code"] == "invalid_params"
        away = await client.request("decide", approval_id="ap_1", decision="deny")
        assert away["error"]["code"] == "unavailable", away


async def test_a_session_command_is_answered_by_an_agent_not_queued(wg: WebChatGateway) -> None:
    """``/status`` (and /new, /reset, /stop, /model, /compact) is asked of the agents on
    sb.sessions.command, as the router does for chat channels; the answer comes in the send
    response and nothing goes to INBOUND. With no agent answering: ``unavailable``."""
    async with wg.connected(session="s1") as (client, _):
        away = await client.request("send", text="/status")
        assert away["error"]["code"] == "unavailable", away
        asked: list[sessions_pb2.SessionCommand] = []

        async def agent(msg: Msg) -> None:
            asked.append(sessions_pb2.SessionCommand.FromString(msg.data))
            answer = sessions_pb2.SessionCommandResult(outcome="done", text="This chat now uses x.")
            await msg.respond(answer.SerializeToString())

        sub = await wg.gw.rt.nc.subscribe("sb.sessions.command", cb=agent)
        try:
            sent = await client.request("send", text="/MODEL openai:x ")
        finally:
            await sub.unsubscribe()
    assert sent["payload"]["status"] == "answered", sent
    assert sent["payload"]["answer"] == "This chat now uses x."
    [command] = asked
    assert (command.command, command.args, command.sender) == ("model", "openai:x", "webchat:s1")
    assert command.session_key == sent["payload"]["session_key"] == "main:webchat:s1"
    assert command.role == "owner"  # the WebChat user holds the gateway token (docs/trust.md)
    assert await wg.gw.inbound() == []
