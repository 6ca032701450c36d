"""POST /hooks/wake and /hooks/agent through the in-process gateway (real nats-server): what
they publish to INBOUND (session, text, deliver_to), their own tokens (not the gateway's), no
token in the query string, idempotency keys, and the 4xx answers that publish nothing. Hooks
stay in their lane (docs/trust.md): sessions under ``hook:`` only, delivery only to the targets
of SB_HOOKS_TARGETS. The mappings (POST /hooks/<name>) are in test_hooks_mappings.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from switchboard.errors import ConfigError
from switchboard.settings import describe
from switchboard.tokens import generate
from switchboard_gateway.config import GatewaySettings

from .gateway_harness import Gateway, started

HOOKS_TOKEN = generate()
CI_CHAT = {"channel": "fakechat", "to": "chat-42", "thread": "t-9"}
TARGETS = {"ci-chat": CI_CHAT, "ops": {"channel": "fakechat", "to": "ops", "chat_type": "group"}}


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(
        nats_url, tmp_path, hooks_token=HOOKS_TOKEN, hooks_targets=TARGETS
    ) as gateway:
        yield gateway


def bearer(token: str = HOOKS_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def post(gw: Gateway, path: str, body: Any, **headers: str) -> httpx.Response:
    return await gw.client.post(path, json=body, headers={**bearer(), **headers})


async def test_wake_is_a_system_event_in_the_default_agents_main_session(gw: Gateway) -> None:
    response = await post(gw, "/hooks/wake", {"text": "New email from Ann", "mode": "now"})
    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["ok"] is True and answer["session_key"] == "main:hooks:main"
    [(msg_id, subject, message)] = await gw.inbound()
    assert (subject, msg_id) == ("sb.inbound.hooks", f"hooks:default:{answer['message_id']}")
    assert (message.channel, message.account, message.agent) == ("hooks", "default", "main")
    assert message.session_key == "main:hooks:main"
    assert message.text == "[System event from webhook 'wake']\nNew email from Ann"
    assert message.sender == "hook:wake" and message.received_at_ms > 0
    assert not message.HasField("deliver_to")  # its reply is not sent anywhere


async def test_wake_refuses_a_mode_other_than_now(gw: Gateway) -> None:
    response = await post(gw, "/hooks/wake", {"text": "x", "mode": "next-heartbeat"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith("Invalid request: mode:")
    assert await gw.inbound() == []


@pytest.mark.parametrize("deliver", ["ci-chat", CI_CHAT], ids=["by-name", "written-out"])
async def test_agent_runs_in_hook_session_of_its_name_and_delivers_to_a_target(
    gw: Gateway, deliver: object
) -> None:
    body = {"message": "Summarize the build log", "name": "ci", "agent": "ops", "deliver": deliver}
    response = await post(gw, "/hooks/agent", body)
    assert response.status_code == 202, response.text
    assert response.json()["session_key"] == "hook:ci"
    [(_, subject, message)] = await gw.inbound()
    assert subject == "sb.inbound.hooks"
    assert (message.session_key, message.agent, message.text) == (
        "hook:ci",
        "ops",
        "Summarize the build log",
    )
    target = message.deliver_to
    assert (target.channel, target.account, target.thread_id) == ("fakechat", "default", "t-9")
    assert (target.chat.id, target.chat.type) == ("chat-42", "direct")


@pytest.mark.parametrize(
    "deliver",
    [
        "nope",
        {"channel": "fakechat", "to": "owner-dm-4242"},  # a chat nobody configured
        {**CI_CHAT, "thread": "t-10"},  # a configured chat, another thread
        {**CI_CHAT, "chat_type": "group"},
        {"channel": "fakechat", "to": "ops"},  # "ops" is configured as a group
    ],
)
async def test_agent_delivers_only_to_a_configured_target(gw: Gateway, deliver: object) -> None:
    """Before: any chat of a served channel (the owner's DM included) got the reply."""
    response = await post(gw, "/hooks/agent", {"message": "hi", "deliver": deliver})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("unknown_target", "deliver")
    assert "'ci-chat', 'ops'" in error["message"]  # names what is configured
    assert "owner-dm" not in error["message"] and "chat-42" not in error["message"]
    assert await gw.inbound() == []


async def test_without_targets_a_hook_delivers_nowhere(nats_url: str, tmp_path: Path) -> None:
    async with started(nats_url, tmp_path, hooks_token=HOOKS_TOKEN) as gw:
        response = await post(gw, "/hooks/agent", {"message": "hi", "deliver": CI_CHAT})
        assert response.status_code == 400, response.text
        assert "none is configured" in response.json()["error"]["message"]
        plain = await post(gw, "/hooks/agent", {"message": "hi"})
        assert plain.status_code == 202, plain.text
        assert len(await gw.inbound()) == 1


@pytest.mark.parametrize(
    "key",
    [
        "main:telegram:4242",  # the owner's DM
        "main:api:alice",
        "main:webchat:s1",
        "main:hooks:main",
        "cron:nightly",
        "hook:ci:sub:abc",  # a sub-agent's session below a hook's
        "custom-key",
    ],
)
async def test_agent_refuses_a_session_key_outside_hook(gw: Gateway, key: str) -> None:
    """Before: any valid key was taken, a person's chat session included."""
    response = await post(gw, "/hooks/agent", {"message": "hi", "session_key": key})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("session_key_not_hook", "session_key")
    assert "hook:" in error["message"]
    assert await gw.inbound() == []


async def test_a_target_on_a_channel_the_gateway_does_not_serve_stops_the_start(
    nats_url: str, tmp_path: Path
) -> None:
    targets = {"tg": {"channel": "telegram", "to": "42"}}
    with pytest.raises(ConfigError, match=r"SB_HOOKS_TARGETS\['tg'\]\.channel: 'telegram'"):
        async with started(nats_url, tmp_path, hooks_token=HOOKS_TOKEN, hooks_targets=targets):
            pass


@pytest.mark.parametrize(
    "raw",
    [
        '{"has space": {"channel": "slack", "to": "C1"}}',
        '{"x": {"channel": "slack"}}',
        '{"x": {"channel": "slack", "to": "C1", "extra": 1}}',
        '["slack"]',
    ],
)
def test_unusable_targets_are_refused_at_start(raw: str) -> None:
    with pytest.raises(ValidationError) as raised:
        GatewaySettings.from_environ({"SB_HOOKS_TARGETS": raw})
    assert "hooks_targets" in describe(raised.value).lower()


async def test_agent_without_a_name_gets_a_session_of_its_own(gw: Gateway) -> None:
    keys = []
    for _ in range(2):
        response = await post(gw, "/hooks/agent", {"message": "hello"})
        assert response.status_code == 202, response.text
        keys.append(response.json()["session_key"])
    assert all(k.startswith("hook:") and len(k) > len("hook:") for k in keys)
    assert keys[0] != keys[1]
    published = await gw.inbound()
    assert [m.session_key for _, _, m in published] == keys
    assert all(m.agent == "main" and not m.HasField("deliver_to") for _, _, m in published)


async def test_agent_takes_a_hook_session_key_and_refuses_an_invalid_one(gw: Gateway) -> None:
    ok = await post(gw, "/hooks/agent", {"message": "hi", "session_key": "hook:nightly"})
    assert ok.status_code == 202, ok.text
    bad = await post(gw, "/hooks/agent", {"message": "hi", "session_key": "has space"})
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["param"] == "session_key"
    assert [m.session_key for _, _, m in await gw.inbound()] == ["hook:nightly"]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[1, 2]",
        b'{"name": "x"}',  # no message
        b'{"message": ""}',
        b'{"message": "hi", "sessionKey": "hook:x"}',  # unknown field
        b'{"message": "hi", "name": "has space"}',
        b'{"message": "hi", "agent": "Not An Id"}',
        b'{"message": "hi", "deliver": {"channel": "fakechat"}}',  # no "to"
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the JSON parser goes
    ],
)
async def test_a_bad_body_is_400_and_nothing_is_published(gw: Gateway, content: bytes) -> None:
    response = await gw.client.post("/hooks/agent", content=content, headers=bearer())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert await gw.inbound() == []


