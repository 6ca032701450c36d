"""The MCP endpoint when what it calls is not there, with the official `mcp` client on the app
in process: the agent's and the memory service's gRPC refused (nothing listens), and no run
answering a message in time. Each is a tool error (isError) with a fixed message written for
the caller, never gRPC's own text or an address."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from .gateway_harness import Gateway, absent_address, started


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    with absent_address() as memory_addr:
        async with started(nats_url, tmp_path, memory_addr=memory_addr) as gateway:
            yield gateway


def text_of(result: CallToolResult) -> str:
    assert result.is_error, result
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_unavailable_services_and_a_late_answer_are_readable_tool_errors(
    gw: Gateway,
) -> None:
    transport = httpx2.ASGITransport(app=gw.app)
    async with (
        httpx2.AsyncClient(transport=transport, base_url="http://gw", headers=gw.auth) as http,
        streamable_http_client("http://gw/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        agent_down = "The agent service is not available; try again shortly."
        listed = await mcp.call_tool("list_sessions", {})
        assert text_of(listed) == f"Error executing tool list_sessions: {agent_down}"
        history = await mcp.call_tool("session_history", {"session": "main:api:alice"})
        assert text_of(history) == f"Error executing tool session_history: {agent_down}"

        found = await mcp.call_tool("search_memory", {"query": "anything"})
        assert text_of(found) == (
            "Error executing tool search_memory: "
            "The memory service is unavailable; try again shortly."
        )

        # Nothing runs the agent here: the message is queued, the wait ends (0.5 s harness).
        sent = await mcp.call_tool("send_message", {"session": "desk", "text": "hello"})
        assert text_of(sent) == (
            "Error executing tool send_message: No answer within 0.5 s; the message is queued "
            "and its answer will be in the history of session main:mcp:desk."
        )
    [(_, _, message)] = await gw.inbound()
    assert (message.channel, message.session_key, message.text) == ("api", "main:mcp:desk", "hello")
    assert (message.sender, message.agent) == ("mcp", "main")
