"""a2a_delegate against real peers: a2a-sdk's own server (tests/fakes/a2a_peer.py) answers, the
token reaches it and a context continues; a peer that answers garbage, one that is down, one that
hangs and a card that points elsewhere each give a readable tool error (no exception)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.a2a_settings import A2ASettings
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.tools.a2a_delegate import A2ADelegateTool
from tests.fakes.a2a_peer import EchoPeer
from tests.fakes.web import Reply, Seen, WebServer

CARD = "/.well-known/agent-card.json"


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoPeer]:
    with EchoPeer() as peer:
        yield peer


@pytest.fixture(scope="module")
def junk() -> Iterator[WebServer]:
    site = WebServer().start()

    def card(rpc: str) -> Reply:
        body = {
            "name": "junk",
            "description": "answers garbage",
            "version": "1",
            "supportedInterfaces": [
                {"url": rpc, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
        }
        return Reply(body=json.dumps(body), content_type="application/json")

    def hang(_: Seen) -> Reply:
        time.sleep(3)
        return Reply(body="late")

    site.route("/garbage-card" + CARD, Reply(body="<html>not a card</html>"))
    site.route("/garbage-rpc" + CARD, card(site.url("/garbage-rpc/rpc")))
    site.route("/garbage-rpc/rpc", Reply(body="{]not json", content_type="application/json"))
    site.route("/wrong-rpc" + CARD, card(site.url("/wrong-rpc/rpc")))
    site.route(
        "/wrong-rpc/rpc",
        Reply(
            body=json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": 7}}}),
            content_type="application/json",
        ),
    )
    site.route("/hang" + CARD, card(site.url("/hang/rpc")))
    site.route("/hang/rpc", hang)
    site.route("/elsewhere" + CARD, card("http://10.1.2.3/rpc"))
    site.route("/huge-card" + CARD, Reply(body="x" * 5000, content_type="application/json"))
    site.route("/huge-rpc" + CARD, card(site.url("/huge-rpc/rpc")))
    site.route(
        "/huge-rpc/rpc", Reply(body="[" + "1," * 3000 + "1]", content_type="application/json")
    )
    yield site
    site._server.shutdown()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def delegate(echo: EchoPeer, junk: WebServer, tmp_path: Path) -> Any:
    agents = {
        "echo": {"url": echo.url, "token": "peer-secret-123", "description": "echoes"},
        "garbage_card": {"url": junk.url("/garbage-card")},
        "garbage_rpc": {"url": junk.url("/garbage-rpc")},
        "wrong_rpc": {"url": junk.url("/wrong-rpc")},
        "hang": {"url": junk.url("/hang")},
        "elsewhere": {"url": junk.url("/elsewhere")},
        "elsewhere_token": {"url": junk.url("/elsewhere"), "token": "t"},
        "down": {"url": f"http://127.0.0.1:{closed_port()}"},
        "huge_card": {"url": junk.url("/huge-card")},
        "huge_rpc": {"url": junk.url("/huge-rpc")},
    }
    settings = A2ASettings(
        a2a_agents=agents,  # type: ignore[arg-type]
        a2a_timeout_s=1.0,
        a2a_max_response_bytes=4096,
    )
    registry = ToolRegistry([A2ADelegateTool(settings)])
    ctx = ToolContext("main", "main:test:1", "call-1", tmp_path, timeout_s=30.0)

    async def call(**args: Any) -> ToolOutput:
        return await registry.execute("a2a_delegate", json.dumps(args), ctx)

    return call


async def test_the_peer_answers_with_the_token_and_a_context_continues(
    delegate: Any, echo: EchoPeer
) -> None:
    first = await delegate(agent="echo", message="hello there")
    assert not first.is_error, first.content
    assert "echo: hello there" in first.content
    context_id = first.details["context_id"]
    assert context_id and context_id in first.content
    second = await delegate(agent="echo", message="again", context_id=context_id)
    assert "echo: again" in second.content
    assert [(r.text, r.authorization) for r in echo.received[-2:]] == [
        ("hello there", "Bearer peer-secret-123"),
        ("again", "Bearer peer-secret-123"),
    ]
    assert echo.received[-1].context_id == context_id


def test_the_spec_names_the_agents() -> None:
    settings = A2ASettings(a2a_agents={"b": {"url": "http://b"}, "a": {"url": "http://a"}})  # type: ignore[dict-item]
    spec = A2ADelegateTool(settings).spec()
    assert spec.parameters["properties"]["agent"]["enum"] == ["a", "b"]


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ("nobody", "unknown A2A agent 'nobody'; configured agents: down, echo, elsewhere"),
        ("garbage_card", "agent 'garbage_card': its agent card could not be read (not a valid"),
        ("garbage_rpc", "'garbage_rpc' answered something that is not valid A2A: JSON Decode"),
        ("wrong_rpc", "agent 'wrong_rpc' answered something that is not valid A2A"),
        ("hang", "agent 'hang' did not answer within 1s"),
        ("down", "agent 'down': could not be reached (no connection to its host)"),
        ("elsewhere", "the agent's card endpoint is refused: 10.1.2.3 is a private address"),
        ("elsewhere_token", "refused: the agent's card sends requests to 10.1.2.3"),
        ("huge_card", "agent 'huge_card' answered more than 4096 bytes"),
        ("huge_rpc", "agent 'huge_rpc' answered more than 4096 bytes"),
    ],
)
async def test_bad_peers_give_readable_errors(delegate: Any, agent: str, expected: str) -> None:
    out = await delegate(agent=agent, message="hi")
    assert out.is_error
    assert expected in out.content, out.content
    assert "Traceback" not in out.content and "peer-secret" not in out.content
