"""A memory service in-process against real nats-server, PostgreSQL and Qdrant local mode:
``async with memory_service(nats_url, database_url, home, **env) as m`` runs ``serve`` with
those settings (gRPC ``Memory`` on a free port, ``m.stub``), ready.

(Not a conftest.py: see services/gateway/tests/gateway_harness.py.)
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import nats

from switchboard import bus, rpc
from switchboard.embedded import free_port
from switchboard.runtime import service_ready
from switchboard.v1 import memory_pb2, memory_pb2_grpc
from switchboard_memory.config import MemorySettings
from switchboard_memory.server import serve

SUBJECTS = bus.Subjects()


@dataclass
class RunningMemory:
    stub: memory_pb2_grpc.MemoryStub
    target: str
    token: str


@asynccontextmanager
async def memory_service(
    nats_url: str, database_url: str, home: Path, **environ: str
) -> AsyncIterator[RunningMemory]:
    port = free_port()
    token = "memory-test-" + os.urandom(12).hex()
    env = {
        "SB_NATS_URL": nats_url,
        "SB_DATABASE_URL": database_url,
        "SB_HOME": str(home),
        "SB_OPS_HOST": "127.0.0.1",
        "SB_SERVICE_TOKEN": token,
        "SB_MEMORY_GRPC_PORT": str(port),
        **environ,
    }
    settings = MemorySettings.from_environ(env)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    nc = await nats.connect(nats_url)
    channel: grpc.aio.Channel = rpc.channel(f"127.0.0.1:{port}", token)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert not task.done(), task
            try:
                if await service_ready(nc, SUBJECTS, "memory", timeout=1):
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline, "memory service not ready"
            await asyncio.sleep(0.05)
        yield RunningMemory(memory_pb2_grpc.MemoryStub(channel), f"127.0.0.1:{port}", token)
    finally:
        await channel.close()
        await nc.close()
        stop.set()
        await asyncio.wait_for(task, 30)


def scope(agent: str = "main", user: str = "") -> memory_pb2.MemoryScope:
    return memory_pb2.MemoryScope(agent=agent, user=user)


def note(text: str, **fields: object) -> memory_pb2.MemoryItem:
    return memory_pb2.MemoryItem(text=text, source="note", **fields)  # type: ignore[arg-type]
