"""A channel's webhook, POST /channels/<channel>/<account>, with the fake platform's adapter:
verified by the adapter (not the gateway token), parsed, each message published once on
sb.inbound.<channel> under ``<channel>:<account>:<platform id>``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from fastapi.routing import iter_route_contexts

from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels.typing import Typing

from .gateway_harness import Gateway, client_on, started

HOOK = "/channels/fakechat/acct1"


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


async def eventually(check: Callable[[], bool], what: str, timeout: float = 15) -> None:
    """Poll ``check`` until it holds: a bound on waiting, not a timing assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


def updates(*ids: int) -> dict[str, object]:
    return {
        "updates": [
            {"id": i, "from": f"u{i}", "chat": "g1" if i % 2 else f"u{i}", "text": f"text {i}"}
            for i in ids
        ]
    }


async def test_each_message_is_published_with_channel_account_and_platform_id(gw: Gateway) -> None:
    body, headers = gw.fake.webhook(updates(101, 102))
    response = await gw.client.post(HOOK, content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"ok": True}
    published = await gw.inbound()
    assert [(msg_id, subject) for msg_id, subject, _ in published] == [
        ("fakechat:acct1:101", "sb.inbound.fakechat"),
        ("fakechat:acct1:102", "sb.inbound.fakechat"),
    ]
    first, second = (m for _, _, m in published)
    assert (first.channel, first.account, first.message_id) == ("fakechat", "acct1", "101")
    assert (first.sender, first.chat.id, first.chat.type, first.text) == (
        "u101",
        "g1",
        "group",
        "text 101",
    )
    assert (second.chat.id, second.chat.type) == ("u102", "direct")
    assert first.received_at_ms > 0
    [call] = gw.fake.parsed
    assert call.body == body  # the adapter saw the raw bytes the signature covers
    assert (call.channel, call.account) == ("fakechat", "acct1")


async def test_a_platform_retry_is_published_once(gw: Gateway) -> None:
    body, headers = gw.fake.webhook(updates(7, 8))
    for _ in range(3):
        response = await gw.client.post(HOOK, content=body, headers=headers)
        assert response.status_code == 200, response.text
    retry_body, retry_headers = gw.fake.webhook(updates(8, 9))  # overlaps the first delivery
    assert (
        await gw.client.post(HOOK, content=retry_body, headers=retry_headers)
    ).status_code == 200
    other_account = await gw.client.post("/channels/fakechat/acct2", content=body, headers=headers)
    assert other_account.status_code == 200
    assert [msg_id for msg_id, _, _ in await gw.inbound()] == [
        "fakechat:acct1:7",
        "fakechat:acct1:8",
        "fakechat:acct1:9",
        "fakechat:acct2:7",
        "fakechat:acct2:8",
    ]


async def test_a_bad_signature_is_401_and_nothing_is_published(gw: Gateway) -> None:
    body, headers = gw.fake.webhook(updates(1))
    tampered = body.replace(b"text 1", b"text 2")
    for content, sent in [
        (body, {}),
        (body, {"x-fake-signature": "sha256=" + "0" * 64}),
        (tampered, headers),  # the signature of another body
        (body, {"x-fake-signature": headers["x-fake-signature"].upper()}),
    ]:
        response = await gw.client.post(HOOK, content=content, headers=sent)
        assert response.status_code == 401, response.text
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("authentication_error", "channel_refused")
    assert gw.fake.parsed == []  # never parsed an unverified body
    assert await gw.inbound() == []


async def test_a_malformed_body_is_400_and_nothing_is_published(gw: Gateway) -> None:
    good = {"id": 1, "from": "u1", "chat": "u1", "text": "hi"}
    bad = [b"{not json", b"[1, 2]", b'{"updates": 3}', b'{"updates": [{"id": 1}]}']
    # a bad update after a good one: the call is refused whole, the good one is not published
    bad.append(gw.fake.webhook({"updates": [good, {"id": 2}]})[0])
    for body in bad:
        response = await gw.client.post(
            HOOK, content=body, headers={"x-fake-signature": gw.fake.sign(body)}
        )
        assert response.status_code == 400, (body, response.text)
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "channel_refused")
    assert await gw.inbound() == []


