"""Bearer-token authentication: every route of the app but the public ones and the channel
webhooks (authenticated by their platform's signature) refuses a caller without the token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from switchboard_gateway.ui import login as ui_login
from switchboard_gateway.ui import page as ui_page
from switchboard_gateway.web import assets as web_assets

from .gateway_harness import Gateway, started

PUBLIC = {"/", "/healthz", "/readyz"}
# --- webchat: its page is public (no data); its WebSocket authenticates itself with its first
# frame (the middleware sees HTTP only), tested in test_webchat.py. ---
PUBLIC |= {"/webchat", "/webchat/view.js", "/webchat/webchat.js", "/webchat/webchat.css"}
PUBLIC |= {"/webchat/prefs.js", "/webchat/sidebar.js", "/webchat/socket.js", "/webchat/voice.js"}
# --- a2a: the agent card is public (it names the bearer scheme); POST /a2a needs the token. ---
PUBLIC |= {"/.well-known/agent-card.json"}
SELF_AUTHENTICATED_SOCKETS = {"/webchat/ws"}
# --- the Control UI: its pages are public (no data); its login routes check the gateway token
# or the UI cookie themselves (tested in test_ui_login.py). ---
PUBLIC |= ui_page.PUBLIC_PATHS
SELF_AUTHENTICATED_HTTP = ui_login.PATHS
# --- the pages' browser libraries and shared modules (web/): public, no data. ---
PUBLIC |= web_assets.PUBLIC_PATHS
WEBHOOK = "/channels/{channel}/{account}"
PARAMS = {"key": "main:api:alice", "approval_id": "ap-1", "channel": "fakechat"}

# Headers that must not pass ("TOKEN" stands for the real token) and the error codes allowed.
MISSING: set[str | None] = {None}
INVALID: set[str | None] = {"invalid_api_key"}
REFUSED: list[tuple[dict[str, str], set[str | None]]] = [
    ({}, MISSING),
    ({"Authorization": "Bearer"}, MISSING),
    ({"Authorization": "Bearer    "}, MISSING | INVALID),
    ({"Authorization": "Bearer wrong-token"}, INVALID),
    ({"Authorization": "Bearer TOKEN-and-more"}, INVALID),
    ({"Authorization": "Token TOKEN"}, MISSING),
    ({"Authorization": "Basic TOKEN"}, MISSING),
    ({"X-Api-Key": "TOKEN"}, MISSING),
]


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


def routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path template) of every HTTP route the app serves, included routers
    flattened (FastAPI keeps them nested in ``app.routes``). A route without methods (a mount,
    a websocket) fails: its paths could not be checked."""
    out: list[tuple[str, str]] = []
    for route in iter_route_contexts(app.routes):
        if route.path in SELF_AUTHENTICATED_SOCKETS and not route.methods:  # webchat
            continue
        assert route.path and route.methods, f"cannot enumerate {route!r}"
        out.extend((m, route.path) for m in sorted(route.methods) if m != "HEAD")
    return out


def protected(app: FastAPI) -> list[tuple[str, str]]:
    return [
        (m, p)
        for m, p in routes(app)
        if p not in PUBLIC and p not in SELF_AUTHENTICATED_HTTP and p != WEBHOOK
    ]


def url(template: str, key: str = PARAMS["key"]) -> str:
    values = {**PARAMS, "key": key}
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values.get(m.group(1), "x"), template)


def json_body(method: str) -> dict[str, Any] | None:
    return {} if method in ("POST", "PUT", "PATCH") else None


def assert_unauthorized(response: httpx.Response, codes: set[str | None]) -> None:
    assert response.status_code == 401, response.text
    assert response.headers.get("www-authenticate") == "Bearer"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "authentication_error"
    assert error["code"] in codes
    assert error["param"] is None
    assert isinstance(error["message"], str) and error["message"]


