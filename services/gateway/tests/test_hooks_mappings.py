"""POST /hooks/<mapping> (SB_HOOKS_MAPPINGS) through the in-process gateway: templates rendered
from the payload and headers (nested fields, list items, missing fields empty, bounded), each
mapping's own token or signature against the global token, idempotency from a configured id,
and the configuration checked at start."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from switchboard.errors import ConfigError
from switchboard.settings import describe
from switchboard.tokens import generate
from switchboard_gateway.config import GatewaySettings

from .gateway_harness import Gateway, started

HOOKS_TOKEN = generate()
ALERTS_TOKEN = generate()
GITHUB_SECRET = generate()
MAPPINGS: dict[str, Any] = {
    "alerts": {
        "action": "agent",
        "token": ALERTS_TOKEN,
        "agent": "ops",
        "message": "Alert {{payload.alert.name}} on {{payload.alert.labels.host}}: "
        "{{payload.alert.missing.field}}| first value {{payload.values.0}}, "
        "all {{payload.values}}, via {{headers.user-agent}}",
        "session_key": "{{payload.alert.name}}",
        "deliver": {"channel": "fakechat", "to": "ops-room", "chat_type": "group"},
    },
    "github": {
        "action": "agent",
        "signature": {"secret": GITHUB_SECRET},
        "message": "{{headers.x-github-event}} to {{payload.repository.full_name}} "
        "by {{payload.pusher.name}}",
        "id": "{{headers.x-github-delivery}}",
    },
    "mail": {"action": "wake", "message": "Mail from {{payload.from}}"},  # the global token
    "dump": {"action": "agent", "token": generate(), "message": "{{payload}}"},
}


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    settings = {
        "hooks_token": HOOKS_TOKEN,
        "hooks_mappings": json.dumps(MAPPINGS),
        "hooks_max_message_chars": 500,
    }
    async with started(nats_url, tmp_path, **settings) as gateway:
        yield gateway


def only(
    mappings: dict[str, Any], nats_url: str, home: Path
) -> AbstractAsyncContextManager[Gateway]:
    """A gateway with just these mappings (and the global token)."""
    settings = {"hooks_token": HOOKS_TOKEN, "hooks_mappings": json.dumps(mappings)}
    return started(nats_url, home, **settings)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def github_call(payload: object, delivery: str) -> tuple[bytes, dict[str, str]]:
    """A push as GitHub sends it: X-Hub-Signature-256 over the raw body, no bearer token."""
    body = json.dumps(payload).encode()
    digest = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {
        "content-type": "application/json",
        "x-github-event": "push",
        "x-github-delivery": delivery,
        "x-hub-signature-256": f"sha256={digest}",
        "user-agent": "GitHub-Hookshot/abc",
    }


ALERT = {"alert": {"name": "disk-full", "labels": {"host": "db-1"}}, "values": [91, {"a": 1}]}


async def test_a_mapping_renders_nested_fields_and_leaves_missing_ones_empty(gw: Gateway) -> None:
    response = await gw.client.post(
        "/hooks/alerts", json=ALERT, headers={**bearer(ALERTS_TOKEN), "user-agent": "prom/2"}
    )
    assert response.status_code == 202, response.text
    assert response.json()["session_key"] == "hook:disk-full"
    [(_, subject, message)] = await gw.inbound()
    assert subject == "sb.inbound.hooks"
    assert message.text == (
        'Alert disk-full on db-1: | first value 91, all [91,{"a":1}], via prom/2'
    )
    assert (message.session_key, message.agent, message.sender) == (
        "hook:disk-full",
        "ops",
        "hook:alerts",
    )
    target = message.deliver_to
    assert (target.channel, target.chat.id, target.chat.type) == ("fakechat", "ops-room", "group")


async def test_a_rendered_session_key_stays_under_hook(gw: Gateway) -> None:
    """A payload naming a person's chat session cannot steer the run into it."""
    payload = {"alert": {"name": "main:fakechat:u1"}}
    response = await gw.client.post("/hooks/alerts", json=payload, headers=bearer(ALERTS_TOKEN))
    assert response.status_code == 202, response.text
    [(_, _, message)] = await gw.inbound()
    assert message.session_key == "hook:main:fakechat:u1"
    spaced = {"alert": {"name": "two words"}}
    refused = await gw.client.post("/hooks/alerts", json=spaced, headers=bearer(ALERTS_TOKEN))
    assert refused.status_code == 400, refused.text
    assert len(await gw.inbound()) == 1