async def test_the_adapters_synchronous_reply_is_returned(gw: Gateway) -> None:
    body, headers = gw.fake.webhook({"challenge": "c-123"})
    response = await gw.client.post(HOOK, content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"challenge": "c-123"}
    assert await gw.inbound() == []


async def test_an_account_the_adapter_is_not_configured_with_is_404_before_verifying(
    gw: Gateway,
) -> None:
    """Before: any account name was accepted and published under (issue 23)."""
    body, headers = gw.fake.webhook(updates(1))
    for sent in [headers, {}]:  # signed or not: the account is refused first
        response = await gw.client.post("/channels/fakechat/nobody", content=body, headers=sent)
        assert response.status_code == 404, response.text
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("not_found_error", "unknown_account")
    assert gw.fake.parsed == []
    assert await gw.inbound() == []
    assert (await gw.client.post(HOOK, content=body, headers=headers)).status_code == 200


async def test_an_unknown_channel_is_404(gw: Gateway) -> None:
    body, headers = gw.fake.webhook(updates(1))
    response = await gw.client.post("/channels/otherchat/acct1", content=body, headers=headers)
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("not_found_error", "unknown_channel")
    assert await gw.inbound() == []


async def test_without_adapters_there_is_no_webhook_route(gw: Gateway) -> None:
    app = create_app(gw.settings, gw.rt, {})
    paths = {route.path for route in iter_route_contexts(app.routes)}
    assert "/v1/chat/completions" in paths
    assert not {p for p in paths if p and p.startswith("/channels")}
    body, headers = gw.fake.webhook(updates(1))
    async with app.router.lifespan_context(app), client_on(app) as client:
        response = await client.post(HOOK, content=body, headers=headers)
    assert response.status_code == 404
    assert response.json()["error"] == {
        "message": "Not Found",
        "type": "not_found_error",
        "param": None,
        "code": None,
    }
    assert await gw.inbound() == []


async def test_typing_shows_while_a_run_answers_a_webhook_message(gw: Gateway) -> None:
    """The agent's lifecycle start for a message this gateway received shows typing in its
    chat; a run for a message it never received (or a refused one that never runs) shows
    none. Events are handled in order on one subscription, so the last run's typing call
    means the earlier events were handled."""
    body, headers = gw.fake.webhook(updates(41, 42))
    assert (await gw.client.post(HOOK, content=body, headers=headers)).status_code == 200

    async def lifecycle(run_id: str, phase: str, *message_ids: str) -> None:
        event = messages_pb2.AgentEvent(
            run_id=run_id, stream="lifecycle", phase=phase, message_ids=list(message_ids)
        )
        await gw.rt.nc.publish("sb.events.some-session", event.SerializeToString())

    await lifecycle("r-other", "start", "999")  # not received here
    await lifecycle("r-42", "start", "42")
    await eventually(lambda: gw.fake.typed == [("acct1", "u42")], "typing in u42's chat")
    await lifecycle("r-42", "end", "42")
    await lifecycle("r-41", "start", "41")
    await eventually(lambda: len(gw.fake.typed) == 2, "typing for 41")
    assert gw.fake.typed == [("acct1", "u42"), ("acct1", "g1")]


def test_typing_follows_the_adapters_that_publish_themselves(gw: Gateway) -> None:
    """An adapter that publishes on its own (polling, a gateway connection) gets an
    ``on_publish`` hook from Typing.follow; a webhook-only adapter is left alone."""

    class Polling:
        name = "pollchat"
        on_publish: Callable[[messages_pb2.InboundMessage], None] | None = None

    polling, webhook_only = Polling(), gw.fake
    typing: Typing = gw.app.state.typing
    typing.follow(polling)  # type: ignore[arg-type]
    typing.follow(webhook_only)
    assert polling.on_publish is not None
    assert not hasattr(webhook_only, "on_publish")
    message = messages_pb2.InboundMessage(message_id="p-1", account="a", chat={"id": "c"})
    polling.on_publish(message)
    assert "p-1" in typing._expected
