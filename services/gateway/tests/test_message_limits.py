"""Caps on what one request brings in: the messages of a chat completion
(SB_MAX_MESSAGES_PER_REQUEST, and a ceiling checked while the body is validated) and the text
that goes on the bus (SB_MAX_BODY_CHARS), each a 400 naming the limit with nothing
published."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_gateway.config import MESSAGES_CEILING

from .gateway_harness import Gateway, started

CHAT = "/v1/chat/completions"


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(
        nats_url, tmp_path, max_messages_per_request=3, max_body_chars=100
    ) as gateway:
        yield gateway


def messages(n: int, text: str = "hi") -> list[dict[str, str]]:
    roles = ["user", "assistant"]
    return [{"role": roles[(n - 1 - i) % 2], "content": text} for i in range(n)]


def chat(msgs: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    return {"model": "switchboard", "messages": msgs, **extra}


async def error_of(gw: Gateway, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await gw.client.post(path, json=body, headers=gw.auth)
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


async def test_more_messages_than_the_setting_is_400_naming_it(gw: Gateway) -> None:
    for extra in ({}, {"user": "alice"}, {"stream": True}):
        error = await error_of(gw, CHAT, chat(messages(4), **extra))
        assert (error["code"], error["param"]) == ("too_many_messages", "messages")
        assert "4 in one request, at most 3 (SB_MAX_MESSAGES_PER_REQUEST)" in error["message"]
    assert await gw.inbound() == []
    response = await gw.client.post(CHAT, json=chat(messages(3)), headers=gw.auth)
    assert response.status_code == 504  # within the cap: accepted (no agent answers here)
    [(_, _, message)] = await gw.inbound()
    assert len(message.context) == 2


async def test_the_ceiling_is_checked_while_the_body_is_validated(gw: Gateway) -> None:
    """Past the ceiling the request is refused by validation (each message is not built)."""
    tiny = [{"role": "user"}] * (MESSAGES_CEILING + 1)
    error = await error_of(gw, CHAT, chat(tiny))
    assert error["param"] == "messages"
    assert f"at most {MESSAGES_CEILING} items" in error["message"]
    assert await gw.inbound() == []


async def test_text_past_the_setting_is_400_and_counts_what_goes_on_the_bus(gw: Gateway) -> None:
    """A one-off sends its earlier messages as context, so they count; a persistent session
    (``user``) sends only the last message, so only it counts."""
    long_context = [{"role": "system", "content": "s" * 60}, {"role": "user", "content": "u" * 41}]
    error = await error_of(gw, CHAT, chat(long_context))
    assert (error["code"], error["param"]) == ("too_much_text", "messages")
    assert "101 characters in one request, at most 100 (SB_MAX_BODY_CHARS)" in error["message"]
    error = await error_of(gw, CHAT, chat(messages(1, "x" * 101), user="alice"))
    assert error["code"] == "too_much_text"
    assert await gw.inbound() == []

    response = await gw.client.post(CHAT, json=chat(long_context, user="alice"), headers=gw.auth)
    assert response.status_code == 504, response.text  # only "u" * 41 goes on the bus
    [(_, _, message)] = await gw.inbound()
    assert message.text == "u" * 41


async def test_a_session_message_past_the_setting_is_400(gw: Gateway) -> None:
    path = "/api/sessions/main:api:alice/messages"
    error = await error_of(gw, path, {"text": "t" * 101})
    assert (error["code"], error["param"]) == ("too_much_text", "text")
    assert "SB_MAX_BODY_CHARS" in error["message"]
    assert await gw.inbound() == []
    accepted = await gw.client.post(path, json={"text": "t" * 100}, headers=gw.auth)
    assert accepted.status_code == 202
