"""POST /api/sessions/{key}/messages: an InboundMessage on sb.inbound.api, durably, with the
``Nats-Msg-Id`` the INBOUND stream deduplicates on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from switchboard.v1 import messages_pb2
from switchboard_gateway.conversations import Conversations

from .gateway_harness import Gateway, started


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


async def test_a_posted_message_is_published_on_the_api_subject(gw: Gateway) -> None:
    response = await gw.client.post(
        "/api/sessions/hook:mail/messages", json={"text": "new mail"}, headers=gw.auth
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["session_key"] == "hook:mail"
    assert body["status"] == "queued"
    [(msg_id, subject, message)] = await gw.inbound()
    assert subject == "sb.inbound.api"
    assert msg_id == f"api:default:{body['message_id']}"
    assert message.message_id == body["message_id"]
    assert (message.channel, message.account, message.sender) == ("api", "default", "api")
    assert (message.session_key, message.agent, message.text) == ("hook:mail", "main", "new mail")
    assert message.received_at_ms > 0


async def test_the_body_may_name_the_agent(gw: Gateway) -> None:
    response = await gw.client.post(
        "/api/sessions/ops:api:x/messages", json={"text": "hi", "agent": "ops"}, headers=gw.auth
    )
    assert response.status_code == 202, response.text
    [(_, _, message)] = await gw.inbound()
    assert (message.agent, message.session_key) == ("ops", "ops:api:x")


async def test_each_post_is_a_new_message(gw: Gateway) -> None:
    ids = set()
    for _ in range(2):
        response = await gw.client.post(
            "/api/sessions/main:api:a/messages", json={"text": "same text"}, headers=gw.auth
        )
        ids.add(response.json()["message_id"])
    assert len(ids) == 2
    assert {m.message_id for _, _, m in await gw.inbound()} == ids


async def test_the_same_message_id_twice_is_deduplicated_by_the_stream(gw: Gateway) -> None:
    response = await gw.client.post(
        "/api/sessions/main:api:a/messages", json={"text": "once"}, headers=gw.auth
    )
    assert response.status_code == 202
    [(_, _, message)] = await gw.inbound()
    conversations: Conversations = gw.app.state.conversations
    assert await conversations.publish(message) is False  # a retransmit of the same id
    assert len(await gw.inbound()) == 1
    other = messages_pb2.InboundMessage()
    other.CopyFrom(message)
    other.message_id = "another"
    assert await conversations.publish(other) is True
    assert await conversations.publish(other) is False
    other.account = "second"  # the same platform id under another account is another message
    assert await conversations.publish(other) is True
    assert [msg_id for msg_id, _, _ in await gw.inbound()] == [
        f"api:default:{message.message_id}",
        "api:default:another",
        "api:second:another",
    ]


async def test_a_retry_with_the_same_idempotency_key_is_queued_once(gw: Gateway) -> None:
    """A client whose connection dropped before the 202 sends the message again with the same
    ``Idempotency-Key``: one message, and the second answer says it was a duplicate."""
    url = "/api/sessions/main:api:retry/messages"
    headers = {**gw.auth, "Idempotency-Key": "msg-0001"}
    first = await gw.client.post(url, json={"text": "only once"}, headers=headers)
    again = await gw.client.post(url, json={"text": "only once"}, headers=headers)
    assert first.status_code == again.status_code == 202, again.text
    assert first.json()["duplicate"] is False
    assert again.json()["duplicate"] is True
    assert (
        first.json()["message_id"]
        == again.json()["message_id"]
        == "session:main:api:retry:msg-0001"
    )
    [(msg_id, _, message)] = await gw.inbound()
    assert (msg_id, message.text) == ("api:default:session:main:api:retry:msg-0001", "only once")
    # The key is per session: the same key in another session is another message.
    other = await gw.client.post(
        "/api/sessions/main:api:other/messages", json={"text": "x"}, headers=headers
    )
    assert other.json()["duplicate"] is False
    bad = await gw.client.post(
        url, json={"text": "x"}, headers={**gw.auth, "Idempotency-Key": "a b"}
    )
    assert bad.status_code == 400, bad.text
    assert "Idempotency key" in bad.json()["error"]["message"]