def test_the_route_list_is_derived_from_the_app(gw: Gateway) -> None:
    """The derivation sees the routes (so the test below cannot pass by seeing none), and
    every route it exempts exists."""
    assert {p for _, p in routes(gw.app)} >= PUBLIC | {WEBHOOK}
    assert {
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
        ("POST", "/api/sessions/{key}/messages"),
        ("PATCH", "/api/sessions/{key}"),
        ("GET", "/api/sessions/{key}/history"),
        ("GET", "/api/sessions/{key}/events"),
        ("POST", "/api/sessions/{key}/reset"),
        ("DELETE", "/api/sessions/{key}"),
        ("POST", "/api/sessions/{key}/abort"),
        ("POST", "/api/sessions/{key}/compact"),
        ("GET", "/api/approvals"),
        ("POST", "/api/approvals/{approval_id}"),
        ("POST", "/tools/invoke"),
        ("GET", "/api/usage"),
    } <= set(protected(gw.app))


async def test_every_route_but_the_public_ones_needs_the_token(gw: Gateway) -> None:
    """Each route, with each bad header, answers 401 in OpenAI's shape; the failure lists
    every route that did not (a new route without ``require_token`` shows up here)."""
    wrong: list[str] = []
    for method, template in protected(gw.app):
        for refused, codes in REFUSED:
            headers = {k: v.replace("TOKEN", gw.token) for k, v in refused.items()}
            response = await gw.client.request(
                method, url(template), json=json_body(method), headers=headers
            )
            try:
                assert_unauthorized(response, codes)
            except AssertionError:
                wrong.append(f"{method} {template} with {refused}: {response.status_code}")
                break
    assert not wrong, "\n".join(wrong)
    assert await gw.inbound() == []  # nothing was accepted


async def test_the_same_requests_with_the_token_are_not_refused(gw: Gateway) -> None:
    """The 401s above come from the token: with it, no route answers 401 (the invalid session
    key makes every route stop before any work, including the events stream)."""
    for method, template in protected(gw.app):
        response = await gw.client.request(
            method, url(template, key="main:api:bad key"), json=json_body(method), headers=gw.auth
        )
        assert response.status_code != 401, (method, template, response.text)
    assert await gw.inbound() == []


async def test_auth_comes_before_the_body_is_parsed(gw: Gateway) -> None:
    """An unauthenticated caller learns nothing about its request: a malformed body still
    gets 401, not a parse error."""
    wrong: list[str] = []
    for method, template in protected(gw.app):
        if json_body(method) is None:
            continue
        response = await gw.client.request(
            method,
            url(template),
            content=b'{"not json',
            headers={"Content-Type": "application/json"},
        )
        if response.status_code != 401:
            wrong.append(f"{method} {template}: {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)
    assert await gw.inbound() == []


async def test_public_routes_answer_without_a_token(gw: Gateway) -> None:
    for path in sorted(PUBLIC):
        response = await gw.client.get(path)
        assert response.status_code in (200, 503), (path, response.status_code)
    assert (await gw.client.get("/healthz")).json() == {"status": "ok"}


async def test_metrics_and_the_schema_need_the_token(gw: Gateway) -> None:
    """/metrics (route names, volumes) and /openapi.json (every route and parameter) answer
    only with the token; the interactive docs pages are not served at all."""
    for path in ("/metrics", "/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"):
        for refused, codes in REFUSED:
            headers = {k: v.replace("TOKEN", gw.token) for k, v in refused.items()}
            assert_unauthorized(await gw.client.get(path, headers=headers), codes)
    metrics = await gw.client.get("/metrics", headers=gw.auth)
    assert metrics.status_code == 200
    assert "sb_gateway_requests_total" in metrics.text
    schema = await gw.client.get("/openapi.json", headers=gw.auth)
    assert schema.status_code == 200
    assert "/v1/chat/completions" in schema.json()["paths"]
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert (await gw.client.get(path, headers=gw.auth)).status_code == 404, path


async def test_the_webhook_is_authenticated_by_its_platform_not_the_token(gw: Gateway) -> None:
    """The gateway token does not stand in for the platform's signature."""
    body = b'{"updates": [{"id": 1, "from": "u1", "chat": "u1", "text": "hi"}]}'
    for headers in ({}, gw.auth, {**gw.auth, "X-Fake-Signature": "sha256=00"}):
        response = await gw.client.post("/channels/fakechat/acct", content=body, headers=headers)
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "channel_refused"
    assert gw.fake.parsed == []
    assert await gw.inbound() == []
