"""Errors in OpenAI's shape: malformed JSON, validation errors naming the parameter, unknown
models and routes, and the agent's absence (503 without internal detail)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .gateway_harness import Gateway, started

AGENT_DOWN = "The agent service is not available; try again shortly."
CHAT = "/v1/chat/completions"


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


def error_of(response: httpx.Response, status: int, type_: str) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-shaped error response, checked."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["type"] == type_
    assert isinstance(error["message"], str) and error["message"]
    return error


JSON_ROUTES = [
    ("POST", CHAT),
    ("POST", "/api/sessions/main:api:alice/messages"),
    ("PATCH", "/api/sessions/main:api:alice"),
    ("POST", "/api/approvals/ap-1"),
    ("POST", "/tools/invoke"),
]


async def test_malformed_json_is_400(gw: Gateway) -> None:
    for method, path in JSON_ROUTES:
        for raw in (b'{"model": "switchboard",', b"not json", b"\xff\xfe"):
            response = await gw.client.request(
                method, path, content=raw, headers={**gw.auth, "Content-Type": "application/json"}
            )
            error = error_of(response, 400, "invalid_request_error")
            assert "JSON" in error["message"]
    assert await gw.inbound() == []


async def test_malformed_json_names_no_parameter(gw: Gateway) -> None:
    """OpenAI's ``param`` names a request parameter; a body that does not parse has none (the
    character position where parsing stopped is not one)."""
    wrong = []
    for method, path in JSON_ROUTES:
        response = await gw.client.request(
            method,
            path,
            content=b"not json",
            headers={**gw.auth, "Content-Type": "application/json"},
        )
        param = error_of(response, 400, "invalid_request_error")["param"]
        if param not in (None, "body"):
            wrong.append(f"{method} {path}: param={param!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("method", "path", "body", "param"),
    [
        ("POST", CHAT, {"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ("POST", CHAT, {"model": "switchboard", "messages": []}, "messages"),
        ("POST", CHAT, {"model": "switchboard"}, "messages"),
        ("POST", CHAT, {"model": "", "messages": [{"role": "user", "content": "x"}]}, "model"),
        (
            "POST",
            CHAT,
            {"model": "switchboard", "messages": [{"role": "robot", "content": "hi"}]},
            "messages.0.role",
        ),
        (
            "POST",
            CHAT,
            {"model": "switchboard", "messages": [{"role": "assistant", "content": "hi"}]},
            "messages",
        ),
        (
            "POST",
            CHAT,
            {"model": "switchboard", "messages": [{"role": "user", "content": "  "}]},
            "messages",
        ),
        ("POST", "/api/sessions/main:api:alice/messages", {"text": ""}, "text"),
        ("POST", "/api/sessions/main:api:alice/messages", {}, "text"),
        ("POST", "/api/sessions/main:api:alice/messages", {"text": "x", "agent": "Ops"}, "agent"),
        ("POST", "/api/sessions/main:api:bad%20key/messages", {"text": "x"}, "key"),
        ("PATCH", "/api/sessions/main:api:alice", {"queue_mode": "sometimes"}, "queue_mode"),
        ("PATCH", "/api/sessions/main:api:alice", {"queue_mode": None}, "queue_mode"),
        ("GET", "/api/sessions/main:api:alice/history?limit=-1", None, "limit"),
        ("GET", "/api/sessions/main:api:alice/history?limit=many", None, "limit"),
        ("GET", "/api/sessions/bad%09key/events", None, "key"),
        ("GET", "/api/approvals?status=pending", None, "status"),
        ("GET", "/api/approvals?limit=0", None, "limit"),
        ("GET", "/api/approvals?session_key=a%20b", None, "session_key"),
        ("POST", "/api/approvals/ap-1", {"decision": "maybe"}, "decision"),
        ("POST", "/tools/invoke", {"args": {}}, "tool"),
        ("POST", "/tools/invoke", {"tool": "exec", "sessionKey": "a b"}, "sessionKey"),
    ],
)
async def test_invalid_requests_are_400_naming_the_parameter(
    gw: Gateway, method: str, path: str, body: dict[str, Any] | None, param: str
) -> None:
    response = await gw.client.request(method, path, json=body, headers=gw.auth)
    error = error_of(response, 400, "invalid_request_error")
    assert error["param"] == param, error
    assert await gw.inbound() == []


async def test_a_patch_without_changes_is_400(gw: Gateway) -> None:
    response = await gw.client.patch("/api/sessions/main:api:alice", json={}, headers=gw.auth)
    assert "Nothing to change" in error_of(response, 400, "invalid_request_error")["message"]


@pytest.mark.parametrize("model", ["gpt-4o", "switchboard:Main", "switchboard:a.b", "Switchboard"])
async def test_an_unknown_model_is_404(gw: Gateway, model: str) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "user": "alice"}
    response = await gw.client.post(CHAT, json=body, headers=gw.auth)
    error = error_of(response, 404, "not_found_error")
    assert (error["code"], error["param"]) == ("model_not_found", "model")
    assert model in error["message"]
    assert await gw.inbound() == []


async def test_unknown_routes_and_methods_keep_the_shape(gw: Gateway) -> None:
    error_of(await gw.client.get("/v1/nothing", headers=gw.auth), 404, "not_found_error")
    error_of(await gw.client.delete("/v1/models", headers=gw.auth), 405, "api_error")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/sessions/main:api:alice/history", None),
        ("PATCH", "/api/sessions/main:api:alice", {"queue_mode": "steer"}),
        ("GET", "/api/approvals", None),
        ("POST", "/api/approvals/ap-1", {"decision": "approve"}),
        ("POST", "/tools/invoke", {"tool": "get_time", "args": {}}),
    ],
)
async def test_routes_needing_the_agent_are_503_without_internal_detail(
    gw: Gateway, method: str, path: str, body: dict[str, Any] | None
) -> None:
    response = await gw.client.request(method, path, json=body, headers=gw.auth)
    error = error_of(response, 503, "service_unavailable")
    assert error["message"] == AGENT_DOWN
    assert error["code"] is None and error["param"] is None
    host, _, port = gw.settings.agent_addr.rpartition(":")
    for detail in (port, host, "grpc", "StatusCode", "UNAVAILABLE", "refused", "Traceback"):
        assert detail not in response.text, detail