async def test_too_long_a_message_is_400(nats_url: str, tmp_path: Path) -> None:
    limits = {"hooks_token": HOOKS_TOKEN, "hooks_max_message_chars": 100}
    async with started(nats_url, tmp_path, **limits) as gw:
        assert (await post(gw, "/hooks/agent", {"message": "x" * 100})).status_code == 202
        response = await post(gw, "/hooks/agent", {"message": "x" * 101})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "too_much_text"
        assert len(await gw.inbound()) == 1


@pytest.mark.parametrize("path", ["/hooks/wake", "/hooks/agent"])
async def test_only_the_hooks_token_is_accepted(gw: Gateway, path: str) -> None:
    body = {"text": "x", "message": "x"}
    for headers in [{}, bearer("x" * 40), bearer(gw.token), {"Authorization": HOOKS_TOKEN}]:
        response = await gw.client.post(path, json=body, headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        assert HOOKS_TOKEN not in response.text
    assert await gw.inbound() == []


async def test_the_hooks_token_opens_nothing_else(gw: Gateway) -> None:
    response = await gw.client.get("/api/sessions/hook:x/history", headers=bearer())
    assert response.status_code == 401, response.text


@pytest.mark.parametrize("query", ["token", "access_token", "TOKEN"])
async def test_a_token_in_the_query_string_is_refused(gw: Gateway, query: str) -> None:
    for headers in [{}, bearer()]:  # even alongside a good header: the URL leaked it
        response = await gw.client.post(
            f"/hooks/wake?{query}={HOOKS_TOKEN}", json={"text": "x"}, headers=headers
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "token_in_query"
        assert HOOKS_TOKEN not in response.text
    assert await gw.inbound() == []


async def test_a_retry_with_the_same_idempotency_key_is_published_once(gw: Gateway) -> None:
    answers = []
    for key in ["delivery-1", "delivery-1", "delivery-1", "delivery-2"]:
        response = await post(gw, "/hooks/agent", {"message": key}, **{"Idempotency-Key": key})
        assert response.status_code == 202, response.text
        answers.append(response.json())
    assert [a["duplicate"] for a in answers] == [False, True, True, False]
    assert answers[0]["message_id"] == answers[1]["message_id"] == "agent:delivery-1"
    published = await gw.inbound()
    assert [(msg_id, m.text) for msg_id, _, m in published] == [
        ("hooks:default:agent:delivery-1", "delivery-1"),
        ("hooks:default:agent:delivery-2", "delivery-2"),
    ]
    # The same key on the other endpoint is another message.
    wake = await post(gw, "/hooks/wake", {"text": "x"}, **{"Idempotency-Key": "delivery-1"})
    assert wake.json()["duplicate"] is False
    assert len(await gw.inbound()) == 3


async def test_an_unusable_idempotency_key_is_400(gw: Gateway) -> None:
    for key in ["has space", "x" * 201]:
        response = await post(gw, "/hooks/wake", {"text": "x"}, **{"Idempotency-Key": key})
        assert response.status_code == 400, response.text
    assert await gw.inbound() == []


async def test_without_hooks_configured_nothing_is_served(nats_url: str, tmp_path: Path) -> None:
    async with started(nats_url, tmp_path) as gw:
        for path in ["/hooks/wake", "/hooks/agent", "/hooks/github"]:
            for headers in [{}, gw.auth]:  # not 401: there is nothing there to authenticate to
                response = await gw.client.post(path, json={"text": "x"}, headers=headers)
                assert response.status_code == 404, response.text
        assert await gw.inbound() == []


@pytest.mark.parametrize("token", ["change-me", "short-Tok3n", "a" * 40])
def test_a_weak_hooks_token_is_refused_at_start(token: str) -> None:
    with pytest.raises(ValidationError) as raised:
        GatewaySettings.from_environ({"SB_HOOKS_TOKEN": token})
    assert "SB_HOOKS_TOKEN is too weak" in describe(raised.value)
    assert token not in describe(raised.value) and token not in str(raised.value)


def test_the_hooks_token_must_not_be_the_gateway_token() -> None:
    token = generate()
    with pytest.raises(ValidationError) as raised:
        GatewaySettings.from_environ({"SB_HOOKS_TOKEN": token, "SB_GATEWAY_TOKEN": token})
    assert "SB_HOOKS_TOKEN must differ from SB_GATEWAY_TOKEN" in describe(raised.value)
