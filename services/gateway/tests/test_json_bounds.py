"""Malformed input never reaches a 500 or a traceback (issue 23): every JSON entry point of the
gateway parses through ``switchboard.jsonsafe`` (bounded depth and size). The gateway runs
in-process on a real socket with the real Telegram, Slack and Discord adapters (fake
platforms), hooks and WebChat; webhook calls carry each platform's valid secret or signature,
so what is tested is the parsing behind the verification."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect

from switchboard.jsonsafe import MAX_DEPTH

from .channels_harness import ChannelsGateway, channels_gateway

DEEPEST = b"[" * 10_000 + b"]" * 10_000  # far past what CPython's parser recurses into


def nested(levels: int, leaf: Any = "x") -> Any:
    """``levels`` arrays inside each other around ``leaf``: past the bound but parseable."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


TOO_DEEP = MAX_DEPTH + 10


# One gateway for the module (starting one per test cost a second each, 50 s in all): each
# test sees only what it published (ChannelsGateway.mark), under message ids of its own.
pytestmark = pytest.mark.asyncio(loop_scope="module")
_IDS = itertools.count(1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(
    module_nats_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ChannelsGateway]:
    async with channels_gateway(module_nats_url, tmp_path_factory.mktemp("gw")) as gateway:
        yield gateway


@pytest_asyncio.fixture(loop_scope="module")
async def cg(shared: ChannelsGateway) -> ChannelsGateway:
    await shared.mark()
    return shared


@pytest.fixture(autouse=True)
def no_traceback(caplog: pytest.LogCaptureFixture) -> Any:
    """Whatever a test sends, nothing is logged with a traceback (uvicorn's "Exception in ASGI
    application", a failed socket...)."""
    with caplog.at_level(logging.WARNING):
        yield
    crashed = [r for r in caplog.records if r.exc_info is not None]
    assert not crashed, [f"{r.name}: {r.getMessage()}" for r in crashed]


def telegram_update(text: object = "hello", **extra: Any) -> dict[str, Any]:
    """A DM update with ids no other test of the module used (INBOUND drops a repeated one)."""
    n = next(_IDS)
    message = {
        "message_id": n,
        "from": {"id": 4242, "is_bot": False, "first_name": "Ada"},
        "chat": {"id": 4242, "type": "private"},
        "date": 1_700_000_000,
        "text": text,
        **extra,
    }
    return {"update_id": 900_000_000 + n, "message": message}


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_10000_level_array_is_400_on_each_signed_webhook(
    cg: ChannelsGateway, platform: str
) -> None:
    """Before: RecursionError in ``json.loads`` and a 500 (Telegram, Slack, Discord alike)."""
    response = await getattr(cg, platform)(DEEPEST)
    assert response.status_code == 400, response.text
    assert "deeper than" in response.json()["error"]["message"]
    assert await cg.inbound() == []


async def test_a_message_nesting_past_the_bound_is_refused_not_published(
    cg: ChannelsGateway,
) -> None:
    """A real message with a field nested past the bound: parseable, so the old code published
    it; now the whole call is refused before anything walks it."""
    body = json.dumps(telegram_update(extra_field=nested(TOO_DEEP))).encode()
    response = await cg.telegram(body)
    assert response.status_code == 400, response.text
    control = await cg.telegram(json.dumps(telegram_update(extra_field=nested(8))).encode())
    assert control.status_code == 200, control.text
    assert [m.text for m in await cg.inbound()] == ["hello"]


@pytest.mark.parametrize(
    "update",
    [
        {"update_id": 1, "message": ["not", "an", "object"]},
        {"update_id": 1, "message": "text"},
        {"update_id": "1", "message": {}},
        {"update_id": 1, "edited_message": 5},
        {"update_id": 1, "message": {"chat": [], "message_id": 1}},
        {"update_id": 1, "message": {"chat": {"id": "4242"}, "message_id": 1}},
    ],
)
async def test_a_wrongly_typed_telegram_update_is_400(
    cg: ChannelsGateway, update: dict[str, Any]
) -> None:
    response = await cg.telegram(json.dumps(update).encode())
    assert response.status_code == 400, response.text
    assert await cg.inbound() == []


@pytest.mark.parametrize(
    "fields",
    [
        {"text": 42},
        {"text": ["hi"]},
        {"text": None, "caption": {"a": 1}},
        {"from": [4242]},
        {"entities": {"type": "mention"}, "text": "@bot hi"},
        {"entities": [{"type": "mention", "offset": -(10**30), "length": 10**30}], "text": "@x"},
        {"photo": {"file_id": "x"}, "text": None},
        {"document": [1, 2], "text": None},
        {"reply_to_message": [], "text": "re"},
        {"is_topic_message": True, "message_thread_id": {"id": 1}, "text": "t"},
        {"sender_chat": "channel", "text": "s"},
    ],
)
async def test_a_telegram_message_with_wrongly_typed_fields_is_never_a_5xx(
    cg: ChannelsGateway, fields: dict[str, Any]
) -> None:
    """Fields of the wrong type are ignored (or the call refused): never a server error."""
    update = telegram_update()
    update["message"].update(fields)
    response = await cg.telegram(json.dumps(update).encode())
    assert response.status_code < 500, response.text
    for message in await cg.inbound():
        assert isinstance(message.text, str)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "message", "channel": "D1", "user": ["U1"], "text": "hi", "ts": "1.2"},
        {"type": "message", "channel": "D1", "user": {"id": "U1"}, "text": "hi", "ts": "1.2"},
        {"type": "message", "channel": ["D1"], "user": "U1", "text": "hi", "ts": "1.2"},
        {"type": "message", "channel": "D1", "user": "U1", "text": 5, "ts": 1.2},
        {"type": "message", "subtype": ["x"], "channel": "D1", "user": "U1", "ts": "1.2"},
        {"type": "message", "channel": "D1", "user": "U1", "text": "hi", "ts": "1.2", "files": 3},
        {
            "type": "app_mention",
            "channel": "C1",
            "user": "U1",
            "text": "hi",
            "ts": "1.2",
            "bot_id": ["B"],
        },
    ],
)
async def test_a_wrongly_typed_slack_event_is_never_a_5xx(
    cg: ChannelsGateway, event: dict[str, Any]
) -> None:
    """Before: a ``user`` that is a list or an object raised TypeError (unhashable) while the
    bot's own messages were being recognized: a 500."""
    body = json.dumps(cg.slack_events.envelope(event)).encode()
    response = await cg.slack(body)
    assert 400 <= response.status_code < 500 or response.json() == {"ok": True}, response.text


