"""The OpenAI API's session and agent helpers, read back from the INBOUND stream: ``user`` and
``X-Switchboard-Session`` name the persistent session ``<agent>:openai:<peer>``,
``switchboard:<agent>`` picks the agent. No agent answers here, so a chat ends in 504 after
``reply_timeout_s`` with its message queued."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from switchboard.v1 import messages_pb2

from .gateway_harness import Gateway, started

CHAT = "/v1/chat/completions"


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


def chat(text: str = "What time is it?", **extra: Any) -> dict[str, Any]:
    return {"model": "switchboard", "messages": [{"role": "user", "content": text}], **extra}


async def queued(
    gw: Gateway, body: dict[str, Any], headers: dict[str, str] | None = None
) -> messages_pb2.InboundMessage:
    """Post a chat that nobody answers; the one message it published."""
    response = await gw.client.post(CHAT, json=body, headers={**gw.auth, **(headers or {})})
    assert response.status_code == 504, response.text
    assert response.json()["error"]["type"] == "timeout_error"
    assert "queued" in response.json()["error"]["message"]
    [(msg_id, subject, message)] = await gw.inbound()
    assert subject == "sb.inbound.openai"
    assert msg_id == f"openai:default:{message.message_id}"
    assert (message.channel, message.account) == ("openai", "default")
    return message


async def test_user_names_the_persistent_session(gw: Gateway) -> None:
    body = chat(
        "and now?",
        user="alice",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "now?"}],
            },
        ],
    )
    message = await queued(gw, body)
    assert message.session_key == "main:openai:alice"
    assert (message.agent, message.sender, message.chat.id) == ("main", "alice", "alice")
    assert message.text == "and now?"  # only the last user message is new input
    assert list(message.context) == []  # the session keeps the earlier turns


async def test_the_session_header_names_the_session_and_wins_over_user(gw: Gateway) -> None:
    body = chat(user="alice")
    message = await queued(gw, body, {"X-Switchboard-Session": "bob@home"})
    assert message.session_key == "main:openai:bob@home"
    assert message.sender == "bob@home"


async def test_without_a_session_the_request_is_a_one_off_with_its_context(gw: Gateway) -> None:
    body = chat(
        messages=[
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "tool", "content": "ignored"},
            {"role": "user", "content": "bye"},
        ]
    )
    message = await queued(gw, body)
    assert re.fullmatch(r"main:openai:oneoff-[0-9a-f]{16}", message.session_key)
    assert message.text == "bye"
    assert [(c.role, c.text) for c in message.context] == [
        ("system", "be brief"),
        ("user", "hello"),
        ("assistant", "hi"),
    ]


async def test_the_model_picks_the_agent(gw: Gateway) -> None:
    message = await queued(gw, chat(model="switchboard:ops", user="alice"))
    assert (message.agent, message.session_key) == ("ops", "ops:openai:alice")


async def test_a_streamed_chat_publishes_the_same_way(gw: Gateway) -> None:
    message = await queued(gw, chat(user="carol", stream=True))
    assert message.session_key == "main:openai:carol"


@pytest.mark.parametrize(
    "peer",
    ["has space", "a/b", "a:b", "x" * 129, "ünï", "alice\n", "alice\nmain:openai:bob"],
    ids=["space", "slash", "colon", "too-long", "non-ascii", "trailing-newline", "newline"],
)
async def test_a_bad_user_is_400_and_nothing_is_published(gw: Gateway, peer: str) -> None:
    response = await gw.client.post(CHAT, json=chat(user=peer), headers=gw.auth)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "user")
    assert await gw.inbound() == []


@pytest.mark.parametrize("peer", ["has space", "a/b", "x" * 129])
async def test_a_bad_session_header_is_400_and_nothing_is_published(gw: Gateway, peer: str) -> None:
    response = await gw.client.post(
        CHAT, json=chat(user="alice"), headers={**gw.auth, "X-Switchboard-Session": peer}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert await gw.inbound() == []


@pytest.mark.parametrize(
    "model", ["switchboard:Ops", "switchboard:o.ps", "switchboard:" + "a" * 65]
)
async def test_an_invalid_agent_is_404_and_nothing_is_published(gw: Gateway, model: str) -> None:
    response = await gw.client.post(CHAT, json=chat(model=model, user="alice"), headers=gw.auth)
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "model_not_found"
    assert await gw.inbound() == []


async def test_models_lists_switchboard_and_the_default_agent(gw: Gateway) -> None:
    response = await gw.client.get("/v1/models", headers=gw.auth)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["switchboard", "switchboard:main"]
    assert {m["object"] for m in body["data"]} == {"model"}
