"""The gateway's MCP endpoint (/mcp) with the official `mcp` client (streamable HTTP +
ClientSession) against the real services and a scripted fake model: the tools are listed, a
message sent with send_message is answered by the model and its session then shows in
list_sessions and session_history, search_memory finds a document ingested through
/api/memory, bad calls are readable tool errors after which the session still works, and no
token is a 401. One system for the module."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.fakes.llm import FakeRequest, Reply
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

NOTE = "The spare key to the shed hangs behind the blue watering can."


def script(req: FakeRequest) -> Reply:
    return Reply(text="echo: " + req.last_user_text)


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    home = tmp_path_factory.mktemp("mcp")
    with with_fake_model(home, module_nats_url, module_database_url, script, {}) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


@asynccontextmanager
async def mcp_session(services: ServiceProcesses) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {services.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"{services.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def data_of(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    data: dict[str, Any] = json.loads(text_of(result))
    return data


async def test_tools_are_listed_and_a_message_is_answered_and_recorded(
    services: ServiceProcesses,
) -> None:
    async with mcp_session(services) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(tools) == {"send_message", "list_sessions", "session_history", "search_memory"}
        assert tools["send_message"].input_schema["required"] == ["session", "text"]

        answer = await mcp.call_tool("send_message", {"session": "desk", "text": "hello there"})
        assert not answer.is_error, text_of(answer)
        assert text_of(answer) == "echo: hello there"
        # The fake model was asked; the answer did not come from anywhere else.
        assert [c.request.last_user_text for c in services.llm.calls] == ["hello there"]  # type: ignore[attr-defined]

        # The usage row is written off the answer's path (usage_writer.py): wait for it.
        deadline = time.monotonic() + 10
        while True:
            listed = data_of(await mcp.call_tool("list_sessions", {}))
            keys = {s["session_key"]: s for s in listed["sessions"]}
            if keys["main:mcp:desk"]["usage"]["calls"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert keys["main:mcp:desk"]["message_count"] == 2
        assert keys["main:mcp:desk"]["agent"] == "main"
        assert keys["main:mcp:desk"]["usage"]["calls"] == 1  # the one model call above

        # By name or by key: the same transcript.
        for session in ("desk", "main:mcp:desk"):
            history = data_of(await mcp.call_tool("session_history", {"session": session}))
            assert history["session_key"] == "main:mcp:desk"
            assert [(m["role"], m["text"]) for m in history["messages"]] == [
                ("user", "hello there"),
                ("assistant", "echo: hello there"),
            ]


async def test_search_memory_finds_an_ingested_document(services: ServiceProcesses) -> None:
    async with httpx.AsyncClient(
        base_url=services.url, headers={"Authorization": f"Bearer {services.token}"}, timeout=120
    ) as http:
        stored = await http.post(
            "/api/memory/documents", params={"path": "notes/shed.md"}, content=NOTE.encode()
        )
        assert stored.status_code == 200, stored.text
    async with mcp_session(services) as mcp:
        found = data_of(
            await mcp.call_tool("search_memory", {"query": "where is the shed key", "k": 3})
        )
        assert found["hits"], found
        assert found["hits"][0]["path"] == "notes/shed.md"
        assert "blue watering can" in found["hits"][0]["text"]

        # Another agent's memory is another scope: the memory service's NOT_FOUND, readable.
        other = await mcp.call_tool("search_memory", {"query": "shed key", "agent": "nobody"})
        assert other.is_error
        assert text_of(other) == (
            "Error executing tool search_memory: "
            "no memory collection for agent 'nobody' (nothing stored yet)"
        )


async def test_bad_calls_are_readable_tool_errors_and_the_session_keeps_working(
    services: ServiceProcesses,
) -> None:
    async with mcp_session(services) as mcp:
        unknown = await mcp.call_tool("launch_rockets", {"count": 3})
        assert unknown.is_error and "Unknown tool: launch_rockets" in text_of(unknown)

        missing = await mcp.call_tool("send_message", {"session": "desk"})
        assert missing.is_error
        assert text_of(missing) == "Invalid arguments for send_message: text: Field required"

        wrong = await mcp.call_tool("session_history", {"session": "desk", "limit": "lots"})
        assert wrong.is_error
        assert text_of(wrong) == (
            "Invalid arguments for session_history: limit: Input should be a valid integer, "
            "unable to parse string as an integer"
        )
        bad_agent = await mcp.call_tool("list_sessions", {"agent": "Not An Agent!"})
        assert bad_agent.is_error
        assert text_of(bad_agent).startswith(
            "Invalid arguments for list_sessions: agent: String should match pattern"
        )
        assert "Not An Agent!" not in text_of(bad_agent)  # the rejected value is not echoed

        bad_name = await mcp.call_tool("send_message", {"session": "two words", "text": "x"})
        assert bad_name.is_error
        assert text_of(bad_name).endswith(
            "A session name must be 1-128 characters of letters, digits and _ . @ + - "
            "(or give a session key from list_sessions)."
        )
        # None of that reached the model; the session still answers.
        assert services.llm.calls == []  # type: ignore[attr-defined]
        answer = await mcp.call_tool("send_message", {"session": "desk", "text": "still there?"})
        assert text_of(answer) == "echo: still there?"


def test_no_token_is_401(services: ServiceProcesses) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong-token"}):
        r = httpx.post(f"{services.url}/mcp", json=init, headers={**headers, **auth}, timeout=10)
        assert r.status_code == 401, r.text
        assert r.headers["WWW-Authenticate"] == "Bearer"
    auth_ok = {**headers, "Authorization": f"Bearer {services.token}"}
    ok = httpx.post(f"{services.url}/mcp", json=init, headers=auth_ok, timeout=10)
    assert ok.status_code == 200, ok.text
    # Stateless: no stream for server-initiated messages, no session to end (spec: 405).
    for method in ("GET", "DELETE"):
        r = httpx.request(method, f"{services.url}/mcp", headers=auth_ok, timeout=10)
        assert r.status_code == 405, (method, r.text)
