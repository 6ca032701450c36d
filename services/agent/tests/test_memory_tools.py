"""The memory tools when memory is not there: a readable tool error, never an exception in the
run (the service answers are tested end to end in tests/e2e/test_memory.py)."""

from __future__ import annotations

from switchboard import rpc
from switchboard.embedded import free_port
from switchboard.v1 import messages_pb2
from switchboard_agent.memory.client import MemoryClient
from switchboard_agent.memory.tools import UNAVAILABLE, memory_tools
from switchboard_agent.tools.client import CallRequest
from switchboard_agent.tools.local import LocalContext, LocalTools


async def test_memory_down_is_a_tool_error_the_model_can_read() -> None:
    channel = rpc.channel(f"127.0.0.1:{free_port()}", "t" * 32)  # nothing listens there
    try:
        tools = LocalTools(memory_tools(MemoryClient(channel), "agent"))
        ctx = LocalContext("run_1", "main:api:me", "main", messages_pb2.LaneItem())
        calls = [
            CallRequest("c1", "memory_search", {"query": "anything"}),
            CallRequest("c2", "memory_store", {"text": "a fact"}),
            CallRequest("c3", "memory_get", {"path": "MEMORY.md"}),
        ]
        results = await tools.run_all(ctx, calls)
        for result in results:
            assert result.is_error and result.content == UNAVAILABLE, result
            assert result.details == {"error": "memory_unavailable"}
    finally:
        await channel.close()


async def test_bad_arguments_never_reach_the_service() -> None:
    channel = rpc.channel(f"127.0.0.1:{free_port()}", "t" * 32)
    try:
        tools = LocalTools(memory_tools(MemoryClient(channel), "agent"))
        ctx = LocalContext("run_1", "main:api:me", "main", messages_pb2.LaneItem())
        calls = [
            CallRequest("c1", "memory_search", {"query": ""}),
            CallRequest("c2", "memory_search", {"query": "x", "k": 500}),
            CallRequest("c3", "memory_store", {"text": "x", "extra": 1}),
            CallRequest("c4", "memory_store", {"text": "x" * 5000}),
        ]
        for result in await tools.run_all(ctx, calls):
            assert result.is_error and result.details == {"error": "invalid_arguments"}, result
    finally:
        await channel.close()