async def test_a_mapping_with_its_own_token_takes_only_that_token(gw: Gateway) -> None:
    for token in [HOOKS_TOKEN, gw.token, MAPPINGS["dump"]["token"]]:
        response = await gw.client.post("/hooks/alerts", json=ALERT, headers=bearer(token))
        assert response.status_code == 401, response.text
    assert await gw.inbound() == []


async def test_a_mapping_without_a_token_takes_the_global_one(gw: Gateway) -> None:
    refused = await gw.client.post(
        "/hooks/mail", json={"from": "ann@example.org"}, headers=bearer(ALERTS_TOKEN)
    )
    assert refused.status_code == 401, refused.text
    response = await gw.client.post(
        "/hooks/mail", json={"from": "ann@example.org"}, headers=bearer(HOOKS_TOKEN)
    )
    assert response.status_code == 202, response.text
    [(_, _, message)] = await gw.inbound()  # a wake: the main session, marked as an event
    assert (message.session_key, message.agent) == ("main:hooks:main", "main")
    assert message.text == "[System event from webhook 'mail']\nMail from ann@example.org"


async def test_a_signed_mapping_takes_githubs_signature(gw: Gateway) -> None:
    push = {"repository": {"full_name": "acme/site"}, "pusher": {"name": "ann"}}
    body, headers = github_call(push, "d-1")
    tampered = body.replace(b"ann", b"eve")
    for content, sent in [
        (body, {k: v for k, v in headers.items() if k != "x-hub-signature-256"}),
        (tampered, headers),
        (body, {**headers, "x-hub-signature-256": "sha256=" + "0" * 64}),
    ]:
        response = await gw.client.post("/hooks/github", content=content, headers=sent)
        assert response.status_code == 401, response.text
    assert await gw.inbound() == []
    response = await gw.client.post("/hooks/github", content=body, headers=headers)
    assert response.status_code == 202, response.text
    [(msg_id, _, message)] = await gw.inbound()
    assert message.text == "push to acme/site by ann"
    assert (message.session_key, msg_id) == ("hook:github", "hooks:default:github:d-1")


async def test_a_redelivery_with_the_same_configured_id_is_published_once(gw: Gateway) -> None:
    push = {"repository": {"full_name": "acme/site"}, "pusher": {"name": "ann"}}
    for delivery in ["d-7", "d-7", "d-8"]:
        body, headers = github_call(push, delivery)
        response = await gw.client.post("/hooks/github", content=body, headers=headers)
        assert response.status_code == 202, response.text
    assert [msg_id for msg_id, _, _ in await gw.inbound()] == [
        "hooks:default:github:d-7",
        "hooks:default:github:d-8",
    ]


async def test_a_rendered_message_is_bounded(gw: Gateway) -> None:
    headers = bearer(MAPPINGS["dump"]["token"])
    response = await gw.client.post("/hooks/dump", json={"blob": "x" * 5000}, headers=headers)
    assert response.status_code == 202, response.text
    [(_, _, message)] = await gw.inbound()
    assert len(message.text) == 500 and message.text.endswith("…[truncated]")
    assert message.text.startswith('{"blob":"xxx')


async def test_templates_do_not_read_credentials(nats_url: str, tmp_path: Path) -> None:
    """{{headers.authorization}} renders empty: the token would reach the transcript."""
    raw = {"action": "agent", "message": "auth=[{{headers.authorization}}] {{payload.x}}"}
    async with only({"peek": raw}, nats_url, tmp_path) as gw:
        response = await gw.client.post("/hooks/peek", json={"x": 1}, headers=bearer(HOOKS_TOKEN))
        assert response.status_code == 202, response.text
        [(_, _, message)] = await gw.inbound()
    assert message.text == "auth=[] 1"