async def test_a_wrongly_typed_discord_interaction_is_never_a_5xx(cg: ChannelsGateway) -> None:
    command = cg.discord_signer.slash_command("hello", guild_id="4400000000000000001")
    variants: list[dict[str, Any]] = [
        {**command, "type": [2]},
        {**command, "data": [1]},
        {**command, "member": "me"},
        {**command, "data": {**command["data"], "options": {"type": 3}}},
        {**command, "data": {**command["data"], "options": [{"type": [1], "options": 5}]}},
        {**command, "channel_id": 4200000000000000001},
    ]
    for variant in variants:
        response = await cg.discord(json.dumps(variant).encode())
        assert response.status_code < 500, (variant, response.text)
    assert await cg.inbound() == []


async def test_hooks_refuse_a_body_nested_past_the_bound(cg: ChannelsGateway) -> None:
    for path, body in [
        ("/hooks/agent", {"message": "hi", "name": "x", "extra": nested(TOO_DEEP)}),
        ("/hooks/wake", {"text": nested(TOO_DEEP)}),
        ("/hooks/agent", DEEPEST),
    ]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = await cg.hook(path, raw)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "invalid_json"
    assert await cg.inbound() == []


async def test_webchat_first_frame_nested_10000_deep_is_refused_and_closed(
    cg: ChannelsGateway,
) -> None:
    """Before: RecursionError while the first frame was parsed; the socket failed (1011) and
    the traceback was logged. Now the error frame of a bad first frame, and 4401."""
    async with connect(f"ws://{cg.address}/webchat/ws", max_size=None) as ws:
        await ws.send(DEEPEST.decode())
        reply = json.loads(await ws.recv())
        await ws.wait_closed()
    assert reply["ok"] is False and reply["error"]["code"] == "unauthorized", reply
    assert ws.close_code == 4401


async def test_a_connected_webchat_socket_answers_a_too_deep_frame_and_stays_open(
    cg: ChannelsGateway,
) -> None:
    async with connect(f"ws://{cg.address}/webchat/ws", max_size=None) as ws:
        connect_frame = {"type": "req", "id": "c", "method": "connect"}
        await ws.send(json.dumps({**connect_frame, "params": {"token": cg.token}}))
        assert json.loads(await ws.recv())["ok"] is True
        for frame in (DEEPEST.decode(), json.dumps({"type": "req", "id": "d", **nested_obj()})):
            await ws.send(frame)
            reply = json.loads(await ws.recv())
            assert reply["ok"] is False and reply["error"]["code"] == "bad_json", reply
            assert "deeper than" in reply["error"]["message"]
        await ws.send(json.dumps({"type": "req", "id": "h", "method": "nope", "params": {}}))
        assert json.loads(await ws.recv())["error"]["code"] == "unknown_method"


def nested_obj() -> dict[str, Any]:
    return {"method": "send", "params": {"text": "hi", "x": nested(TOO_DEEP)}}


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/api/sessions/main:api:alice/messages",
        "/api/approvals/ap-1",
        "/tools/invoke",
        "/api/cron",
    ],
)
async def test_an_api_body_nested_past_the_bound_is_400_in_openai_shape(
    cg: ChannelsGateway, path: str
) -> None:
    """Before: parsed by FastAPI and walked by the route (``/tools/invoke`` forwarded its
    arguments to the agent); a 10,000-level one was FastAPI's generic 400."""
    for body in (json.dumps({"model": "switchboard", "x": nested(TOO_DEEP)}).encode(), DEEPEST):
        response = await cg.api(path, body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_json")
        assert "deeper than" in error["message"]


async def test_tools_invoke_arguments_nested_past_the_bound_are_refused(
    cg: ChannelsGateway,
) -> None:
    body = {"tool": "get_time", "args": {"a": nested(TOO_DEEP)}}
    response = await cg.api("/tools/invoke", json.dumps(body).encode())
    assert response.status_code == 400, response.text
    shallow = await cg.api("/tools/invoke", json.dumps({"tool": "get_time", "args": {}}).encode())
    assert shallow.status_code == 503, shallow.text  # through to the (absent) agent


@pytest.mark.parametrize("path", ["/a2a", "/mcp"])
async def test_a_json_rpc_body_nested_past_the_bound_is_a_json_rpc_parse_error(
    cg: ChannelsGateway, path: str
) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"a": nested(TOO_DEEP)}}
    for body in (json.dumps(request).encode(), DEEPEST):
        response = await cg.client.post(
            path,
            content=body,
            headers={
                "Authorization": f"Bearer {cg.token}",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        )
        assert response.status_code == 400, response.text
        answer = response.json()
        assert answer["jsonrpc"] == "2.0" and answer["id"] is None
        assert answer["error"]["code"] == -32700 and "deeper than" in answer["error"]["message"]