async def test_an_unknown_mapping_is_404(gw: Gateway) -> None:
    response = await gw.client.post("/hooks/nope", json={}, headers=bearer(HOOKS_TOKEN))
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "unknown_hook"


async def test_a_body_that_is_not_json_is_400(gw: Gateway) -> None:
    response = await gw.client.post("/hooks/mail", content=b"from=ann", headers=bearer(HOOKS_TOKEN))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert await gw.inbound() == []


async def test_a_payload_that_renders_an_empty_message_is_400(
    nats_url: str, tmp_path: Path
) -> None:
    raw = {"action": "agent", "message": "{{payload.text}}"}
    async with only({"empty": raw}, nats_url, tmp_path) as gw:
        response = await gw.client.post(
            "/hooks/empty", json={"other": 1}, headers=bearer(HOOKS_TOKEN)
        )
        assert response.status_code == 400, response.text
        assert "empty message" in response.json()["error"]["message"]
        assert await gw.inbound() == []


async def test_a_mapping_delivering_to_an_unserved_channel_stops_the_start(
    nats_url: str, tmp_path: Path
) -> None:
    raw = {"action": "agent", "message": "x", "deliver": {"channel": "telegram", "to": "1"}}
    with pytest.raises(ConfigError, match=r"SB_HOOKS_MAPPINGS\['tg'\]\.deliver\.channel"):
        async with only({"tg": raw}, nats_url, tmp_path):
            pass


def refused(mappings: object, **env: str) -> str:
    raw = mappings if isinstance(mappings, str) else json.dumps(mappings)
    with pytest.raises(ValidationError) as raised:
        GatewaySettings.from_environ({"SB_HOOKS_MAPPINGS": raw, **env})
    return describe(raised.value)


def test_unusable_mappings_are_refused_at_start_with_what_to_change() -> None:
    strong = generate()
    ok = {"action": "agent", "message": "m", "token": strong}
    cases: list[tuple[object, str]] = [
        ('{"a": ', "SB_HOOKS_MAPPINGS is not valid JSON (line 1"),
        ("[]", "SB_HOOKS_MAPPINGS must be a JSON object"),
        ({"a": {**ok, "action": "run"}}, "SB_HOOKS_MAPPINGS['a'].action: Input should be"),
        ({"a": {**ok, "extra": 1}}, "SB_HOOKS_MAPPINGS['a'].extra: Extra inputs"),
        ({"A b": ok}, "SB_HOOKS_MAPPINGS['A b']: a mapping name is 1-64"),
        ({"wake": ok}, "'wake' is a built-in endpoint"),
        ({"a": {**ok, "message": "{{payload.__class__}} {{os.system}}"}}, "not a field ref"),
        ({"a": {**ok, "message": "{{headers}}"}}, "not a field reference"),
        ({"a": {**ok, "action": "wake", "session_key": "x"}}, "are for action 'agent'"),
        ({"a": {"action": "agent", "message": "m"}}, "has no token or signature"),
        ({"a": {**ok, "signature": {"secret": generate()}}}, "a token or a signature, not both"),
    ]
    for mappings, why in cases:
        assert why in refused(mappings), (mappings, refused(mappings))


@pytest.mark.parametrize("weak", ["change-me", "s3cr3t-but-short"])
def test_weak_mapping_secrets_are_refused_without_echoing_them(weak: str) -> None:
    for raw, where in [
        ({"a": {"action": "agent", "message": "m", "token": weak}}, "['a'].token is too weak"),
        (
            {"a": {"action": "agent", "message": "m", "signature": {"secret": weak}}},
            "['a'].signature.secret is too weak",
        ),
    ]:
        described = refused(raw)
        assert where in described and weak not in described, described
    assert weak not in refused('{"a": {"token": "' + weak + '", ')  # broken JSON: no echo


def test_a_mapping_token_equal_to_the_gateway_token_is_refused() -> None:
    token = generate()
    raw = {"a": {"action": "agent", "message": "m", "token": token}}
    assert "must not be the gateway token" in refused(raw, SB_GATEWAY_TOKEN=token)
